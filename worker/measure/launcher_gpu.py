"""A launcher case on the GPU, inside its confined process (worker/measure/launcher_case.py): the CuPy device
whose kernel call is the job's launcher, and the set-up hook that makes it.

The launcher gets device pointers to the case's matrices, its scalars as its binary declares them
(a `T const* alpha` is a host pointer) and the handle of the stream the runner times on; its
launches are the sample between the two CUDA events. What CUDA's, CuPy's and NVML's
initialisation open is allowed at set-up only (docs/SECURITY.md, "A job's host code"); after it,
the device files alone.
"""

import ctypes
import os
import time
from pathlib import Path

from core.settings import Settings
from worker.arguments import kernel_args, tensor_maps
from worker.compile import launcher_library
from worker.gpu.cupy_device import CupyDevice
from worker.launch.host_jail import Allowance
from worker.measure.launcher_hook import LauncherCase


class CupyLauncherDevice(CupyDevice):
    """CupyDevice, but a kernel call is a call of the job's launcher (cuBLAS in the rehearsal, before
    the launcher is loaded). It never compiles: the launcher's plan came with the request."""

    calls_launcher_itself = True

    def __init__(self, cfg: Settings, plan: kernel_args.ArgPlan, compiler_label: str):
        super().__init__(cfg)
        self.plan, self.compiler_label = plan, compiler_label
        self.launcher = None  # the job's function (ctypes), once loaded
        self.host_call_ms: list[float] = []  # how long each call of it held the host (launcher_hook.host_time)
        # A stream of its own, current for CuPy and cuBLAS: the launcher is handed this one. It is a
        # blocking stream, as cudaStreamCreate makes in a repository's own runner: a launcher that
        # takes the stream and still launches on the legacy default stream (cute-gemm-101's V01-V03
        # write `<<<grid, block, smem>>>`) is then ordered with the case's fills, checks and events,
        # where a non-blocking stream would race it. A launcher that takes no stream is timed on the
        # legacy default stream itself.
        takes_stream = any(role == "stream" for role, _how in plan.passing)
        self.stream = self.cp.cuda.Stream(non_blocking=False) if takes_stream else self.cp.cuda.Stream.null
        self.stream.use()

    def compile(self, launch) -> kernel_args.LoadedKernel:
        return kernel_args.LoadedKernel(None, self.plan, self.compiler_label)

    def kernel_call(self, kernel, launch, m, n, k, a, b, c, alpha, beta, batch=1, buffers=None):
        if self.launcher is None:  # the rehearsal: cuBLAS in its place
            return self.cublas_call(a, b, c, launch.precision, launch.form, batch)
        named = kernel_args.named_values(launch, m, n, k, a, b, c, alpha, beta, batch, buffers) | {"stream": self.stream}
        # Encoded here, as the repository's own caller does.
        for matrix, encoded in self._encoded_maps(launch, m, n, k, a, b, c).items():
            # No map at this size: a launcher has no value for "none", so stand_in says why (problem.kernel_call
            # refuses such a case first, by the same rule).
            named[f"{matrix}_map"] = encoded if encoded is not None else tensor_maps.stand_in(
                launch, matrix, m, n, k, kernel_args.maps_by_value(kernel.plan))
        args = launcher_library.arguments(kernel.plan, named, lambda x: x.ptr if x is self.stream else x.data.ptr)
        launcher = self.launcher
        launcher.argtypes, launcher.restype = list(args.argtypes), None

        held = self.host_call_ms

        def run():
            start = time.perf_counter()
            launcher(*args.values)
            held.append(1e3 * (time.perf_counter() - start))

        run.keep = args  # the host scalars live as long as the call
        return run

    def notes(self, precision) -> list[str]:
        # The first of CupyDevice's notes is NVRTC's -ftz=true, which a launcher built by nvcc never saw.
        return [f"the repository's own launcher, built by {self.compiler_label} with its flags and called through "
                "ctypes in a confined process: every kernel it launches timed as one GEMM",
                *super().notes(precision)[1:]]

    def resources(self, kernel, launch, m, n, k) -> dict:
        return {}  # the entry's, read by the GPU child from its cubin (worker/measure/launcher_case.py)


def nvidia_device_files() -> tuple[str, ...]:
    """/dev/nvidiactl, /dev/nvidia0.., /dev/nvidia-uvm(-tools), /dev/nvidia-caps/: read, write, ioctl."""
    return tuple(sorted(str(p) for p in Path("/dev").glob("nvidia*")))


class CupyLauncherCase(LauncherCase):
    """The GPU's hook: CuPy imported in __init__ (before any layer; CUDA not initialised yet, so no
    thread of its exists before the set-up layer), the device, NVML and the rehearsal at set-up."""

    def __init__(self, args: dict):
        super().__init__(args)
        # Imported now, before any layer, as the hook tested on the H100 and H200 does (importing
        # CuPy starts no thread); CUDA itself is initialised in set_up.
        import cupy  # noqa: F401
        import pynvml

        self.pynvml = pynvml
        self.devices = nvidia_device_files()  # listed now: under the set-up layer /dev cannot be listed

    def setup_allowance(self) -> Allowance:
        # What CUDA's and CuPy's initialisation open, seen on the H100 and H200 (docs/SECURITY.md):
        # /proc/devices, /proc/driver/nvidia, /proc/self (written too), /proc/cpuinfo, /sys, the
        # application profiles, $HOME (.nv, .cupy) and the device files.
        readable = ("/proc/devices", "/proc/driver/nvidia", "/proc/self", "/proc/cpuinfo", "/proc/meminfo",
                    "/proc/sys/vm", "/sys", "/etc/nvidia", "/usr/share/nvidia", "/usr/local/cuda", "/usr/local/nvidia")
        return Allowance(readable=readable, writable=(os.environ["HOME"], "/proc/self"), devices=self.devices)

    def call_allowance(self) -> Allowance:
        # The device files again: a launcher that allocates (cudaMalloc) makes the driver open them anew.
        return Allowance(devices=self.devices)

    def make_device(self) -> CupyLauncherDevice:
        # NVML stays initialised for the process's life: the runner's readings (nvmlInit and
        # Shutdown around each, reference-counted) then open nothing after confinement.
        self.pynvml.nvmlInit()
        try:  # a library built for another target is JIT-compiled from PTX: the driver finds the JIT loaded
            ctypes.CDLL("libnvidia-ptxjitcompiler.so.1")
        except OSError:
            pass
        return CupyLauncherDevice(self.cfg, self.plan, self.compiler)
