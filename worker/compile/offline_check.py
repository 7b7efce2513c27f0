"""A kernels folder built as a worker builds it, on a machine with no GPU (`gemmwatch check`).

Each kernel is resolved with a reference GPU's figures, compiled by the same compile process a worker
uses (NVRTC, nvcc where the description says so, Triton for a @triton.jit kernel), and its arguments
are planned from the parameters the binary records, as the GPU process plans them before a launch.
So a description whose source does not build, whose entry the build does not make, or whose `args`
do not fit the kernel's parameters is told here, in seconds, instead of in a job's first case.

A Triton kernel given by its repository's Python wrapper is read as a worker reads it, on stand-ins
in the confined compile process (no GPU is needed for that), and then built as if described by hand.
What only a GPU shows is not checked: a wrong result, a fault, a launch the GPU refuses, and a
Helion kernel, whose Triton code Helion writes on the worker for each case.

The files are the user's own, checked on their own machine at their own request: they compile as
"local" (not a job's source), so the compiler's whole log is shown and no confinement is required.
The source guard still applies, so an #include a worker would refuse is refused here too.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.description.kernel import DeviceFigures, resolve
from core.description.kernel_description import KernelDescription
from worker.arguments import kernel_args
from worker.arguments.kernel_args import ArgumentMismatch, load
from worker.compile import compiler, cubin_info, launcher_library, triton_build

# Figures of one data-centre card per compute capability, for the expressions of a description
# (SM_COUNT, SMEM_PER_BLOCK, ...) on a machine with no GPU to read them from. A job never uses
# these: its worker reads its own GPU's.
REFERENCE_GPUS: dict[str, tuple[str, DeviceFigures]] = {
    "8.0": ("A100 SXM", DeviceFigures(sm_count=108, smem_per_sm=167936, smem_per_block=166912, regs_per_sm=65536,
                                      max_threads_per_sm=2048, l2_bytes=40 * 1024 * 1024, compute_capability="8.0")),
    "8.9": ("L40S", DeviceFigures(sm_count=142, smem_per_sm=102400, smem_per_block=101376, regs_per_sm=65536,
                                  max_threads_per_sm=1536, l2_bytes=96 * 1024 * 1024, compute_capability="8.9")),
    "9.0": ("H100 SXM", DeviceFigures(sm_count=132, smem_per_sm=233472, smem_per_block=232448, regs_per_sm=65536,
                                      max_threads_per_sm=2048, l2_bytes=50 * 1024 * 1024, compute_capability="9.0")),
}


@dataclass(frozen=True)
class Checked:
    """One kernel's check: `builds` True where it compiled and its arguments fit; `skipped` where it
    cannot be checked without a GPU (then `detail` says why); else `detail` is the error."""

    name: str
    builds: bool
    compiler: str
    detail: str
    skipped: bool = False


def reference(compute_capability: str) -> tuple[str, DeviceFigures]:
    """The reference card for a compute capability ("9.0" or "90"); ValueError naming those known."""
    dotted = compute_capability if "." in compute_capability else f"{compute_capability[:-1]}.{compute_capability[-1:]}"
    if dotted not in REFERENCE_GPUS:
        raise ValueError(f"no reference GPU for compute capability {compute_capability}; known: "
                         f"{', '.join(REFERENCE_GPUS)}")
    return REFERENCE_GPUS[dotted]


CHECK_DIMS = (4096, 4096, 4096)


def check_kernel(desc: KernelDescription, figures: DeviceFigures, cfg) -> Checked:
    """Build one kernel (its default tunables) for the figures' compute capability, as a worker would."""
    cc = figures.compute_capability
    if desc.language == "helion":
        return Checked(desc.name, False, "", "not checked without a GPU: Helion writes its Triton code on the "
                                             "worker, for each case", skipped=True)
    try:
        if desc.wrapper is not None:  # the launch its wrapper makes, read on stand-ins as a worker reads it
            desc = desc.with_wrapper_call(triton_build.wrapper_call(desc, cc, cfg))
        # A Triton kernel that takes sizes as tl.constexpr is built as a worker builds it for a 4096-cubed case.
        launch = resolve(desc, None, figures, "local", CHECK_DIMS)
        configs_said = ""
        if launch.language == "triton":
            described = triton_build.describe(launch, cc, cfg)
            configs = described["configs"]
            if configs and not (desc.triton and desc.triton.config is not None):
                # Under @triton.autotune a worker times every configuration; the first one is built here.
                launch = resolve(desc.with_triton_config(configs[0]), None, figures, "local", CHECK_DIMS)
                configs_said = f" (configuration 0 of its {len(configs)} @triton.autotune configurations{timed_said(desc, described)})"
            # Specialized and its @triton.heuristics computed as for that case's call.
            launch = triton_build.for_case(launch, described, kernel_args.named_values(
                launch, *CHECK_DIMS, None, None, None, 1.0, 0.0))
        tunables = ", ".join(f"{name} {value}" for name, value in desc.check_tunables(None).items())
        tunables_said = f" (tunables: {tunables})" if tunables else ""
        if launch.launcher:
            library = launcher_library.build(launch, cc, cfg)
            said = f"launcher {launch.launcher}: {len(launch.args)} args fit its parameters"
            if launch.entry is not None:  # the kernel it launches: a worker builds it for its resources
                said += "; " + entry_built(launch, cc, cfg, with_args=False)[1]
            return Checked(desc.name, True, library.compiler, said + tunables_said)
        built_by, said = entry_built(launch, cc, cfg)
        return Checked(desc.name, True, built_by, said + configs_said + tunables_said)
    except (compiler.CompileError, compiler.CompileRefused, ArgumentMismatch, ValueError) as exc:
        return Checked(desc.name, False, "", str(exc).strip() or type(exc).__name__)


def timed_said(desc: KernelDescription, described: dict) -> str:
    """What a worker's autotune will time of a kernel's configurations, where that is not all of them or
    the file asks for pruning that gemmwatch does not run."""
    configs = described["configs"]
    runnable = sum(1 for c in configs if triton_build.unsupported(c, desc) is None)
    said = f"; a worker times {runnable} of them per case" if runnable != len(configs) else ""
    if described.get("pruning"):
        said += (f"; its prune_configs_by ({', '.join(described['pruning'])}) is the file's Python and is not run: "
                 "a worker times each configuration it can run, or the one triton.config names")
    return said


def entry_built(launch, cc: str, cfg, with_args: bool = True) -> tuple[str, str]:
    """The compiler, and "entry E: 8 args fit its parameters; 168 registers, ...": the entry found in
    its build and its arguments planned, as the GPU process does before it loads the symbol (a
    launcher's entry: found only, its launcher passes the arguments). Raises as the build or the plan fails."""
    built = compiler.compile_launch(launch, cc, cfg)
    symbol = load(built, launch, lambda symbol: symbol).function
    fitted = f": {len(launch.args)} args fit its parameters" if with_args else ""
    return built.compiler, f"entry {launch.entry}{fitted}" + resources_said(built.cubin_path.read_bytes(), str(symbol))


def resources_said(cubin: bytes, symbol: str) -> str:
    """"; 168 registers, 1,024 B static shared, no stack frame": what the build gave the kernel, as
    ptxas -v would tell it (a stack frame is local arrays and spilled registers, in local memory); ""
    where the cubin does not say."""
    try:
        found = cubin_info.resources(cubin, symbol)
    except cubin_info.CubinError:
        return ""
    said = []
    if "registers" in found:
        said.append(f"{found['registers']} registers")
    if found.get("static_shared_bytes"):
        said.append(f"{found['static_shared_bytes']:,} B static shared")
    if "stack_bytes" in found:  # in local memory: local arrays and spilled registers
        said.append(f"{found['stack_bytes']:,} B stack frame" if found["stack_bytes"] else "no stack frame")
    return "; " + ", ".join(said) if said else ""
