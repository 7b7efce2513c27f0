"""The rules of a description that depend on how its kernel is built and launched: a Triton kernel
(a @triton.jit function, or the repository's Python wrapper around one), a C++ kernel the runner
launches, and a repository's own host launcher (gemmwatch's adapters among them). Called by
KernelDescription's own validation; each refusal names the field to change."""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from core.description import compile_flags
from core.description.description_fields import DEFAULT_ARGS, SCALE_ARGS, workspace_of
from core.description.gemm_form import GemmForm


class Described(Protocol):
    """What these rules read of a description: a KernelDescription, which calls them from its own
    validation (so this module, below it, names the fields it reads instead of importing it back).
    Read-only, so that a field's narrower type (a Literal, a list of constrained strings) fits."""

    @property
    def language(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def units(self) -> Sequence[str]: ...
    @property
    def files(self) -> Mapping[str, str]: ...
    @property
    def entry(self) -> str | None: ...
    @property
    def args(self) -> Sequence[str]: ...
    @property
    def grid(self) -> object: ...
    @property
    def block(self) -> object: ...
    @property
    def dynamic_smem(self) -> object: ...
    @property
    def compiler(self) -> str: ...
    @property
    def launcher(self) -> str | None: ...
    @property
    def wrapper(self) -> str | None: ...
    @property
    def triton(self) -> object: ...
    @property
    def helion(self) -> Mapping[str, Any] | None: ...
    @property
    def defines(self) -> Mapping[str, Any]: ...
    @property
    def tunables(self) -> Mapping[str, Any]: ...
    @property
    def flags(self) -> Sequence[str]: ...
    @property
    def build(self) -> str | None: ...
    @property
    def libraries(self) -> Sequence[str]: ...
    @property
    def tensor_maps(self) -> Mapping[Any, Any]: ...
    @property
    def include_dirs(self) -> Sequence[str]: ...
    @property
    def form(self) -> GemmForm: ...
    @property
    def compute_mode(self) -> str: ...
    @property
    def scales(self) -> object: ...


def check_triton(desc: Described) -> None:
    """A Triton kernel is one @triton.jit function in a Python file, launched by the runner: none of
    what C++ builds and launchers take."""
    if desc.language == "helion":
        _check_helion(desc)
        return
    if desc.helion is not None:
        raise ValueError('helion: a Helion kernel\'s config; set "language": "helion"')
    if desc.language != "triton":
        if desc.triton is not None or desc.wrapper is not None:
            what = "triton: options" if desc.triton is not None else "wrapper: a Python wrapper"
            raise ValueError(f'{what} for a Triton kernel; set "language": "triton"')
        return
    if not desc.source.endswith(".py"):
        raise ValueError(f'source {desc.source}: a Triton kernel\'s source is a Python file (.py)')
    if desc.wrapper is not None:  # entry, args and grid are what the worker reads off the wrapper's launch
        given = [name for name, value in (("entry", desc.entry), ("grid", desc.grid)) if value is not None]
        if list(desc.args) != list(DEFAULT_ARGS):  # the default is what a stored description holds
            given.append("args")
        if given:
            raise ValueError(f"{', '.join(given)}: the worker reads them off {desc.wrapper}'s launch; give either a "
                             "wrapper or the kernel's entry, args and grid")
        if desc.form.layout("C") != "row":
            raise ValueError("layout: a wrapper's C is the row-major M x N matrix it allocates")
    elif desc.entry is None or not desc.entry.isidentifier():
        raise ValueError(f"entry {desc.entry!r}: the name of the @triton.jit function in {desc.source}")
    given = [name for name, value in (("launcher", desc.launcher), ("block", desc.block), ("flags", desc.flags),
                                      ("build", desc.build), ("libraries", desc.libraries),
                                      ("include_dirs", desc.include_dirs)) if value]
    # A_map (B_map, C_map) on a Triton kernel is a host TensorDescriptor over that matrix: its block
    # shape is the map's box; the swizzle is Triton's to choose, and the runner takes the one it chose.
    swizzled = [matrix for matrix, spec in desc.tensor_maps.items() if spec.swizzle]
    if swizzled:
        raise ValueError(f"tensor_maps.{swizzled[0]}.swizzle: a Triton kernel's descriptor takes the swizzle Triton "
                         "compiles it for; leave it out")
    if given or desc.compiler != "nvrtc" or desc.dynamic_smem != 0:
        what = ", ".join(given + (["compiler"] if desc.compiler != "nvrtc" else [])
                         + (["dynamic_smem"] if desc.dynamic_smem != 0 else []))
        raise ValueError(f"{what}: not for a Triton kernel (Triton compiles it and says its block and shared "
                         "memory; a Python wrapper that launches it is named in `wrapper`)")
    if desc.grid is None and desc.wrapper is None:
        raise ValueError("grid: a Triton kernel's launch needs its grid (its programs along x, y, z)")
    sizes = list(getattr(desc.triton, "size_constexprs", None) or [])
    if len(set(sizes)) != len(sizes) or set(sizes) & set(desc.args):
        raise ValueError(f"triton.size_constexprs {sizes}: each size once, and not among the args (a tl.constexpr "
                         "is no parameter of the compiled kernel)")


def _check_helion(desc: Described) -> None:
    """A Helion kernel is a @helion.kernel function called as f(a, b): Helion writes the rest (its
    kernel, launch, constants and warps) from its config, so nothing of a launch is described."""
    if not desc.source.endswith(".py"):
        raise ValueError(f"source {desc.source}: a Helion kernel's source is a Python file (.py)")
    if desc.wrapper is None:
        raise ValueError(f"wrapper: the @helion.kernel function of {desc.source} that takes A and B and returns C")
    if not desc.wrapper.isidentifier():
        raise ValueError(f"wrapper {desc.wrapper!r}: a Helion kernel is named, not called: its @helion.kernel "
                         "function, which Helion binds to A and B alone")
    given = [name for name, value in (("entry", desc.entry), ("grid", desc.grid), ("block", desc.block),
                                      ("launcher", desc.launcher), ("triton", desc.triton), ("defines", desc.defines),
                                      ("tunables", desc.tunables), ("tensor_maps", desc.tensor_maps),
                                      ("flags", desc.flags), ("build", desc.build), ("libraries", desc.libraries),
                                      ("include_dirs", desc.include_dirs), ("units", desc.units)) if value]
    if list(desc.args) != list(DEFAULT_ARGS):
        given.append("args")
    if desc.compiler != "nvrtc" or desc.dynamic_smem != 0:
        given += (["compiler"] if desc.compiler != "nvrtc" else []) + (["dynamic_smem"] if desc.dynamic_smem else [])
    if given:
        raise ValueError(f"{', '.join(given)}: not for a Helion kernel: Helion writes its launch from the config in "
                         '"helion" (block sizes, warps, stages)')
    if desc.form.layout("C") != "row":
        raise ValueError("layout: a Helion kernel's C is the row-major M x N matrix it allocates")


UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")


def check_launcher(desc: Described) -> None:
    """A launcher is host code: only nvcc builds it, only it takes a stream, and it makes its own
    launches (no tensor map of the runner's reaches it)."""
    if desc.units and desc.launcher is None:
        raise ValueError("units: other translation units are linked into a launcher's library; a kernel's cubin is "
                         "built from `source` alone (name the launcher in \"launcher\")")
    for unit in desc.units:
        if not unit.endswith(UNIT_SUFFIXES):
            raise ValueError(f"units: {unit!r} is no file nvcc compiles ({', '.join(UNIT_SUFFIXES)}); a header is "
                             "reached through the #include that names it")
        if unit not in desc.files or unit == desc.source:
            raise ValueError(f"units: {unit!r} is " + ("the source already" if unit == desc.source else
                                                          f"not among the files ({', '.join(sorted(desc.files))})"))
    if len(set(desc.units)) != len(desc.units):
        raise ValueError("units: each file may be listed once")
    if desc.launcher is None:
        if desc.language in ("triton", "helion"):
            return  # its block is Triton's (check_triton)
        if "stream" in desc.args:
            raise ValueError('args: "stream" is a launcher\'s parameter; a kernel takes none (name the launcher in '
                             '"launcher")')
        if compile_flags.parse(list(desc.flags)).relocatable:
            raise ValueError("flags: -rdc=true links a launcher's library; a kernel's cubin is built whole, so its "
                             "device code cannot call into another unit or the device runtime (name the launcher "
                             'in "launcher", or leave -rdc=true out)')
        missing = [name for name, value in (("entry", desc.entry), ("block", desc.block), ("grid", desc.grid))
                   if value is None]
        if missing:
            raise ValueError(f"{', '.join(missing)}: a kernel's launch needs them (a description with a `launcher` "
                             "may leave them out: the launcher sets its own)")
        return
    if desc.compiler != "nvcc":
        raise ValueError('launcher: host code is built by nvcc only: set "compiler": "nvcc"')
    workspaces = [arg for arg in desc.args if workspace_of(arg)]
    if workspaces:
        raise ValueError(f"args: {workspaces[0]}: a workspace is the runner's, handed to a kernel it launches; a "
                         "launcher allocates its own")
    _check_adapter(desc.launcher, desc.libraries)
    if adapter_name(desc.launcher) == CUTE_TENSORS:
        if desc.launcher.endswith(")"):
            raise ValueError("launcher: gemmwatch::cute_tensors<...> takes no parameter types: C++ picks the "
                             "repository's launcher from the tensors, as its main's call does")
        if tuple(desc.args) != CUTE_TENSORS_ARGS:
            raise ValueError(f"args: gemmwatch::cute_tensors takes {list(CUTE_TENSORS_ARGS)} (the sizes, then A (M, K), "
                             f"B (N, K) and C (M, N), handed on as CuTe tensors), not {list(desc.args)}")


# gemmwatch's own launchers over a type a repository defines, and the header library each needs
# (worker/compile/launcher_adapters): gemmwatch::cutlass3_gemm<Gemm> runs a CUTLASS 3 device GEMM,
# gemmwatch::cutlass2_gemm<Gemm> a CUTLASS 2 one (cutlass::gemm::device::Gemm); gemmwatch::functor<Type>
# builds an object of the type once per size and calls it (no library).
class Adapter(NamedTuple):
    library: str | None  # the header library it is written against
    runs: str  # what its template argument is, in an error's words
    spelled: str  # that argument in an example


LAUNCHER_ADAPTERS = {"gemmwatch::cutlass3_gemm": Adapter("cutlass", "the GEMM type", "Gemm"),
                     "gemmwatch::cutlass2_gemm": Adapter("cutlass", "the GEMM type", "Gemm"),
                     "gemmwatch::functor": Adapter(None, "the type (a class with an operator())", "Type"),
                     "gemmwatch::cute_tensors": Adapter("cutlass", "the repository's launcher that takes CuTe tensors",
                                                        "launch_gemm")}
CUTE_TENSORS = "gemmwatch::cute_tensors"
# gemmwatch::cute_tensors' own parameters: the sizes, then the three matrices it hands on as CuTe tensors.
CUTE_TENSORS_ARGS = ("M", "N", "K", "A", "B", "C")


def adapter_name(launcher: str | None) -> str:
    """The launcher's name before its template arguments, spaces dropped ("gemmwatch::functor")."""
    return (launcher or "").split("<", 1)[0].replace(" ", "")


def _check_adapter(launcher: str, libraries: Sequence[str]) -> None:
    """A launcher in gemmwatch's namespace is one of gemmwatch's adapters, given the type it runs
    and the library it is written against."""
    name = adapter_name(launcher)
    if not name.startswith("gemmwatch::"):
        return
    if name not in LAUNCHER_ADAPTERS:
        raise ValueError(f"launcher: {name} is not one of gemmwatch's launchers ({', '.join(LAUNCHER_ADAPTERS)})")
    adapter = LAUNCHER_ADAPTERS[name]
    if "<" not in launcher:
        raise ValueError(f'launcher: name {adapter.runs} {name} runs, as the repository spells it: '
                         f'"{name}<{adapter.spelled}>"')
    library = adapter.library
    if library is not None and library not in libraries:
        raise ValueError(f'launcher: {name} is written against {library}: add "libraries": ["{library}"]')


def check_scales(desc: Described) -> None:
    """FP8's block scales: an fp8 kernel that names both scale arrays among its args and is launched by
    the runner (a CUDA or Triton kernel by its entry); a kernel that takes the arrays says so."""
    named = [role for role in SCALE_ARGS if role in desc.args]
    if desc.scales == "tensor":
        if named:
            raise ValueError(f"args name {', '.join(named)}, FP8's block scales: give them in `scales` "
                             '({"A": "1x128", "B": "128x128"}, DeepSeek-V3\'s recipe)')
        return
    if desc.compute_mode != "fp8":
        raise ValueError(f"scales per block are FP8's; this kernel is {desc.compute_mode}")
    if desc.wrapper or desc.launcher or desc.language == "helion":
        how = "its wrapper" if desc.wrapper else "its launcher" if desc.launcher else "Helion"
        raise ValueError(f"block scales reach a kernel the runner launches itself, by entry and args; {how} is not "
                         "read for them yet: describe the kernel by its entry, args (scale_A, scale_B among them) and grid")
    if len(named) != 2:
        raise ValueError("a kernel with block scales takes both arrays: name scale_A and scale_B among its args, "
                         f"in its parameters' order (args: {list(desc.args)})")
