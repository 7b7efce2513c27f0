"""Test double for the GPU (CI has none). Never imported by product code.

It is a device and nothing more: it supplies what a GPU would, and the product's own runner
(worker/runner.py, worker/verify.py, worker/timing.py, worker/stats.py) makes every verdict,
statistic and ratio from it, the same code as on the H100:
  - inputs and matrices (NumPy, uniform in [-1, 1), from the case's seed);
  - kernels compiled as a worker compiles them (a job's own kernel goes through worker/compiler.py:
    NVRTC from its PyPI wheel, in the confined compile process, so compile errors, refusals and
    the filtered log come back exactly as on a GPU worker); running a kernel computes
    C = alpha·A·B + beta·C on the CPU, as the description lays out its matrices;
  - event times from a model (GFLOPS per variant, a 0.3 % spread), drawn from a generator seeded
    by the case, so every timing test is deterministic; NVML readings likewise.
Selected with GEMMWATCH_RUNNER=tests.fake_gpu:CpuRunner.

What a kernel does on this device, through markers in its source (#define NAME value):
  FAKE_GPU_SLOWDOWN_PCT p   its event times are p % longer (a slower commit of a kernel)
  FAKE_GPU_READS_C 1        it computes alpha·A·B + beta·C even at beta = 0 (a NaN in C spreads)
  FAKE_GPU_UNWRITTEN n      it leaves the last n elements of C as they were
  FAKE_GPU_REGS r           its compiled registers per thread
  FAKE_GPU_TRUNCATE 1       it writes C rounded toward zero (FP16 and BF16 C), not to nearest
And through the environment, for fault tests:
  FAKE_GPU_CRASH_VARIANT=name   the child process dies (like a sticky CUDA fault) on that variant
  FAKE_GPU_HANG_VARIANT=name    the child process never returns from that variant
  FAKE_GPU_WRONG_VARIANT=name   that variant drops its last K column (a wrong kernel)
  FAKE_GPU_THROTTLED=p          NVML reports a power cap during p % of the batches (seeded)
  FAKE_GPU_SLEEP_S=seconds      each case sleeps first (to observe progress)
  FAKE_GPU_COMPUTE_CAPABILITY=x.y  the compute capability it reports (default 0.0, no GPU):
                                kernels built for one target (sm_90a) are not applicable elsewhere
  FAKE_GPU_MODEL, FAKE_GPU_UUID  the identity it registers with (one machine standing in for several)
"""

import math
import os
import re
import socket
import time
import zlib
from contextlib import nullcontext

import numpy as np

from core.kernel import DeviceFigures, Launch
from core.settings import Settings
from worker import compiler, half_arrays, kernel_args, launcher_library, resources
from worker.runner import Runner
from worker.timing import Batch

FAKE_MODEL = "FAKE"
# The double's GPU: an H100's figures, so descriptions that read them resolve as they would there.
FIGURES = dict(sm_count=132, smem_per_sm=233472, smem_per_block=232448, regs_per_sm=65536, max_threads_per_sm=2048,
               l2_bytes=50 * 1024 * 1024, max_sm_clock_mhz=1980)
H100_FIGURES = DeviceFigures(**FIGURES, compute_capability="9.0")
CUBLAS_GFLOPS = 50_000.0
SPREAD = 0.003  # relative standard deviation of a modelled sample
SAMPLE_OVERHEAD_MS = 0.02  # what a cold sample's flush and events add to the clock


def marker(launch: Launch | None, name: str) -> int | None:
    """A `#define NAME value` in any of the kernel's files."""
    if launch is None:
        return None
    for text in launch.files.values():
        found = re.search(rf"#define\s+{name}\s+(\d+)", text)
        if found:
            return int(found.group(1))
    return None


# A built-in kernel is not compiled on the double (a job's is): its parameters are taken to be
# what its description's roles say, as the built-ins declare them (int sizes, float scalars).
_DECLARED = {"alpha": "float", "beta": "float", "A": "void*", "B": "void*", "C": "void*", "A_map": "void*",
             "B_map": "void*"}


class FakeKernel:
    """A compiled kernel on this device: what running it computes, and how long that is said to take."""

    def __init__(self, launch: Launch, variant: str, plan: kernel_args.ArgPlan, compiler_label: str):
        self.launch, self.plan, self.compiler = launch, plan, compiler_label
        self.wrong = os.environ.get("FAKE_GPU_WRONG_VARIANT") == variant
        self.reads_c = bool(marker(launch, "FAKE_GPU_READS_C"))
        self.unwritten = marker(launch, "FAKE_GPU_UNWRITTEN") or 0
        self.slowdown = 1.0 + (marker(launch, "FAKE_GPU_SLOWDOWN_PCT") or 0) / 100
        self.truncate = bool(marker(launch, "FAKE_GPU_TRUNCATE"))
        # Each variant its own speed, 40-95 % of cuBLAS, fixed by its name.
        self.gflops = CUBLAS_GFLOPS * (0.4 + (zlib.crc32(variant.encode()) % 56) / 100)


class Call:
    """A queued call (a kernel over its matrices, or cuBLAS), with the time the model gives it."""

    def __init__(self, run, model_ms: float):
        self.run, self.model_ms = run, model_ms

    def __call__(self):
        self.run()


class FakeDevice:
    xp = np
    launcher_hook = "tests.fake_launcher:CpuLauncherCase"  # a launcher case's confined process, on the CPU

    def __init__(self, cfg: Settings | None = None):
        self.cfg = cfg or Settings()
        self.compute_capability = os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0").replace(".", "")
        self._rng = np.random.default_rng(0)
        self._now = 0.0  # the clock the timing loop reads: advanced by the modelled samples

    @staticmethod
    def registration_identity() -> dict:
        model = os.environ.get("FAKE_GPU_MODEL", FAKE_MODEL)
        return {
            "name": f"{model} CPU double",
            "model": model,
            "uuid": os.environ.get("FAKE_GPU_UUID", f"FAKE-{socket.gethostname()}"),
            "index": 0,
            "sm_count": FIGURES["sm_count"],
            "compute_capability": os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0"),
            "driver": "none",
            "memory_mib": 0,
        }

    def identity(self) -> dict:
        return self.registration_identity()

    def figures(self) -> DeviceFigures:
        return DeviceFigures(**FIGURES, compute_capability=os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0"))

    def healthy(self) -> bool:
        return True

    def release_memory(self) -> None:
        pass

    def notes(self, precision) -> list[str]:
        return ["measured by tests.fake_gpu:CpuRunner, the CPU double: outputs from NumPy, event times from a model"]

    def state(self) -> dict:
        return {"sm_clock_mhz": 1980, "temperature_c": 40, "power_w": 300.0, "throttle_reasons": 0}

    # -- matrices ---------------------------------------------------------------------
    def uniform(self, seed: int, rows: int, cols: int):
        # The case's seed also seeds the modelled noise: every timing of this case is repeatable.
        self._rng = np.random.default_rng(seed)
        return (np.random.default_rng(seed).random((rows, cols), dtype=np.float32) * 2 - 1)

    def in_layout(self, x, layout: str):
        return np.asfortranarray(x) if layout == "column" else np.ascontiguousarray(x)

    def matrix(self, rows: int, cols: int, layout: str, fill: float | None = None, seed: int | None = None):
        if seed is not None:
            return self.in_layout(np.random.default_rng(seed).random((rows, cols), dtype=np.float32) * 2 - 1, layout)
        order = "F" if layout == "column" else "C"
        return np.full((rows, cols), np.nan if fill is None else fill, dtype=np.float32, order=order)

    def synchronize(self) -> None:
        pass

    def reference(self, a, b):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)

    # -- kernels ----------------------------------------------------------------------
    def compile(self, launch: Launch) -> FakeKernel:
        if launch.origin == "job":  # compiled as a worker would, for an sm_90 GPU; its arguments as its binary says
            built = compiler.compile_launch(launch, "9.0", self.cfg)
            loaded = kernel_args.load(built, launch, lambda symbol: None)
            return FakeKernel(launch, launch.variant, loaded.plan, loaded.compiler)
        params = [[_DECLARED.get(role, "int"), 8 if role in _DECLARED and role not in ("alpha", "beta") else 4]
                  for role in launch.args]
        precision = launch.precision
        plan = kernel_args.plan(launch.entry, launch.args, params, precision.input_type, precision.output_type)
        return FakeKernel(launch, launch.variant, plan, "not compiled (a built-in on the CPU double)")

    def build_launcher(self, launch: Launch) -> launcher_library.LauncherLibrary:
        """Built as a worker builds it (nvcc, the confined compile process), for an sm_90 GPU."""
        return launcher_library.build(launch, "9.0", self.cfg)

    def kernel_call(self, kernel: FakeKernel, launch: Launch, m: int, n: int, k: int, a, b, c, alpha: float,
                    beta: float) -> Call:
        a64, b64 = (half_arrays.as_float32(np, x).astype(np.float64) for x in (a, b))
        # What the kernel receives, marshalled as on the GPU: a scalar passed as __half is rounded,
        # and a size that does not survive its parameter's type would show here.
        named = kernel_args.named_values(launch, m, n, k, a, b, c, alpha, beta)
        named.update({f"{matrix}_map": np.uint64(0) for matrix in launch.tensor_maps})  # no TMA on the CPU
        passed = dict(zip(launch.args, kernel_args.values(kernel.plan, named, np)))
        hows = dict(kernel.plan.passing)
        for role, size in (("M", m), ("N", n), ("K", k)):
            if role in passed and int(passed[role]) != size:
                raise AssertionError(f"{role} = {size} reached the kernel as {passed[role]!r}")
        alpha = kernel_args.received(hows["alpha"], passed["alpha"]) if "alpha" in passed else alpha
        beta = kernel_args.received(hows["beta"], passed["beta"]) if "beta" in passed else beta

        def run():
            a_used, b_used = (a64[:, :-1], b64[:-1, :]) if kernel.wrong else (a64, b64)
            product = alpha * (a_used @ b_used)
            if beta != 0 or kernel.reads_c:
                with np.errstate(invalid="ignore", over="ignore"):
                    product = product + beta * half_arrays.as_float32(np, c).astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):  # written in C's own type, as a kernel stores it
                exact = product.astype(np.float32)
                result = half_arrays.rounded(np, exact, half_arrays.type_of(c))
                if kernel.truncate and result.dtype != np.float32:  # one step toward zero where rounding went up
                    away = np.abs(half_arrays.as_float32(np, result)) > np.abs(exact)
                    stepped = (result.view(np.uint16) - np.uint16(1)).view(result.dtype)
                    result = np.where(away & (exact != 0), stepped, result)
            if kernel.unwritten:  # the last elements in C's memory order keep what C held
                order = "F" if c.flags.f_contiguous and not c.flags.c_contiguous else "C"
                flat = result.ravel(order=order)
                flat[-kernel.unwritten:] = c.ravel(order=order)[-kernel.unwritten:]
                result = flat.reshape(result.shape, order=order)
            c[...] = result

        return Call(run, 2.0 * m * n * k / (kernel.gflops * 1e6) * kernel.slowdown)

    def resources(self, kernel: FakeKernel, launch: Launch, m: int, n: int, k: int) -> dict:
        """Plausible attributes for a kernel the CPU cannot load: registers grow with the outputs each
        thread holds (or FAKE_GPU_REGS), shared memory with two K-slabs of the tile."""
        threads = math.prod(launch.block)
        tile = launch.tile or (16, 16)
        outputs = max(1, tile[0] * tile[1] // threads)
        regs = marker(launch, "FAKE_GPU_REGS") or min(255, 32 + 2 * outputs)
        bk = int(launch.defines.get("BK", 8))
        smem = 4 * bk * (tile[0] + tile[1]) if outputs > 1 else 0
        return {**resources.describe({"num_regs": regs, "shared_size_bytes": smem, "local_size_bytes": 0,
                                      "max_threads_per_block": 1024}, launch.block), "compiler": kernel.compiler}

    def cublas_call(self, a, b, out, precision) -> Call:
        def run():
            product = half_arrays.as_float32(np, a) @ half_arrays.as_float32(np, b)
            product *= np.float32(precision.tensor_scale**2)  # FP8's per-tensor scales, as cuBLASLt applies them
            out[...] = half_arrays.rounded(np, product, half_arrays.type_of(out))

        return Call(run, 2.0 * a.shape[0] * b.shape[1] * a.shape[1] / (CUBLAS_GFLOPS * 1e6))

    # -- samples ------------------------------------------------------------------------
    def clock(self) -> float:
        return self._now

    def measuring(self):
        return nullcontext()

    def warm_up(self, calls, warmup_ms: float) -> None:
        for call in calls:
            call()  # the output matrices hold a real result, as after a GPU's warm-up
        self._now += warmup_ms / 1000.0

    def sample(self, order, policy) -> Batch:
        times = [call.model_ms * (1.0 + SPREAD * float(self._rng.standard_normal())) for call in order]
        self._now += (sum(times) + SAMPLE_OVERHEAD_MS * len(order)) / 1000.0
        throttled = float(os.environ.get("FAKE_GPU_THROTTLED", "0")) / 100
        power_cap = 0x4 if throttled and self._rng.random() < throttled else 0  # nvmlClocksEventReasonSwPowerCap
        return Batch(times, False, power_cap)


class CpuRunner(Runner):
    """The product's runner over the CPU double."""

    registration_identity = staticmethod(FakeDevice.registration_identity)

    def __init__(self):
        super().__init__(FakeDevice())

    def run_case(self, case, policy):
        time.sleep(float(os.environ.get("FAKE_GPU_SLEEP_S", "0")))
        if os.environ.get("FAKE_GPU_CRASH_VARIANT") == case.variant:
            os._exit(77)
        if os.environ.get("FAKE_GPU_HANG_VARIANT") == case.variant:
            while True:
                time.sleep(1)
        return super().run_case(case, policy)
