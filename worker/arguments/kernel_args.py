"""How a kernel's arguments are passed: the description names what each parameter is (M, alpha, A,
...), the compiled binary says what type it is (worker/compile/cubin_info.py), and this module decides how
each value is marshalled, refusing a kernel whose types do not fit its description.

A repository kernel may take `size_t M`, `int M` or `unsigned M`; `float alpha`, `__half alpha`,
`double alpha` or alpha by pointer (cuBLAS's device-pointer mode); A as `const float*`, `float4*`
or `const void*`. Passing a 32-bit int where the kernel reads 64 bits shifts every parameter after
it: the kernel reads garbage and nothing says why. So the plan is made from the binary, once per
compiled kernel, the same for the GPU and the CPU double (both call `plan` and `values`).
"""

import math
import re
import sys
from dataclasses import dataclass

import numpy

from core.description import kernel_expr
from core.description.description_fields import (SCALE_ARGS, WORKSPACE_TYPES, integer_constant, is_expression,
                                                 is_filler, workspace_of)
from worker.arguments import half_arrays, tensor_maps, torch_tensors
from worker.arguments.tensor_maps import DESCRIPTOR_PARTS, MAP_BYTES, descriptor_roles, triton_box

INTEGER_ROLES = frozenset({"M", "N", "K", "lda", "ldb", "ldc", "batch", "stride_a", "stride_b", "stride_c"})
SCALAR_ROLES = frozenset({"alpha", "beta"})
MATRIX_ROLES = frozenset({"A", "B", "C", "D"})  # D: C's buffer, written where C was read
SCALE_ROLES = frozenset(SCALE_ARGS)  # FP8's block scales: FP32 arrays (core/description/precision.py)

# Scalar C++ types (as the demangler spells them) -> how a value is passed.
_INTEGERS = {"int": "i32", "unsigned int": "u32", "long": "i64", "unsigned long": "u64", "long long": "i64",
             "unsigned long long": "u64"}
# CUTLASS's half_t and bfloat16_t hold the same 16 bits as __half and __nv_bfloat16 (cute-gemm-101's
# launchers take `cute::half_t const* alpha`).
_FLOATS = {"float": "f32", "double": "f64", "__half": "f16", "__nv_bfloat16": "bf16", "cutlass::half_t": "f16",
           "cutlass::bfloat16_t": "bf16"}
_NUMPY = {"i32": numpy.int32, "u32": numpy.uint32, "i64": numpy.int64, "u64": numpy.uint64, "f32": numpy.float32,
          "f64": numpy.float64, "f16": numpy.float16, "u16": numpy.uint16, "b8": numpy.bool_}
# A launcher's grid or block, given by its runner (ThunderKittens' `inner_run(..., dim3 grid, dim3 block)`):
# an integer from args, its x, with y and z 1. Passed by value through ctypes (a launcher's only).
DIM3 = "dim3"
# A launcher's `torch::Tensor` parameter, as the demangler spells the stand-in's at::Tensor
# (worker/arguments/torch_tensors.py): by value, the record's address; by reference, a cell's.
TENSOR = "at::Tensor"
# Element types a matrix pointer may name, by the matrix's storage type (vectors of it too).
# CUTLASS's own element types too: a launcher over a CUTLASS GEMM takes `cutlass::half_t const*`.
_FAMILIES = {
    "float32": {"float", "float2", "float4", "cutlass::tfloat32_t"},
    "float16": {"__half", "__half2", "cutlass::half_t"},
    "bfloat16": {"__nv_bfloat16", "__nv_bfloat162", "cutlass::bfloat16_t"},
    "float8_e4m3": {"__nv_fp8_e4m3", "__nv_fp8x2_e4m3", "__nv_fp8x4_e4m3", "unsigned char", "signed char", "char",
                    "cutlass::float_e4m3_t"},
    "float64": {"double", "double2"},
}
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b")


# The parameter Triton adds after a kernel's own for its global scratch memory, where the kernel makes
# TMA descriptors on the device (tl.make_tensor_descriptor): gemmwatch passes a buffer of its own
# there (Scratch), as Triton's launcher passes one from triton.set_allocator. The profile scratch
# after it (Triton 3.5 on) is Proton's and stays null.
SCRATCH_ROLE = "triton_scratch"


@dataclass(frozen=True)
class Scratch:
    """A Triton kernel's global scratch: `per_program` bytes for each program of each CTA, the whole
    launch's in one buffer aligned to `align` bytes, each program finding its slice by its id."""

    per_program: int
    align: int
    ctas: int = 1

    def bytes_for(self, grid: tuple[int, ...]) -> int:
        return math.prod(grid) * self.ctas * self.per_program

    def buffer(self, grid: tuple[int, ...], xp):
        """One launch's scratch, uninitialised (the kernel writes its slice before it reads it), on
        an address that is a multiple of `align`."""
        size = self.bytes_for(grid)
        whole = xp.empty(size + self.align, dtype=xp.uint8)
        address = whole.data.ptr if hasattr(whole.data, "ptr") else whole.ctypes.data
        start = -address % self.align
        return whole[start:start + size]


class ArgumentMismatch(ValueError):
    """The kernel's compiled parameters do not fit its description's `args`."""


@dataclass(frozen=True)
class ArgPlan:
    """Per parameter, in order: (role, how it is passed). How: i32 u32 i64 u64 u16 f32 f64 f16 bf16
    (by value), ptr (a matrix or tensor map by address, a launcher's stream), map (a tensor map's 128
    bytes by value: `const __grid_constant__ CUtensorMap`), &map (a launcher's tensor map, by the address of its
    bytes in host memory), null (a null pointer:
    the role "null", or "ignored" for a pointer to no float), *f32 *f64 *f16 *bf16
    (a kernel's scalar in device memory, passed by address) or &f32 &f64 &f16 &bf16 (a launcher's
    scalar in host memory: the launcher dereferences it on the host, as leimao's `T const* alpha`),
    b8 (a bool, by value), dim3 (a launcher's grid or block: DIM3), tensor and &tensor (a launcher's `torch::Tensor`, by value or by reference:
    worker/arguments/torch_tensors.py)."""

    passing: tuple[tuple[str, str], ...]
    spelled: tuple[str, ...]  # each parameter as the binary spells it (or "<n bytes>")

    def describe(self) -> list[str]:
        return [f"{role}: {spelling}" for (role, _how), spelling in zip(self.passing, self.spelled)]


def _plain(type_spelling: str) -> str:
    return " ".join(_QUALIFIERS.sub(" ", type_spelling).split())


def plan(entry: str, roles: tuple[str, ...], params: list[list], input_type: str, output_type: str,
         host: bool = False) -> ArgPlan:
    """How each of the kernel's parameters is passed; ArgumentMismatch names the first that does not fit.
    host: the parameters of a host launcher (a scalar by pointer is then a host pointer)."""
    spelled = tuple(t if t else f"<{size} bytes>" for t, size in params)
    if len(params) != len(roles):
        raise ArgumentMismatch(
            f"{entry} takes {len(params)} parameter(s) ({', '.join(spelled) or 'none'}) but the description's args "
            f"name {len(roles)} ({', '.join(roles)}): list each parameter in order")
    passing = []
    for i, (role, (spelling, size)) in enumerate(zip(roles, params)):
        how = _passing(role, _plain(spelling) if spelling else None, size, input_type, output_type)
        if host and how.startswith("*"):
            how = "&" + how[1:]
        if host and role.endswith("_map"):
            # A launcher is handed the maps its caller encodes in host memory (`const CUtensorMap*`), and
            # hands them on to its kernel. By value, a CUtensorMap is 64-byte aligned on the stack, which
            # ctypes cannot lay out.
            how = {"ptr": "&map", "map": f"!{role}: a launcher takes its tensor map by address (const CUtensorMap*); "
                                         "by value is a kernel's parameter"}.get(how, how)
        if how == DIM3 and not host:
            how = f"!{role}: a dim3 is taken from args by a host launcher only, not by a kernel"
        if isinstance(how, str) and how.startswith("!"):
            raise ArgumentMismatch(f"{entry}: parameter {i + 1} ({spelled[i]}) is named {role} in args, but {how[1:]}")
        passing.append((role, how))
    return ArgPlan(tuple(passing), spelled)


def _passing(role: str, spelling: str | None, size: int | None, input_type: str, output_type: str) -> str:
    """How one parameter is passed, or "!why" where it cannot be."""
    if workspace_of(role):  # the runner's zeroed buffer: any pointer takes it (`int* locks`, `void*`)
        pointer = size == 8 if spelling is None else spelling.endswith("*")
        return "ptr" if pointer else f"!{role} is a workspace, passed by address, and the parameter is no pointer"
    if is_filler(role):
        return _filler(role, spelling, size)
    if spelling is None:  # an extern "C" kernel: only the size is known; the role says the rest
        return _by_size(role, size, input_type)
    if spelling.rstrip("&").strip() == TENSOR:
        if role not in MATRIX_ROLES:
            return f"!{role} is a torch::Tensor here, and a tensor is a matrix's: name it A, B or C"
        return "&tensor" if spelling.endswith("&") else "tensor"
    pointer = spelling.endswith("*")
    base = spelling.rstrip("*").strip() if pointer else spelling
    if role in INTEGER_ROLES:
        if pointer or base not in _INTEGERS:
            return f"!{role} must be an integer (int, unsigned, long, size_t)"
        return _INTEGERS[base]
    if role in SCALAR_ROLES:
        if base not in _FLOATS:
            return (f"!{role} must be a float, double, __half or __nv_bfloat16 (or CUTLASS's half_t, bfloat16_t), "
                    "by value or by pointer")
        return ("*" if pointer else "") + _FLOATS[base]
    if role == "stream":
        return "ptr" if spelling == "CUstream_st*" else "!stream must be a cudaStream_t"
    if role.endswith("_map") and not pointer and base.startswith("CUtensorMap"):
        return "map" if size in (None, MAP_BYTES) else f"!{role} is a CUtensorMap of {size} bytes, not {MAP_BYTES}"
    if role.endswith("_map") and pointer and any(base in names for names in _FAMILIES.values()):
        # h100_gemm's `const __nv_bfloat16* A` named A_map: the launcher would be handed a map where it reads A.
        return (f"!{role} points to {base}, a matrix's element: a tensor map is a CUtensorMap (by value, or by "
                f"address: const CUtensorMap* or void*); name a matrix {role.removesuffix('_map')}")
    if not pointer and size != 8:
        return f"!{role} must be a pointer"
    if role in SCALE_ROLES and base not in ("float", "void"):
        return f"!{role} points to {base}; FP8's block scales are FP32 (float*)"
    if role in MATRIX_ROLES and base.startswith("CUtensorMap"):
        return f"!{role} is a tensor map, not a matrix: name it {role}_map in args (and describe it in tensor_maps)"
    if role in MATRIX_ROLES:
        wanted = input_type if role in ("A", "B") else output_type
        family = next((t for t, names in _FAMILIES.items() if base in names), None)
        if family is not None and family != wanted:
            return f"!{role} points to {base} and this kernel's {role} holds {wanted} (compute_mode, output)"
    return "ptr"


def _filler(role: str, spelling: str | None, size: int | None) -> str:
    """A parameter that is no role of the GEMM's: "null" for a pointer, "ignored" as zero in whatever
    type it has (a scalar by pointer: the address of a zero; another pointer: null), "=c" as the
    constant c in its (integer or floating) type."""
    if spelling is None and role.startswith("=") and not is_expression(role) and integer_constant(role) is None:
        # An extern "C" kernel or a Triton cubin, known by its sizes alone: a constant written with a point
        # or an exponent ("=1.0", a wrapper's float scale) is a float, as Triton types a Python float.
        return {4: "f32", 8: "f64"}.get(size or 0, f"!{role} is a float constant, and the parameter is {size} bytes")
    if spelling is None:  # an extern "C" kernel: a pointer and a 64-bit integer look alike, and zero is zero
        pointer, base = size == 8, {2: "unsigned short", 4: "int", 8: "long"}.get(size or 0)
    else:
        pointer = spelling.endswith("*")
        base = spelling.rstrip("*").strip() if pointer else spelling
    if role == "ignored" and pointer and spelling is not None and base in _FLOATS:
        # A scalar by pointer gets a pointer to a zero of its type, never null: a launcher dereferences its
        # `const T* beta` on the host even where its kernel then ignores the value (cute-gemm-101's V03).
        return "*" + _FLOATS[base]
    if role == "null" or (role == "ignored" and pointer and spelling is not None):
        return "null" if pointer else "!null is for a pointer parameter (a debug buffer passed as nullptr)"
    kind = None if pointer and spelling is not None else _INTEGERS.get(base or "") or _FLOATS.get(base or "") or (
        {"unsigned short": "u16", "bool": "b8", DIM3: DIM3}.get(base or ""))
    if kind == DIM3:
        integer = role != "ignored" and (is_expression(role) or float(role[1:]).is_integer())
        return kind if integer else f"!{role} is not an integer, and a dim3 takes one (its x; y and z are 1)"
    if kind is None:
        return f"!{role} is for a number (an integer or a float); a {spelling or f'{size}-byte'} parameter takes none"
    if is_expression(role):
        # A bool takes an expression as C++ converts an integer, nonzero being true: LeetCUDA's launchers take
        # `bool swizzle`, on where the stride its runner works out from N is 256 or more.
        return kind if kind in _INTEGERS.values() or kind == "b8" else \
            f"!{role[1:]} is an integer expression, and the parameter is {spelling or f'{size}-byte'}"
    if role.startswith("=") and kind in _INTEGERS.values() and not float(role[1:]).is_integer():
        return f"!the constant {role[1:]} is not an integer, and the parameter is {spelling}"
    if role.startswith("=") and kind == "b8" and float(role[1:]) not in (0.0, 1.0):
        return f"!the constant {role[1:]} is not a bool (=0 or =1), and the parameter is {spelling}"
    return kind


def filler_value(role: str):
    """What a filler passes: nothing for a null pointer, zero for an ignored number, the constant."""
    if role == "null":
        return None
    value = 0.0 if role == "ignored" else float(role[1:])
    return int(value) if value.is_integer() else value


def _by_size(role: str, size: int, input_type: str) -> str:
    if role in INTEGER_ROLES or role.rpartition(".")[2] in DESCRIPTOR_PARTS:  # a Triton descriptor's shape, strides
        return {4: "i32", 8: "i64"}.get(size, f"!{role} must be a 4- or 8-byte integer, not {size} bytes")
    if role in SCALAR_ROLES:
        two = "bf16" if input_type == "bfloat16" else "f16"
        return {2: two, 4: "f32", 8: "f64"}.get(size, f"!{role} must be a 2-, 4- or 8-byte float, not {size} bytes")
    if role.endswith("_map") and size == MAP_BYTES:
        return "map"  # a CUtensorMap by value: no other parameter of the GEMM's is 128 bytes
    return "ptr" if size == 8 else f"!{role} must be a pointer (8 bytes), not {size} bytes"


def maps_by_value(arg_plan: ArgPlan | None) -> frozenset[str]:
    """The matrices whose tensor maps the kernel takes by value ("A" for an A_map passed so), or a
    launcher takes in host memory: neither has a value that says "no map"."""
    return frozenset() if arg_plan is None else frozenset(
        role.removesuffix("_map") for role, how in arg_plan.passing if how in ("map", "&map"))


def value(how: str, x, xp):
    """One argument as the kernel takes it: a NumPy scalar of the parameter's type, the array itself
    (by address), or a one-element device array for a scalar passed by pointer."""
    if how == "ptr":
        return x
    if how == "null":
        return numpy.uint64(0)
    if how == "map":  # the map's 128 bytes, passed as the parameter itself (a one-element array: by value)
        return numpy.frombuffer(x, dtype=numpy.dtype((numpy.void, MAP_BYTES)))
    pointer = how.startswith("*")
    kind = how.lstrip("*")
    if kind == "bf16":
        scalar = half_arrays.rounded(numpy, numpy.array([x], dtype=numpy.float32), "bfloat16")
        return xp.asarray(scalar) if pointer else scalar[0]
    typed = _NUMPY[kind](x)
    return xp.asarray(numpy.array([typed])) if pointer else typed


def values(arg_plan: ArgPlan, named: dict, xp) -> tuple:
    """The arguments in order, from the values by role."""
    return tuple(value(how, role_value(role, named), xp) for role, how in arg_plan.passing)


def tensor_view_key(matrix: str) -> str:
    """Where named_values keeps a matrix's view as a torch::Tensor (a key no role can be)."""
    return f"{matrix}:tensor"


def role_value(role: str, named: dict):
    """The value a parameter gets: the role's own, a filler's (filler_value), or an expression's for
    this case (named_values)."""
    return filler_value(role) if is_filler(role) and not is_expression(role) and not workspace_of(role) else named[role]


def received(how: str, passed) -> float:
    """The value a kernel reads from an argument passed so (alpha 0.1 as __half is 0.0999755859375):
    what a model of the kernel must compute with."""
    if how.lstrip("*") == "bf16":
        return float(half_arrays.as_float32(numpy, numpy.asarray(passed).reshape(-1))[0])
    return float(numpy.asarray(passed).reshape(-1)[0])


@dataclass(frozen=True)
class LoadedKernel:
    """A compiled kernel as a device holds it: the loaded function, how its arguments are passed,
    and what built it ("NVRTC 13.5", "nvcc 13.5.37")."""

    function: object
    plan: ArgPlan | None  # None: the entry of a launcher, which passes its arguments itself
    compiler: str
    shared_bytes: int | None = None  # the dynamic shared memory its compiler says a launch needs (Triton)
    scratch: Scratch | None = None  # the global scratch a launch needs (Triton's device-side descriptors)
    # Triton's host TensorDescriptors, by matrix: the box and swizzle it compiled their copies for
    # (contiguous side, lines, swizzle bytes), which the map the runner makes must have.
    descriptors: dict[str, tuple[int, int, int]] | None = None
    # What a Triton kernel's @triton.heuristics gave for the case it was compiled for ({"EVEN_K": False}).
    heuristics: dict | None = None


def loaded_key(launch) -> tuple:
    """What a loaded kernel is kept under by a device: everything its build and its argument plan
    depend on. The args and whether a launcher launches it are in it: the same entry described once
    behind its repository's launcher (no plan of its own) and once as a kernel (its own plan) is two
    loaded kernels, not one (a job with both failed on "'NoneType' object has no attribute 'passing'").
    So is the precision: a Triton kernel's parameter types come from it, and the same file described
    in FP16 and in FP8 is two cubins (the FP8 one once ran the FP16 cubin over E4M3 bytes). And a Triton
    kernel's word constexprs: ACTIVATION "relu" and "" are two cubins of one entry."""
    return (tuple(sorted(launch.files.items())), launch.source, launch.entry, launch.compile_options(), launch.origin,
            launch.target, launch.compiler, launch.flags, launch.args, launch.launcher, launch.specialization,
            launch.arg_values,
            launch.num_stages, launch.block, launch.compute_mode, launch.output,
            tuple(sorted(launch.string_constexprs.items())))


def load(built, launch, get_function) -> LoadedKernel:
    """The launch's entry out of a build (worker/compile/compiler.CompiledKernel), its arguments planned
    from the parameters the binary records; ArgumentMismatch where they do not fit the description."""
    kernel = built.entry(launch.entry, launch.defines)
    precision = launch.precision
    # A launcher's entry is launched by the launcher, with arguments of its making: only its
    # resources are read here (the launcher's own plan: worker/compile/launcher_library.py).
    roles = tuple(launch.args)
    scratch = descriptors = None
    if "declared" in kernel:  # Triton: the parameters it adds after the declared ones
        if "kept" in kernel:  # the args Triton compiled in (a stride of 1) are no parameters of the cubin
            roles = tuple(roles[i] for i in kernel["kept"])
        maps = [role for role in roles if role.endswith("_map")]
        if maps:  # each host TensorDescriptor: its map, then the matrix's shape and strides
            roles = tuple(part for role in roles for part in (descriptor_roles(role) if role in maps else (role,)))
            compiled_for = kernel.get("descriptors") or []
            if len(compiled_for) != len(maps):
                raise ArgumentMismatch(f"{launch.entry}: args name {len(maps)} descriptor(s) ({', '.join(maps)}) but "
                                       f"Triton compiled {len(compiled_for)}")
            descriptors = {role.removesuffix("_map"): triton_box(meta) for role, meta in zip(maps, compiled_for)}
        added = max(0, len(kernel["params"]) - len(roles))
        per_program, align = (kernel.get("scratch") or [0, 1])[:2]
        if per_program:  # the first added one is its global scratch: a null there would fault
            if not added:
                raise ArgumentMismatch(f"{launch.entry} needs {per_program} bytes of Triton's global scratch memory a "
                                       "program but its cubin has no parameter for it (a Triton gemmwatch does not know)")
            scratch = Scratch(int(per_program), max(1, int(align)), max(1, int(kernel.get("ctas", 1))))
            roles += (SCRATCH_ROLE,) + ("null",) * (added - 1)
        else:
            roles += ("null",) * added
    arg_plan = None if launch.launcher else plan(launch.entry, roles, kernel["params"], precision.input_type,
                                                 precision.output_type)
    return LoadedKernel(get_function(kernel["symbol"]), arg_plan, built.compiler, kernel.get("shared"), scratch,
                        descriptors, kernel.get("heuristics") or None)


def named_values(launch, m: int, n: int, k: int, a, b, c, alpha: float, beta: float, batch: int = 1,
                 buffers: dict | None = None) -> dict:
    """Each role's value for one call: the sizes, leading dimensions and batch strides as the
    form lays the matrices out (packed), alpha, beta, the matrices, and the case's other device buffers under
    their args (FP8's block scales as scale_A and scale_B, each workspace under its "zeros(...)" text)."""
    form = launch.form
    named = {"M": m, "N": n, "K": k, "alpha": alpha, "beta": beta, "A": a, "B": b, "C": c, "D": c, "batch": batch,
             **(buffers or {})}
    for x in ("A", "B", "C"):
        named[f"ld{x.lower()}"] = form.leading_dimension(x, m, n, k)
        named[f"stride_{x.lower()}"] = form.batch_stride(x, m, n, k)
        storage = launch.precision.output_type if x == "C" else launch.precision.input_type
        named[tensor_view_key(x)] = torch_tensors.view(form, x, m, n, k, batch, storage)
    named[tensor_view_key("D")] = named[tensor_view_key("C")]
    if launch.language == "triton" and launch.tensor_maps:  # its descriptors' shapes and strides
        named.update(tensor_maps.descriptor_values(launch, m, n, k, batch))
    scope = case_scope(launch, m, n, k, batch)
    for arg in launch.args:  # "=K * 4": this case's value, under the arg's own text
        if is_expression(arg):
            named[arg] = kernel_expr.evaluate(arg[1:], scope)
    return named


def case_scope(launch, m: int, n: int, k: int, batch: int) -> dict:
    """What an args expression reads for one case: the kernel's constants and figures, its sizes."""
    return {**launch.scope, "M": m, "N": n, "K": k, "BATCH": batch}


def workspaces(launch, m: int, n: int, k: int, batch: int, c) -> dict:
    """Each workspace arg's buffer for this case ("zeros(int32, cdiv(M, 128))"), under the arg's text, zeroed,
    in C's array module (NumPy on the CPU double, CuPy on a GPU). The caller zeroes each again before every
    call (worker/measure/problem.py), as the wrapper's torch.zeros does at home."""
    xp = sys.modules[type(c).__module__.partition(".")[0]]
    scope = case_scope(launch, m, n, k, batch)
    out: dict = {}
    for arg in launch.args:
        if (workspace := workspace_of(arg)) is not None and arg not in out:
            count, dtype = kernel_expr.evaluate(workspace[1], scope), numpy.dtype(WORKSPACE_TYPES[workspace[0]][0])
            if not 0 < count <= MAX_WORKSPACE_BYTES // dtype.itemsize:
                raise ArgumentMismatch(f"{launch.entry}: the workspace {arg} has {count} elements at {scope['M']}x"
                                       f"{scope['N']}x{scope['K']}; gemmwatch gives 1 to "
                                       f"{MAX_WORKSPACE_BYTES // dtype.itemsize:,} of {workspace[0]} (1 GiB)")
            out[arg] = xp.zeros(count, dtype=dtype)
    return out


def workspaces_of(launch, named: dict) -> list:
    """The buffers of a launch's workspace args among one call's values (named_values), each once."""
    return [named[arg] for arg in dict.fromkeys(launch.args) if workspace_of(arg)]


# A workspace's bytes, at most: 1 GiB a case (stream-K's partial sums are a tile's per program, megabytes).
MAX_WORKSPACE_BYTES = 1 << 30
