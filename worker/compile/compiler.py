"""Compiling a kernel: NVRTC in a short-lived, confined process; cubins cached by content.

The GPU process never compiles. It asks `compile_kernel` for a cubin and loads that, so a job's
source meets the compiler only in worker/compile/compile_sandbox.py, a process that
  - starts from a fresh interpreter with an environment of a few harmless variables (no
    DATABASE_URL, BROKER_URL, tokens or any GEMMWATCH_* setting),
  - runs under a memory limit (GEMMWATCH_COMPILE_MEMORY_MB) and a time limit
    (GEMMWATCH_COMPILE_TIMEOUT_S), so a runaway compile ends its case clearly,
  - confines itself with Landlock before it compiles: no file can be opened, but for reading
    CUDA's own header folders where the kernel includes a device header (core/description/kernel_includes.py).
The kernel's own files and the stand-ins for host headers reach NVRTC in memory.
Where Landlock is missing, a job's own sources are refused unless GEMMWATCH_UNCONFINED_SOURCES
says `warn` (built-in sources from the registry are ours and always compile).

The compile log of a job's source shows diagnostics located in that source only (layer 3):
anything located in another file is replaced by a line saying it was withheld.

A cubin is stored under a hash of (source, headers, options, name expressions, NVRTC version), so
a kernel compiled once is not compiled again, by this worker or after a restart. The cache keeps
NVRTC's raw log; each caller gets it filtered as its origin asks.

Issue 37, row 3, every size bounded: the compile process sends back at most
max(1 MiB, GEMMWATCH_COMPILE_LOG_MAX_BYTES) of its log (head and tail), and a caller gets at most
GEMMWATCH_COMPILE_LOG_MAX_BYTES of it as shown; a cubin or library over GEMMWATCH_KERNEL_MAX_BYTES
is refused; the cache holds at most GEMMWATCH_KERNEL_CACHE_MAX_BYTES, its least recently used
entries evicted as a new one comes in.
"""

import re

from core.description import compile_flags, kernel_includes, launch_checks
from core.description.kernel import Launch, target_compute_capability
from core.description.kernel_includes import IncludeRefused
from core.description.source_guard import SourceRefused
from worker.compile import absent_reads, failed_compiles, header_libraries, nvcc
from worker.compile.compile_cache import build
from worker.compile.compile_log import WITHHELD, filter_log, own_file_names, own_file_names_of, rename_files  # noqa: F401
from worker.compile.compile_process import nvrtc_library, probe, probe_nvcc
# What a compile gives or refuses, named here too: callers know compiling by this module.
from worker.compile.compiled import CompiledKernel, CompileError, CompileRefused  # noqa: F401

ENTRY_UNIT = "gemmwatch_entry.cu"  # the file an nvcc build compiles (worker/compile/compile_sandbox.py writes it)


def arch_option(compute_capability: str) -> str:
    """'9.0' or '90' -> -arch=sm_90 (a cubin: the driver loads it without a PTX JIT)."""
    return f"-arch=sm_{compute_capability.replace('.', '')}"


_DEFINE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def compile_launch(launch: Launch, compute_capability: str, cfg, library: bool = False) -> CompiledKernel:
    """A kernel (built-in or a job's) as a cubin for a GPU of this compute capability: the one
    place that chooses the options, for the GPU runner and the CPU double alike. library: the
    launch's host launcher as a shared library instead (nvcc; worker/compile/launcher_library.py)."""
    if launch.language == "triton":  # Python: compiled by Triton in the same confined process
        from worker.compile import triton_build  # here: the C++ paths never need it

        return triton_build.compile_triton(launch, compute_capability, cfg)
    # -ftz=true: what CuPy's own NVRTC path always added, so figures stay comparable.
    # A kernel built for one target (sm_90a) names it; the runner checks the GPU matches first.
    # The name reaches NVRTC's options, so it must be a target and nothing else, whatever stored it:
    # NVRTC reads "sm_90\0..." as sm_90, and a job row written past the API could hold anything.
    target = launch.build_target
    if launch.target is not None:
        try:
            target_compute_capability(launch.target)
        except ValueError as exc:
            raise CompileRefused(str(exc)) from None
    # Each -D likewise: the API allows identifiers and integers only, but a stored row could
    # hold "BK": "8 -I/etc" or "X\0 -I/etc" (tried: NVRTC compiled both, reading a macro value
    # and stopping at the NUL); nothing but NAME=integer becomes an option.
    for name, value in launch.defines.items():
        if not (isinstance(name, str) and _DEFINE_NAME.fullmatch(name)) or type(value) is not int:
            raise CompileRefused(f"not a -D NAME=integer: {name!r}={value!r}")
    # Layer 1 once more, here: a row written past the API (or an old one) meets the same guard,
    # and what each #include leads to is decided by us, not by NVRTC's search.
    try:
        headers = kernel_includes.resolve(launch.files, launch.source, list(launch.include_dirs),
                                          compiler=launch.compiler, units=launch.units)
    except (SourceRefused, IncludeRefused) as refusal:
        raise CompileRefused(f"source refused: {refusal}") from None
    arch = f"-arch={target}" if target else arch_option(compute_capability)
    if launch.compiler == "nvcc":
        try:
            return compile_nvcc(launch, arch, cfg, library)
        except CompileError as failed:
            raise CompileError(f"{failed}{compile_flags.build_hint(str(failed), launch.build)}") from None
    # CUDA's headers of the NVRTC's own release (a CUDA 12 folder beside a CUDA 13 NVRTC lacks crt/mma.h).
    include_dirs = (kernel_includes.toolkit_include_dirs(nvrtc_library(cfg), probe(cfg).version,
                                                        cfg.cuda_include_dirs)
                    if headers.needs_toolkit else ())
    options = [arch, "-ftz=true", *launch.compile_options(), *(f"-I{d}" for d in include_dirs)]
    # The entry always goes through an NVRTC name expression: a template instantiation
    # ("sgemm<BM, 8>", the macros expanded), or a C++ function whose symbol name is mangled.
    return compile_kernel(launch.files[launch.source], name=launch.source, options=options,
                          name_expressions=(launch.entry,), untrusted=launch.origin == "job", cfg=cfg,
                          headers=headers.by_name, include_dirs=include_dirs, shown_as=headers.paths)


def compile_kernel(source: str, *, name: str, options: list[str], name_expressions: tuple[str, ...] = (),
                   untrusted: bool, cfg, headers: dict[str, str] | None = None,
                   include_dirs: tuple[str, ...] = (), shown_as: dict[str, str] | None = None) -> CompiledKernel:
    """A cubin for `source` built by NVRTC, from the cache or from a confined compile.

    untrusted: the job's own source (refused where the compiler cannot be confined, unless
    the settings say otherwise; its compile log is filtered).
    headers: in-memory headers by the name an #include spells; include_dirs: folders of CUDA's
    headers the compile process may read (read-only), given with -I in `options`; shown_as: the
    path in the kernel's folder to name in the log for a spelled header name.
    """
    headers = headers or {}
    confinement = probe(cfg)
    if confinement.version is None:
        raise CompileRefused(confinement.detail)
    own_names = own_file_names(source, name) | own_file_names_of(headers)

    def shown(raw_log: str) -> str:
        log = rename_files(filter_log(raw_log, own_names, include_dirs) if untrusted else raw_log, shown_as)
        return log + host_code_hint(log)

    request = {"source": source, "name": name, "options": options, "name_expressions": list(name_expressions),
               "headers": headers, "readable": list(include_dirs), "nvrtc_library": nvrtc_library(cfg)}
    key = [source, name, options, list(name_expressions), sorted(headers.items()), confinement.version, nvrtc_library(cfg)]
    return failed_compiles.remembered(build, request, key, confinement, f"NVRTC {confinement.version}", untrusted,
                                      shown, cfg)


# NVRTC's words for a function with no __device__ or __global__: host code, which it never builds.
_HOST_CODE_IN_JIT = "host functions are not allowed in JIT mode"


def host_code_hint(log: str) -> str:
    """Where NVRTC's log says the file holds host code (a main, a launcher, the runtime's calls): what
    builds such a file. NVRTC's own advice there (-default-device) would make the host code device code."""
    if _HOST_CODE_IN_JIT not in log:
        return ""
    return ('\n(gemmwatch: NVRTC builds device code alone, and this file holds host code: set "compiler": "nvcc" '
            'to build it as the repository does, host code included; docs/KERNELS.md, "Building as the repository does")')


_OVERLOADED = re.compile(r'cannot determine which instance of overloaded function "([^"]+)" is intended')


def overloaded_launcher_hint(log: str) -> str:
    """Where nvcc's log says the launcher's name is overloaded: how to name one of its functions."""
    found = _OVERLOADED.search(log)
    if found is None:
        return ""
    name = found.group(1)
    return (f'\n(gemmwatch: the file defines more than one {name}: name the one to call with its parameter types, '
            f'as C++ spells them, e.g. "launcher": "{name}(void*, void*, void*, int, int, int)"; docs/KERNELS.md, '
            '"A repository\'s own launcher")')


# The form of the unit a launcher's library is built from (worker/compile/compile_sandbox.py, a script
# not imported here): a library built from an older form is not taken from the cache. 2: the entry's
# shared memory opened before the launcher's address is handed out.
LAUNCHER_UNIT_FORM = "launcher unit 2"


def compile_nvcc(launch: Launch, arch: str, cfg, library: bool = False) -> CompiledKernel:
    """A kernel's files built by nvcc, host code and all, in the confined compile process: a cubin,
    or (library) a shared library exporting the launch's launcher, its functions read from .dynsym."""
    path = nvcc.nvcc_path(cfg)
    if path is None:
        raise CompileRefused("no nvcc on this worker: install gemmwatch[compile] (the nvidia-cuda-nvcc wheel) or "
                             "set GEMMWATCH_NVCC")
    confinement = probe_nvcc(path, cfg.compile_timeout_s, cfg.compile_memory_mb)
    if confinement.version is None:
        probe_nvcc.cache_clear()  # only an answer is remembered (as for NVRTC)
        raise CompileRefused(confinement.detail)
    # A library's build takes its target as one -gencode: for anything but a cubin, nvcc turns
    # -arch=sm_90a into sm_90a's code plus compute_90's PTX, which a wgmma kernel cannot be.
    target = nvcc.library_target(arch) if library else arch
    request = nvcc.request(launch, path, target, cfg.compile_timeout_s)
    request["preload"] = absent_reads.library(str(cfg.data_dir / "compile-shim"))
    libraries = header_libraries.find(launch.libraries, cfg)
    for lib in libraries:  # on the include path, and readable by the confined compile
        request["options"] += [f"-I{d}" for d in lib.include_dirs]
        request["readable"] = [*request.get("readable", []), *lib.include_dirs]
    adapter = header_libraries.adapter_header(launch.launcher) if library else None
    if library:
        request["launcher"] = launch.launcher
        request["entry"] = launch.entry  # its shared memory opened before the first call (compile_sandbox)
    if adapter:  # gemmwatch's launcher over the repository's type, compiled after its unit
        request["adapter"] = adapter
        request["options"].append(f"-I{header_libraries.ADAPTER_DIR}")
        request["readable"] = [*request.get("readable", []), str(header_libraries.ADAPTER_DIR)]
        if launch_checks.adapter_name(launch.launcher) == launch_checks.CUTE_TENSORS:  # the tensors' types (in the key)
            request["options"] += [f"-D{macro}={spelled}" for macro, spelled in
                                   header_libraries.cute_tensor_types(launch).items()]
    stand_in = header_libraries.build_headers(launch.build)
    if stand_in:  # <torch/extension.h> and torch::Tensor, for a file PyTorch builds
        request["options"].append(f"-I{stand_in}")
        request["readable"] = [*request.get("readable", []), str(stand_in)]
    # nvcc names the kernel's files as src/<path>, and the unit it compiles as gemmwatch_entry.cu.
    own = {f"src/{p}" for p in launch.files} | {ENTRY_UNIT}
    shown_as = {f"src/{p}": p for p in launch.files} | {
        ENTRY_UNIT: f"(the unit that names the {'launcher' if library else 'entry'})"}
    untrusted = launch.origin == "job"

    # The library's headers are public, pinned files: a diagnostic located in them is shown.
    toolkit = tuple(kernel_includes.nvcc_include_dirs(path)) + tuple(d for lib in libraries for d in lib.include_dirs) \
        + ((str(header_libraries.ADAPTER_DIR),) if adapter else ()) + tuple(request["readable"])

    def shown(raw_log: str) -> str:
        log = rename_files(filter_log(raw_log, own, toolkit) if untrusted else raw_log, shown_as)
        return log + nvcc.missing_header_hint(log, path) + overloaded_launcher_hint(log)

    key = ["nvcc", sorted(launch.files.items()), launch.source, launch.entry, request["options"],
           confinement.version, path, nvcc.host_compiler_dirs(),
           *(["library", launch.launcher, list(launch.units), LAUNCHER_UNIT_FORM] if library else []),
           [(lib.name, lib.version) for lib in libraries],
           # the adapter's header and those it includes (gemmwatch/workspace.h): every header of the folder
           *([adapter, header_libraries.headers_text(header_libraries.ADAPTER_DIR)] if adapter else []),
           *([header_libraries.headers_text(stand_in)] if stand_in else [])]
    label = " + ".join([f"nvcc {confinement.version}", *(lib.label for lib in libraries)])
    return failed_compiles.remembered(build, request, key, confinement, label, untrusted,
                                      shown, cfg, ".so" if library else ".cubin")


