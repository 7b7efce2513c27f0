"""Test double for the GPU (CI has none). Never imported by product code.

It is a device and nothing more: it supplies what a GPU would, and the product's own runner
(worker/measure/runner.py, worker/measure/verify.py, worker/measure/timing.py, worker/measure/stats.py) makes every verdict,
statistic and ratio from it, the same code as on the H100:
  - inputs and matrices (NumPy, uniform in [-1, 1), from the case's seed);
  - kernels compiled as a worker compiles them (a job's own kernel goes through worker/compile/compiler.py:
    NVRTC from its PyPI wheel, in the confined compile process, so compile errors, refusals and
    the filtered log come back exactly as on a GPU worker); running a kernel computes
    C = alpha·A·B + beta·C on the CPU, as the description lays out its matrices;
  - event times from a model (GFLOPS per variant, a 0.3 % spread), drawn from a generator seeded
    by the case, so every timing test is deterministic; NVML readings likewise.
Selected with GEMMWATCH_RUNNER=tests.fake_gpu:CpuRunner.

What a kernel does on this device, through markers in its source (#define NAME value):
  FAKE_GPU_SLOWDOWN_PCT p   its event times are p % longer (a slower commit of a kernel)
  FAKE_GPU_READS_C 1        it computes alpha·A·B + beta·C even at beta = 0 (a NaN in C spreads)
  FAKE_GPU_ADDS_INTO_C 1    it adds alpha·A·B into C, as split-K's atomics do (right only where C starts at zero)
  FAKE_GPU_UNWRITTEN n      it leaves the last n elements of C as they were
  FAKE_GPU_WRITES_NAN 1     it writes NaN into C's first element (no error can be measured of it)
  FAKE_GPU_REGS r           its compiled registers per thread
  FAKE_GPU_TRUNCATE 1       it writes C rounded toward zero (FP16 and BF16 C), not to nearest
  FAKE_GPU_READS_B_AS l     it reads B's memory as row-major (l = 1) or column-major (2), whatever its form says
  FAKE_GPU_SKIP_K_TILE t    it leaves out the products of the 32-deep k-tile t (a skipped k-tile)
  FAKE_GPU_BATCH_STRIDE_OFF d  it steps d elements too far from one matrix of a batch to the next
A kernel reads A and B from their memory (layout, leading dimension, batch stride, as a GPU kernel
does) and, with "accumulate": "fp16", sums its products in FP16, rounding once per 16-deep slab
as an FP16 tensor-core MMA does; cuBLAS's call is carried out from its transposes and leading
dimensions (core/description/gemm_form.py cublas_gemm), so a wrong call gives a wrong C here as on a GPU.
And through the environment, for fault tests:
  FAKE_GPU_CRASH_VARIANT=name   the child process dies (like a sticky CUDA fault) on that variant
  FAKE_GPU_HANG_VARIANT=name    the child process never returns from that variant
  FAKE_GPU_STICKY_VARIANT=name  that variant fails and leaves the device unusable, as a sticky CUDA error
                                does (the child process says so after its result, and exits)
  FAKE_GPU_WRONG_VARIANT=name   that variant drops its last K column (a wrong kernel)
  FAKE_GPU_THROTTLED=p          NVML reports a power cap during p % of the batches (seeded)
  FAKE_GPU_SLEEP_S=seconds      each case sleeps first (a case that takes time, e.g. against a time budget;
                                never to hold a case while a test looks: that is FAKE_GPU_HOLD_DIR's)
  FAKE_GPU_HOLD_DIR=folder      each case, before it runs, says so (the file started.<n>, n counting the
                                cases that reached the hold: 0, 1, ...) and waits for the test's word
                                (release.<n> or release.all): class Hold below. A test holds a case where
                                it wants one, however slow the machine, and no sleep decides anything
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

from core.description.gemm_form import GemmForm, cublas_gemm
from core.description.inputs import SIGNED, drawn
from core.description.kernel import DeviceFigures, Launch
from core.settings import Settings
from worker.compile import compiler, launcher_library
from worker.compile.prefetch import Prefetch
from worker.gpu import resources
from worker.arguments import block_scales, half_arrays, kernel_args
from worker.measure.runner import Runner
from worker.gpu.samples import Batch

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
_DECLARED = {"alpha": "float", "beta": "float", "A": "void*", "B": "void*", "C": "void*", "D": "void*", "A_map": "void*",
             "B_map": "void*", "C_map": "void*"}


class FakeKernel:
    """A compiled kernel on this device: what running it computes, and how long that is said to take."""

    def __init__(self, launch: Launch, variant: str, plan: kernel_args.ArgPlan, compiler_label: str):
        self.launch, self.plan, self.compiler = launch, plan, compiler_label
        self.wrong = os.environ.get("FAKE_GPU_WRONG_VARIANT") == variant
        self.reads_c = bool(marker(launch, "FAKE_GPU_READS_C"))
        self.adds_into_c = bool(marker(launch, "FAKE_GPU_ADDS_INTO_C"))  # C += A·B, as split-K's atomics do
        self.unwritten = marker(launch, "FAKE_GPU_UNWRITTEN") or 0
        self.writes_nan = bool(marker(launch, "FAKE_GPU_WRITES_NAN"))
        self.slowdown = 1.0 + (marker(launch, "FAKE_GPU_SLOWDOWN_PCT") or 0) / 100
        self.truncate = bool(marker(launch, "FAKE_GPU_TRUNCATE"))
        b_as = marker(launch, "FAKE_GPU_READS_B_AS")
        self.b_layout = {1: "row", 2: "column"}.get(b_as, launch.form.b)
        self.skip_tile = marker(launch, "FAKE_GPU_SKIP_K_TILE")
        self.stride_off = marker(launch, "FAKE_GPU_BATCH_STRIDE_OFF") or 0
        # FP8's block scales: B's array read with its two sides swapped (b_s[kb * N_blocks + nb]).
        self.scale_b_swapped = bool(marker(launch, "FAKE_GPU_SCALE_B_SWAPPED"))
        # Each variant its own speed, 40-95 % of cuBLAS, fixed by its name.
        self.gflops = CUBLAS_GFLOPS * (0.4 + (zlib.crc32(variant.encode()) % 56) / 100)
        self.scratch: kernel_args.Scratch | None = None  # Triton's global scratch, as the product read it
        self.scratch_given: list[int] = []  # the bytes of each scratch buffer a call was given
        # Each workspace as a call found it (its elements, type, whether any was nonzero): a call leaves it
        # dirty, as a kernel's partial sums do, so one not zeroed before the next call shows here.
        self.workspaces_met: list[tuple[int, str, bool]] = []


class Call:
    """A queued call (a kernel over its matrices, or cuBLAS), with the time the model gives it."""

    def __init__(self, run, model_ms: float):
        self.run, self.model_ms = run, model_ms

    def __call__(self):
        self.run()


class FakeLtGemm:
    """cuBLASLt's heuristic candidates as worker/measure/cublas_best.py sees them: `use(i)` picks one, the
    call writes the right product into its own C, and each candidate's time is the default call's
    times its factor (FAKE_GPU_CUBLAS_CANDIDATES); a factor of 0 is a candidate that fails to run, and
    one ending in "w" ("0.90w") runs but leaves a wrong C (10 % too large)."""

    library_version = 130000

    def __init__(self, default: Call, factors: list[str], out):
        self.default, self.out = default, out
        self.factors = [float(f.rstrip("w")) for f in factors]
        self.wrong = {i for i, f in enumerate(factors) if f.endswith("w")}
        self.c = out  # as cuBLASLt's calls name the C they leave (worker/gpu/cublaslt.py)
        self.candidates = list(range(len(factors)))
        self.use(0)

    def use(self, index: int) -> None:
        self.index = index
        self.plan = {"call": "cublasLtMatmul", "compute_type": "CUBLAS_COMPUTE_32F", "scale_type": "CUDA_R_32F",
                     "a_b_type": "CUDA_R_32F", "c_type": "CUDA_R_32F", "trans": "NN",
                     "algo": {"id": 100 + index, "tile_id": index, "splitk": 1, "stages_id": 0}}

    @property
    def model_ms(self) -> float:
        return self.default.model_ms * self.factors[self.index]

    def __call__(self) -> None:
        if self.factors[self.index] == 0:
            raise RuntimeError(f"candidate {self.index}: cublasLtMatmul failed with cublasStatus_t 15")
        self.default.run()  # the product, into this call's own C
        if self.index in self.wrong:
            self.out[...] = self.out * np.float32(1.1)


class FakeDevice:
    xp = np
    launcher_hook = "tests.fake_launcher:CpuLauncherCase"  # a launcher case's confined process, on the CPU

    def __init__(self, cfg: Settings | None = None):
        self.cfg = cfg or Settings()
        self.compute_capability = os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0").replace(".", "")
        self._rng = np.random.default_rng(0)
        self._now = 0.0  # the clock the timing loop reads: advanced by the modelled samples
        # A job's kernels compiled ahead as the GPU device does (worker/compile/prefetch.py): the
        # ones compile() builds for real, a job's, for an sm_90 GPU.
        self._prefetch = Prefetch(lambda launch: compiler.compile_launch(launch, "9.0", self.cfg),
                                  self.cfg.compile_workers)
        self.prefetched: list[str] = []  # the variants queued ahead, for the tests to read
        self.compiled: list[FakeKernel] = []  # each job kernel compiled, for the tests to read

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
            "driver": os.environ.get("FAKE_GPU_DRIVER", "none"),
            "memory_mib": 0,
        }

    def identity(self) -> dict:
        return self.registration_identity()

    def figures(self) -> DeviceFigures:
        return DeviceFigures(**FIGURES, compute_capability=os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0"))

    def healthy(self) -> bool:
        return not self.poisoned  # FAKE_GPU_STICKY_VARIANT's case left the context unusable

    poisoned = False

    def release_memory(self) -> None:
        pass

    def notes(self, precision) -> list[str]:
        return ["measured by tests.fake_gpu:CpuRunner, the CPU double: outputs from NumPy, event times from a model"]

    def state(self) -> dict:
        return {"sm_clock_mhz": 1980, "temperature_c": 40, "power_w": 300.0, "throttle_reasons": 0}

    # -- matrices ---------------------------------------------------------------------
    def uniform(self, seed: int, rows: int, cols: int, inputs: str = SIGNED):
        # The case's seed also seeds the modelled noise: every timing of this case is repeatable.
        self._rng = np.random.default_rng(seed)
        return drawn(np.random.default_rng(seed), rows, cols, inputs, np.float32)

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
    def triton_kernel(self, launch: Launch) -> dict:
        """Read as a worker reads it (the confined compile process), for an sm_90 GPU."""
        from worker.compile import triton_build

        return triton_build.describe(launch, "9.0", self.cfg)

    def helion_code(self, desc, dims):
        """Helion's Triton code for the case, written by the real confined compile process (no GPU needed)."""
        from worker.compile import helion_build

        return helion_build.triton_code(desc, dims, "9.0", self.cfg)

    def helion_codes_beside(self, kernels):
        from worker.compile import helion_build

        return helion_build.write_beside(kernels, "9.0", self.cfg)

    def wrapper_call(self, desc, dims=None) -> dict:
        """Read as a worker reads it (the confined compile process), for an sm_90 GPU."""
        from worker.compile import triton_build

        return triton_build.wrapper_call(desc, "9.0", self.cfg, dims)

    def prefetch(self, launches: list[Launch]) -> int:
        jobs = [launch for launch in launches if launch.origin == "job"]
        self.prefetched += [launch.variant for launch in jobs]
        return self._prefetch.start([(kernel_args.loaded_key(launch), launch) for launch in jobs])

    def end_prefetch(self) -> None:
        self._prefetch.stop()

    def compile(self, launch: Launch) -> FakeKernel:
        if launch.origin == "job":  # compiled as a worker would, for an sm_90 GPU; its arguments as its binary says
            failed = self._prefetch.wait(kernel_args.loaded_key(launch))
            if failed is not None:
                raise failed
            built = compiler.compile_launch(launch, "9.0", self.cfg)
            loaded = kernel_args.load(built, launch, lambda symbol: None)
            kernel = FakeKernel(launch, launch.variant, loaded.plan, loaded.compiler)
            kernel.scratch = loaded.scratch
            self.compiled.append(kernel)
            return kernel
        params = [[_DECLARED.get(role, "int"), 8 if role in _DECLARED and role not in ("alpha", "beta") else 4]
                  for role in launch.args]
        precision = launch.precision
        plan = kernel_args.plan(launch.entry, launch.args, params, precision.input_type, precision.output_type)
        return FakeKernel(launch, launch.variant, plan, "not compiled (a built-in on the CPU double)")

    def build_launcher(self, launch: Launch) -> launcher_library.LauncherLibrary:
        """Built as a worker builds it (nvcc, the confined compile process), for an sm_90 GPU."""
        return launcher_library.build(launch, "9.0", self.cfg)

    @staticmethod
    def zeroed_first(call: Call, c) -> Call:
        def zeroed_then_called():
            c.fill(0)
            call()

        return Call(zeroed_then_called, call.model_ms)

    def kernel_call(self, kernel: FakeKernel, launch: Launch, m: int, n: int, k: int, a, b, c, alpha: float,
                    beta: float, batch: int = 1, buffers: dict | None = None) -> Call:
        form = launch.form
        # A and B as the kernel reads their memory: its layout, packed, one matrix after another.
        a64 = read_memory(a, m, k, form.a, batch, m * k + kernel.stride_off)
        b64 = read_memory(b, k, n, kernel.b_layout, batch, k * n + kernel.stride_off)
        if batch == 1:
            a64, b64 = a64[0], b64[0]
        # What the kernel receives, marshalled as on the GPU: a scalar passed as __half is rounded,
        # and a size that does not survive its parameter's type would show here.
        named = kernel_args.named_values(launch, m, n, k, a, b, c, alpha, beta, batch, buffers)
        by_value = kernel_args.maps_by_value(kernel.plan)  # no TMA on the CPU: address 0, or a zero map by value
        if kernel.scratch is not None:  # as the GPU's device gives it; each program's slice must be there, aligned
            grid = launch.grid(m, n, k, batch)
            given = kernel.scratch.buffer(grid, np)
            needed = int(np.prod(grid)) * kernel.scratch.ctas * kernel.scratch.per_program
            if given.nbytes < needed or given.ctypes.data % kernel.scratch.align:
                raise AssertionError(f"a launch of {grid} programs needs {needed} bytes of scratch aligned to "
                                     f"{kernel.scratch.align}; it was given {given.nbytes} at {given.ctypes.data:#x}")
            named[kernel_args.SCRATCH_ROLE] = given
            kernel.scratch_given.append(given.nbytes)
        named.update({f"{x}_map": bytes(128) if x in by_value else np.uint64(0) for x in launch.tensor_maps})
        # By the plan's roles: a Triton kernel's compiled-in args are not among them, its descriptors are
        # five parameters each.
        passed = dict(zip([role for role, _how in kernel.plan.passing], kernel_args.values(kernel.plan, named, np)))
        hows = dict(kernel.plan.passing)
        for role, size in (("M", m), ("N", n), ("K", k)):
            if role in passed and int(passed[role]) != size:
                raise AssertionError(f"{role} = {size} reached the kernel as {passed[role]!r}")
        for x, (lines, inner) in {"A": (m, k), "B": (k, n), "C": (m, n)}.items():  # a descriptor: [lines, inner], [inner, 1]
            if form.layout(x) != "row":
                lines, inner = inner, lines
            given = [passed.get(f"{x}_map.{part}") for part in ("shape0", "shape1", "stride0", "stride1")]
            if given[0] is not None and [int(v) for v in given] != [lines, inner, inner, 1]:
                raise AssertionError(f"{x}'s descriptor was given shape and strides {given}, not {[lines, inner, inner, 1]}")
        # An epilogue without alpha (or beta) computes as if it were 1 (or 0): it never sees the scalar.
        alpha = kernel_args.received(hows["alpha"], passed["alpha"]) if "alpha" in passed else 1.0
        beta = kernel_args.received(hows["beta"], passed["beta"]) if "beta" in passed else 0.0
        fp16_sums = launch.precision.fp16_accumulate
        if "scale_A" in passed:  # FP8's block scales, each block's from the arrays it was passed
            scale_b = passed["scale_B"]
            if kernel.scale_b_swapped:
                scale_b = scale_b.reshape(scale_b.shape[::-1]).T
            a64, b64 = block_scales.applied(np, a64, b64, {"scale_A": passed["scale_A"], "scale_B": scale_b},
                                            launch.precision)

        workspaces = kernel_args.workspaces_of(launch, named)

        def run():
            for workspace in workspaces:
                kernel.workspaces_met.append((workspace.size, workspace.dtype.name, bool(workspace.any())))
                workspace.fill(1)
            a_used, b_used = (a64[..., :-1], b64[..., :-1, :]) if kernel.wrong else (a64, b64)
            if kernel.skip_tile is not None:
                kept = np.ones(a_used.shape[-1], dtype=bool)
                kept[32 * kernel.skip_tile:32 * (kernel.skip_tile + 1)] = False
                a_used, b_used = a_used[..., kept], b_used[..., kept, :]
            product = alpha * (fp16_sum(a_used, b_used) if fp16_sums else a_used @ b_used)
            if beta != 0 or kernel.reads_c:
                with np.errstate(invalid="ignore", over="ignore"):
                    product = product + beta * half_arrays.as_float32(np, c).astype(np.float64)
            if kernel.adds_into_c:
                with np.errstate(invalid="ignore", over="ignore"):
                    product = product + half_arrays.as_float32(np, c).astype(np.float64)
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
            if kernel.writes_nan:
                result[(0,) * result.ndim] = np.nan
            c[...] = result

        return Call(run, 2.0 * m * n * k * batch / (kernel.gflops * 1e6) * kernel.slowdown)

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

    def cublas_candidates(self, problem, count: int):
        """cuBLASLt's candidates, where FAKE_GPU_CUBLAS_CANDIDATES lists each one's time relative
        to the default call ("1.02,0.95": the second 5 % faster); otherwise none are offered."""
        listed = os.environ.get("FAKE_GPU_CUBLAS_CANDIDATES")
        if not listed:
            return None
        out = problem.new_c()
        factors = listed.split(",")[:count]
        for factor in factors:
            float(factor.rstrip("w"))  # "not,a,number": refused here, as cuBLASLt refuses a shape
        return FakeLtGemm(problem.cublas_call(out), factors, out)

    def cublas_call(self, a, b, out, precision, form: GemmForm = GemmForm(), batch: int = 1,
                    scales: dict | None = None) -> Call:
        m, k = a.shape[-2:]
        n = b.shape[-1]
        plan = cublas_gemm(form, m, n, k)

        def run():
            if scales:  # FP8's block scales, applied to each block as cuBLASLt's block scaling does
                a32, b32 = block_scales.applied(np, half_arrays.as_float32(np, a), half_arrays.as_float32(np, b), scales,
                                                precision)
                product = a32.astype(np.float64) @ b32.astype(np.float64)
            elif form.default and batch == 1:
                product = half_arrays.as_float32(np, a) @ half_arrays.as_float32(np, b)
            else:  # the call as cuBLAS would carry it out, column-major, over the operands' memory
                product = cublas_as_called(plan, {"A": a, "B": b}, form.c, m, n, batch)
            product *= np.float32(precision.tensor_scale**2)  # FP8's per-tensor scales, as cuBLASLt applies them
            out[...] = half_arrays.rounded(np, product.astype(np.float32), half_arrays.type_of(out))

        return Call(run, 2.0 * m * n * k * batch / (CUBLAS_GFLOPS * 1e6))

    # -- samples ------------------------------------------------------------------------
    def clock(self) -> float:
        return self._now

    def measuring(self):
        return nullcontext()

    def rest(self, seconds: float) -> None:
        self._now += seconds  # the modelled clock: an idle card's time passes, nothing runs

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


def memory(x):
    """An array's elements in memory order, as FP64 values (what a pointer to it walks)."""
    return half_arrays.as_float32(np, np.ravel(x, order="K")).astype(np.float64)


def read_memory(x, rows: int, cols: int, layout: str, batch: int, stride: int):
    """(batch, rows, cols) matrices read from x's memory as a kernel of that layout and batch
    stride reads it; past the end it wraps around (a GPU would read whatever lies there)."""
    flat = memory(x)
    r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
    within = r * cols + c if layout == "row" else r + c * rows
    return np.take(flat, np.arange(batch)[:, None, None] * stride + within, mode="wrap")


def fp16_sum(a, b):
    """A·B summed in FP16, the running sum rounded to FP16 after each 16-deep slab of products (each
    slab exact in FP32 first), as an FP16-accumulating tensor-core MMA does."""
    total = np.zeros((*a.shape[:-1], b.shape[-1]), dtype=np.float16)
    for start in range(0, a.shape[-1], 16):
        slab = a[..., start:start + 16] @ b[..., start:start + 16, :]
        total = (total.astype(np.float64) + slab).astype(np.float16)
    return total.astype(np.float64)


def cublas_as_called(plan, operands: dict, c_layout: str, m: int, n: int, batch: int):
    """C (batch, M, N) as cuBLAS computes it from this call: column-major operands, each read
    from its memory through its transpose and leading dimension, a batch through its strides."""
    def operand(x, trans: str, rows: int, cols: int, ld: int, stride: int):
        flat = memory(x)
        i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
        offset = i + j * ld if trans == "N" else j + i * ld
        return np.take(flat, np.arange(batch)[:, None, None] * stride + offset, mode="wrap")

    first = operand(operands[plan.first], plan.transa, plan.m, plan.k, plan.lda, plan.stride_first)
    second = operand(operands[plan.second], plan.transb, plan.k, plan.n, plan.ldb, plan.stride_second)
    result = first @ second  # cuBLAS's C: plan.m x plan.n, column-major with ld plan.ldc
    out_memory = np.zeros(batch * plan.stride_c)
    i, j = np.arange(plan.m)[:, None], np.arange(plan.n)[None, :]
    np.put(out_memory, np.arange(batch)[:, None, None] * plan.stride_c + i + j * plan.ldc, result)
    c = read_memory(out_memory, m, n, c_layout, batch, m * n)
    return c if batch > 1 else c[0]


class Hold:
    """The test's end of FAKE_GPU_HOLD_DIR: see a case reach the hold, let it go on.

    hold = Hold(tmp_path / "hold"); start_worker(cfg, **hold.env); ...; hold.reached(1) (case 1 is
    held, case 0 has returned); hold.release(1) or hold.release() (every case, now and later)."""

    def __init__(self, folder):
        from pathlib import Path

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.env = {"FAKE_GPU_HOLD_DIR": str(self.folder)}

    def reached(self, n: int, timeout: float = 300) -> None:
        """Wait (a generous deadline: a loaded machine's worker starts slowly) until the n-th case is held."""
        deadline = time.monotonic() + timeout
        while not (self.folder / f"started.{n}").exists():
            assert time.monotonic() < deadline, f"no case {n} reached the hold in {timeout} s"
            time.sleep(0.02)  # polls a file: the loop only waits, it orders nothing

    def count(self) -> int:
        return len(list(self.folder.glob("started.*")))

    def release(self, n: int | None = None) -> None:
        (self.folder / ("release.all" if n is None else f"release.{n}")).touch()


def _hold(folder: str, limit_s: float = 900) -> None:
    """The double's end: say this case started, then wait for the test to release it. Gives up if the
    worker that started this GPU process is gone (a test's kill -9 leaves no process behind)."""
    from pathlib import Path

    path, parent = Path(folder), os.getppid()
    n = 0
    while True:
        try:
            os.close(os.open(path / f"started.{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            n += 1
    deadline = time.monotonic() + limit_s
    while not ((path / f"release.{n}").exists() or (path / "release.all").exists()):
        if os.getppid() != parent:
            os._exit(0)
        if time.monotonic() > deadline:
            raise RuntimeError(f"FAKE_GPU_HOLD_DIR: case {n} was never released")
        time.sleep(0.01)


class CpuRunner(Runner):
    """The product's runner over the CPU double."""

    registration_identity = staticmethod(FakeDevice.registration_identity)

    def __init__(self):
        super().__init__(FakeDevice())

    def run_case(self, case, policy):
        time.sleep(float(os.environ.get("FAKE_GPU_SLEEP_S", "0")))
        if os.environ.get("FAKE_GPU_HOLD_DIR"):
            _hold(os.environ["FAKE_GPU_HOLD_DIR"])
        if os.environ.get("FAKE_GPU_CRASH_VARIANT") == case.variant:
            os._exit(77)
        if os.environ.get("FAKE_GPU_HANG_VARIANT") == case.variant:
            while True:
                time.sleep(1)
        if os.environ.get("FAKE_GPU_STICKY_VARIANT") == case.variant:
            self.device.poisoned = True
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered (the CPU double)")
        return super().run_case(case, policy)
