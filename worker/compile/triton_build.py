"""A Triton kernel (`"language": "triton"`) compiled to a cubin the runner loads and launches like
any other: the request for the confined compile process (worker/compile/triton_sandbox.py does the
compile there), each parameter's Triton type from its role and the kernel's precision, and the
cache key. Timing never runs the job's Python: only its compile does, confined.
"""

import functools
from dataclasses import replace

from core.description.kernel import Launch
from core.description.description_fields import (SCALE_ARGS, WORKSPACE_TYPES, hook_zeroes, integer_constant,
                                                 is_expression, is_filler, workspace_of, zeroed_by_runner)
from core.description.wrapper_call import plan as call_plan
from core.description.kernel_description import KernelDescription
from worker.compile import failed_compiles
from worker.compile.failed_compiles import digest_of
from worker.arguments.kernel_args import INTEGER_ROLES
from worker.arguments.tensor_maps import data_type
from worker.compile.compile_cache import build
from worker.compile.compile_process import run_sandbox
from worker.compile.compiled import CompiledKernel, CompileRefused, CompilerConfinement

# Triton's type for a pointer to each of gemmwatch's element types (core/description/precision.py).
POINTER = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "float8_e4m3": "*fp8e4nv"}


@functools.lru_cache(maxsize=4)
def probe(compute_capability: str, timeout_s: float, memory_mb: int) -> CompilerConfinement:
    """Triton's release, and whether its compile process can be confined (asked once per process)."""
    try:
        reply = run_sandbox({"tool": "triton", "probe": True, "compute_capability": compute_capability}, timeout_s,
                            memory_mb)
    except CompileRefused as exc:
        return CompilerConfinement(False, str(exc), None)
    if not reply.get("ok"):
        return CompilerConfinement(False, reply.get("error", "no answer"), None)
    return CompilerConfinement(bool(reply["confined"]), reply["confinement"], reply["triton"])


def types(launch: Launch) -> list[str]:
    """Each parameter's Triton type, in the order of args: the matrices' pointers in the
    precision's types, sizes and strides as i32, alpha and beta as fp32; a constant as its number."""
    precision = launch.precision
    out = []
    for role in launch.args:
        if role in ("A", "B"):
            out.append(POINTER[precision.input_type])
        elif role == "C":
            out.append(POINTER[precision.output_type])
        elif role in INTEGER_ROLES:
            out.append("i32")
        elif role == "null" or role in SCALE_ARGS:  # FP8's block scales: FP32 arrays
            out.append("*fp32")
        elif role.endswith("_map"):  # a host TensorDescriptor: its block [lines, contiguous] from tensor_maps
            matrix = role.removesuffix("_map")
            inner, outer, _swizzle = launch.tensor_maps[matrix]
            out.append(f"tensordesc<{POINTER[data_type(launch, matrix)][1:]}[{outer}, {inner}]>")
        elif integer_constant(role) is not None or is_expression(role):
            out.append("i32")  # "=1": a stride of 1, say; "=(K + 127) // 128": a scale array's row stride
        elif workspace := workspace_of(role):  # the runner's zeroed buffer: a pointer to its elements
            out.append(WORKSPACE_TYPES[workspace[0]][1])
        elif role in ("alpha", "beta") or is_filler(role):
            out.append("fp32")
        else:
            raise CompileRefused(f"{launch.variant}: args names {role}, which a Triton kernel cannot take yet")
    return out


def specialization(launch: Launch, values: dict) -> tuple[str, ...]:
    """Each arg as Triton's launcher would specialize it for these values (kernel_args.named_values):
    "1" for an integer equal to 1 (compiled in, as Triton does), "D" for a pointer (every matrix
    gemmwatch allocates is aligned far past 16 bytes) or an integer divisible by 16, else "". The
    kernel is then compiled as Triton would compile it for the same call: without it, a unit stride
    and 16-byte alignment are unknown to the compiler and its loads stay narrow. Read off arg_values,
    so that an integer is worked out in one place."""
    out = []
    for role, value in zip(launch.args, arg_values(launch, values)):
        if role in ("A", "B", "C", *SCALE_ARGS) or workspace_of(role):
            out.append("D")
        elif isinstance(value, int):  # a size, stride, expression or integer constant (alpha's 1.0 is a float)
            out.append("1" if value == 1 else "D" if value % 16 == 0 else "")
        else:
            out.append("")
    return tuple(out)


def arg_values(launch: Launch, values: dict) -> tuple[int | float | None, ...]:
    """Each arg's value for these values (kernel_args.named_values), as a @triton.heuristics function reads
    the call's arguments: sizes, strides, expressions and integer constants as integers, alpha, beta and
    float constants as floats, a matrix or a map as None (its buffer is the runner's)."""
    out: list[int | float | None] = []
    for role in launch.args:
        if role in INTEGER_ROLES or is_expression(role):
            out.append(int(values[role]))
        elif integer_constant(role) is not None:
            out.append(integer_constant(role))
        elif role in ("alpha", "beta"):
            out.append(float(values[role]))
        elif is_filler(role) and role.startswith("="):
            out.append(float(role[1:]))
        else:
            out.append(None)
    return tuple(out)


def for_case(launch: Launch, described: dict, values: dict) -> Launch:
    """The launch as Triton's launcher would compile it for one call with these values: its args
    specialized, and where the kernel has @triton.heuristics, their values to compute them from."""
    return replace(launch, specialization=specialization(launch, values),
                   arg_values=arg_values(launch, values) if described.get("heuristics") else ())


# Configurations a description cannot state (a cluster of CTAs, a register cap): not taken.
_UNSUPPORTED = ("num_ctas", "maxnreg")


def unsupported(config: dict, desc: KernelDescription) -> str | None:
    """Why a configuration cannot be run as a description (`desc`: its args, its c_starts_zero) says it, or None.
    A pre_hook is the job's Python, which never runs beside the timer: one read as zeroing C or a workspace
    (triton-lang/kernels' split-K configurations zero C) runs, the runner zeroing those before each call in its
    time (KernelDescription.with_triton_config); one that zeroes anything else is passed over; one that could
    not be read runs only where the description zeroes C itself (`c_starts_zero`), else it would be timed and
    checked over a C its hook was meant to clear."""
    odd = [f"{name}={config[name]}" for name in _UNSUPPORTED if config.get(name) not in (None, 1)]
    if any(type(v) not in (int, bool) for v in config["kwargs"].values()):
        odd.append("a value that is not an integer")
    zeroed = hook_zeroes(config, desc.args)
    if zeroed is None and not desc.c_starts_zero:
        why = config["pre_hook"].get("unread", "") if isinstance(config["pre_hook"], dict) else ""
        odd.append(f"a pre_hook (the job's Python before each launch, not read as zeroing the kernel's arguments"
                   f'{f": {why}" if why else ""}; where it zeroes C, "c_starts_zero": true does the same)')
    elif others := [arg for arg in zeroed or () if not zeroed_by_runner(arg)]:
        odd.append(f"a pre_hook that zeroes {', '.join(others)} (the runner zeroes only C and workspaces before a call)")
    return ", ".join(odd) or None


def _confined_triton(compute_capability: str, cfg) -> tuple[str, CompilerConfinement]:
    cc = compute_capability.replace(".", "")
    confinement = probe(cc, cfg.compile_timeout_s, cfg.compile_memory_mb)
    if confinement.version is None:
        probe.cache_clear()  # only an answer is remembered (as for NVRTC and nvcc)
        raise CompileRefused(confinement.detail)
    return cc, confinement


# A file's kernel as described by the compile process, per file texts, entry, target and Triton
# release: its parameters and @triton.autotune configurations. Only answers are kept.
_described: dict[str, dict] = {}


def describe(launch: Launch, compute_capability: str, cfg) -> dict:
    """The kernel's parameters, tl.constexpr names and the configurations its @triton.autotune
    lists (worker/compile/triton_module.describe_config each; empty for a plain @triton.jit), read in the
    confined compile process; CompileRefused with the file's own error where it cannot be read."""
    cc, confinement = _confined_triton(compute_capability, cfg)
    request = {"tool": "triton", "describe": True, "files": dict(launch.files), "source": launch.source,
               "entry": launch.entry, "compute_capability": cc}
    key = digest_of([sorted(launch.files.items()), launch.source, launch.entry, cc, confinement.version])
    if key not in _described:
        reply = run_sandbox(request, cfg.compile_timeout_s, cfg.compile_memory_mb)
        if not reply.get("ok"):
            raise CompileRefused(reply.get("log") or reply.get("error") or "no answer")
        _described[key] = {name: reply.get(name, []) for name in ("params", "constexprs", "configs", "skipped",
                                                                   "heuristics", "pruning")}
        _described[key]["triton"] = confinement.version
    return _described[key]


_called: dict[str, dict] = {}


def wrapper_call(desc: KernelDescription, compute_capability: str, cfg,
                 dims: tuple[int, int, int] | None = None) -> dict:
    """The one launch a description's `wrapper` makes, read in the confined compile process
    (worker/compile/triton_wrapper.py): entry, args, defines, grid and Triton options, as `with_wrapper_call`
    takes them; CompileRefused with what the wrapper did where it cannot be read so. Once per file set.
    dims: the one size the file was written for (Helion's code for a case), read at those numbers."""
    cc, confinement = _confined_triton(compute_capability, cfg)
    layout = {x: desc.form.layout(x) for x in ("A", "B")}
    request = {"tool": "triton", "wrapper": desc.wrapper, "wrapper_plan": call_plan(desc.wrapper),
               "files": dict(desc.files), "source": desc.source,
               "entry": desc.wrapper, "compute_capability": cc, "layout": layout,
               "input_type": TORCH_TYPE[desc.precision.input_type], "dims": list(dims) if dims else None}
    key = digest_of([sorted(desc.files.items()), desc.source, desc.wrapper, layout, request["input_type"], cc,
                     confinement.version, request["dims"]])
    if key not in _called:
        reply = run_sandbox(request, cfg.compile_timeout_s, cfg.compile_memory_mb)
        if not reply.get("ok"):
            raise CompileRefused(reply.get("log") or reply.get("error") or "no answer")
        _called[key] = reply["call"]
    return _called[key]


# The name torch gives each of gemmwatch's element types (what a wrapper compares a.dtype with).
TORCH_TYPE = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn"}


def compile_triton(launch: Launch, compute_capability: str, cfg) -> CompiledKernel:
    cc, confinement = _confined_triton(compute_capability, cfg)
    num_warps = launch.block[0] // 32 if launch.block else 4
    request = {"tool": "triton", "files": dict(launch.files), "source": launch.source, "entry": launch.entry,
               "types": types(launch), "constants": {**launch.defines, **launch.string_constexprs}, "num_warps": num_warps,
               "num_stages": launch.num_stages, "compute_capability": cc,
               "specialization": list(launch.specialization)}
    key = ["triton", sorted(launch.files.items()), launch.source, launch.entry, request["types"],
           sorted(request["constants"].items()), num_warps, launch.num_stages, cc, confinement.version,
           request["specialization"]]
    if launch.arg_values:  # @triton.heuristics compute constexprs from them: a cubin per set of values
        request["arg_values"] = list(launch.arg_values)
        key.append(request["arg_values"])
    return failed_compiles.remembered(build, request, key, confinement, f"Triton {confinement.version}",
                                      launch.origin == "job", lambda log: log, cfg, ".cubin")
