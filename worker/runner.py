"""The GPU runner: compile a variant through NVRTC, verify it against cuBLAS, time both.

Plain Python, callable without Celery (`CupyRunner().run_case(case, policy)`); the job
executor calls it inside a child process so a faulting kernel cannot take the worker down.
This is where a number is made; the steps follow DESIGN.md "How a number is made".
"""

import os
import time
from dataclasses import dataclass, field
from typing import Any

from api.settings import settings
from worker import ab, compiler, gpu_identity, resources, stats
from worker.cases import Case, CaseOutcome, TimingPolicy, gflops, not_applicable

# Pairs per batch (the stop rule is judged once per batch): a batch grows while its GPU time is
# under 20 ms. Cold samples are each queued behind a stream hold of their own (isolate_samples);
# otherwise a whole batch is queued behind one.
FIRST_BATCH_PAIRS = 4
MAX_BATCH_PAIRS = 32


class NoCudaDevice(RuntimeError):
    pass


class CupyRunner:
    def __init__(self) -> None:
        # cuBLAS must be true FP32: CuPy switches cupy.matmul to TF32 when CUPY_TF32 is set.
        if os.environ.get("CUPY_TF32", "0") not in ("", "0"):
            raise RuntimeError("CUPY_TF32 is set: the cuBLAS baseline would run in TF32, not FP32")
        try:
            import cupy
        except Exception as exc:  # ImportError, or CUDA libraries missing
            raise NoCudaDevice(f"no CUDA device: CuPy is not usable here ({exc})") from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise NoCudaDevice(f"no CUDA device: {exc}") from exc
        if count == 0:
            raise NoCudaDevice("no CUDA device: the CUDA runtime sees no GPU")
        self.cp = cupy
        self.cublas_math_mode = _check_cublas_math_mode(cupy)
        self.device = cupy.cuda.Device(0)
        self.pci_bus_id = self.device.pci_bus_id
        self._modules: dict[tuple, Any] = {}
        self._flush_buffer = None
        self._readwrite_flush = None
        self._hold = None

    def healthy(self) -> bool:
        """False once a kernel fault has poisoned this process's CUDA context."""
        try:
            self.cp.cuda.runtime.deviceSynchronize()
            return True
        except Exception:
            return False

    def release_memory(self) -> None:
        """Between jobs: give pooled device memory back, keep the context and compiled modules."""
        self.cp.get_default_memory_pool().free_all_blocks()

    # -- identity -----------------------------------------------------------------
    # A worker registers with NVML's view of its GPU, before (and without) a CUDA context.
    registration_identity = staticmethod(gpu_identity.registration_identity)

    def identity(self) -> dict[str, Any]:
        cp = self.cp
        attrs = self.device.attributes
        cc = self.device.compute_capability  # "90" for 9.0
        with gpu_identity.nvml():
            ident = gpu_identity.static_identity(self.pci_bus_id)
        ident.update(
            sm_count=attrs["MultiProcessorCount"],
            compute_capability=f"{cc[:-1]}.{cc[-1]}",
            l2_bytes=attrs["L2CacheSize"],
            cuda_runtime=cp.cuda.runtime.runtimeGetVersion(),
            cuda_driver_api=cp.cuda.runtime.driverGetVersion(),
            cupy=cp.__version__,
            # CuPy passes -ftz=true to NVRTC for every RawModule; denormals flush to zero.
            nvrtc_flush_to_zero=True,
            cublas_math_mode=self.cublas_math_mode,
        )
        return ident

    # -- one case -----------------------------------------------------------------
    def run_case(self, case: Case, policy: TimingPolicy) -> CaseOutcome:
        skipped = not_applicable(case, self.device.compute_capability, policy.mode)
        if skipped is not None:  # built for another GPU target (sm_90a on a non-Hopper GPU, say)
            return skipped
        if case.base is not None:
            return ab.run_ab(self, case, policy)
        cp = self.cp
        # A TF32 kernel is verified with the TF32 bound and timed against cuBLAS TF32, never FP32.
        tf32 = case.launch is not None and getattr(case.launch, "compute_mode", "fp32") == "tf32"
        tolerance = policy.max_rel_error_tf32 if tf32 else policy.max_rel_error
        out = CaseOutcome(mode=policy.mode, compute_mode="tf32" if tf32 else "fp32")
        out.env["notes"] = [
            "kernels compiled by NVRTC with -ftz=true (CuPy adds it): denormals flush to zero",
            "cuBLAS baseline: cupy.matmul with CUBLAS_TF32_TENSOR_OP_MATH (TF32 tensor cores)" if tf32
            else "cuBLAS baseline: cupy.matmul, FP32 compute, TF32 off",
        ]
        a, b = self._inputs(case)
        launch = self._compile(case) if case.launch is not None else None

        with gpu_identity.nvml():
            out.env["before"] = gpu_identity.device_state(self.pci_bus_id)

        if launch is not None:
            err = self._verify(launch, a, b, case.seed)
            out.verified = err <= tolerance
            if err == float("inf"):
                out.error = "wrong result: C holds NaN or Inf (elements left unwritten, or read before written)"
            else:
                out.rel_error = err
                if not out.verified:
                    out.error = f"wrong result: relative error {err:.3g} > {tolerance:g}"
        else:
            out.verified, out.rel_error = True, 0.0

        c = cp.empty((case.m, case.n), dtype=cp.float32)
        c_ref = cp.empty_like(c)
        run_cublas = self._tf32_matmul(a, b, c_ref) if tf32 else (lambda: cp.matmul(a, b, out=c_ref))
        run_variant = (lambda: launch(a, b, c, 1.0, 0.0)) if launch is not None else run_cublas

        if out.verified:  # a wrong kernel gets no speed
            with gpu_identity.nvml():
                t = self._time_pair(run_variant, run_cublas, policy)
            if not t.variant_ms:
                out.error = (f"no usable timing samples within {2 * policy.time_cap_s:g} s: "
                             f"{t.hold_timeouts} batch(es) whose stream hold ran out, none throttled")
        if out.verified and not out.error:
            # Statistics from the stored (compact) samples, so a re-analysis gets the same numbers.
            t.variant_ms, t.cublas_ms = _compact(t.variant_ms), _compact(t.cublas_ms)
            out.add_timing(t.variant_ms, stats.summarise(t.variant_ms))
            out.converged = t.converged
            out.gflops = gflops(case.m, case.n, case.k, out.median_ms)
            out.cublas_median_ms = stats.summarise(t.cublas_ms)["median_ms"]
            out.cublas_gflops = gflops(case.m, case.n, case.k, out.cublas_median_ms)
            # Paired: each variant sample against the cuBLAS sample taken right after it, so a
            # clock change between pairs moves both sides of the ratio.
            ratios = sorted(cb / v for v, cb in zip(t.variant_ms, t.cublas_ms))
            out.pct_of_cublas = 100.0 * ratios[len(ratios) // 2]
            out.env["cublas_samples_ms"] = t.cublas_ms
            out.env["cublas_stats"] = stats.summarise(t.cublas_ms)
            out.env["throttled_samples_discarded"] = t.discarded
            out.env["throttle_reasons_seen"] = t.reasons_seen
            out.env["throttled_samples_kept"] = t.throttled_kept
            out.env["stream_hold"] = {"used": policy.hold_stream, "batches_dropped": t.hold_timeouts}
            out.env["l2_flush"] = policy.flush if policy.mode == "cold" else None
            out.env["convergence"] = {"variant": stats.convergence(t.variant_ms), "cublas": stats.convergence(t.cublas_ms)}

        with gpu_identity.nvml():
            out.env["after"] = gpu_identity.device_state(self.pci_bus_id)
        if launch is not None:
            out.env["resources"] = resources.for_function(launch.function, case.launch.block, self.device,
                                                          case.launch.dynamic_smem)
            out.env["launch"] = {
                "entry": case.launch.entry,
                "block": case.launch.block,
                "grid": case.launch.grid(case.m, case.n),
                "defines": case.launch.defines,
            }
        return out

    def _tf32_matmul(self, a, b, out):
        """cuBLAS with TF32 tensor cores allowed for this call only; the handle is put back to
        its FP32 math mode right after, so FP32 baselines stay FP32."""
        from cupy_backends.cuda.libs import cublas

        handle = self.cp.cuda.device.get_cublas_handle()
        tf32_mode = getattr(cublas, "CUBLAS_TF32_TENSOR_OP_MATH", 3)
        fp32_mode = self.cublas_math_mode or 0

        def run():
            cublas.setMathMode(handle, tf32_mode)
            try:
                self.cp.matmul(a, b, out=out)
            finally:
                cublas.setMathMode(handle, fp32_mode)

        return run

    def _inputs(self, case: Case):
        cp = self.cp
        rng = cp.random.default_rng(case.seed)
        # Uniform in [-1, 1): never zeros, which hide unwritten outputs and run unrealistically fast.
        a = rng.random((case.m, case.k), dtype=cp.float32) * 2 - 1
        b = rng.random((case.k, case.n), dtype=cp.float32) * 2 - 1
        return a, b

    def _compile(self, case: Case):
        """A cubin from the confined compile process (worker/compiler.py), loaded here: this
        process, which holds the GPU and the worker's settings, never runs the compiler."""
        cp = self.cp
        spec = case.launch
        key = (spec.source, spec.entry, spec.compile_options(), spec.origin, spec.arch, spec.dynamic_smem)
        if key not in self._modules:
            built = compiler.compile_launch(spec, self.device.compute_capability, settings)
            module = cp.RawModule(path=str(built.cubin_path))
            function = module.get_function(built.lowered.get(spec.entry, spec.entry))
            if spec.dynamic_smem > 0:  # past 48 KiB a kernel gets its shared memory only when it asks
                function.max_dynamic_shared_size_bytes = spec.dynamic_smem
            self._modules[key] = function
        kernel = self._modules[key]
        m, n, k = case.m, case.n, case.k
        grid, block, smem = spec.grid(m, n), spec.block, spec.dynamic_smem

        def launch(a, b, c, alpha: float, beta: float):
            kernel(grid, block, (cp.int32(m), cp.int32(n), cp.int32(k), cp.float32(alpha), a, b, cp.float32(beta), c),
                   shared_mem=smem)

        launch.function = kernel  # its attributes (registers, shared memory) go with the result
        return launch

    def _verify(self, launch, a, b, seed: int) -> float:
        """Worst relative Frobenius error over two checks against cuBLAS FP32."""
        cp = self.cp
        ref = cp.matmul(a, b)
        # 1) beta = 0 over a NaN-poisoned C: every element must be written, C never read.
        c = cp.full(ref.shape, cp.nan, dtype=cp.float32)
        launch(a, b, c, 1.0, 0.0)
        err_plain = _rel_error(cp, c, ref)
        # 2) alpha and beta both in play, C starting from random values.
        c0 = cp.random.default_rng(seed + 1).random(ref.shape, dtype=cp.float32) * 2 - 1
        c = c0.copy()
        launch(a, b, c, 0.75, -0.5)
        err_axpby = _rel_error(cp, c, 0.75 * ref - 0.5 * c0)
        cp.cuda.Device().synchronize()
        return max(err_plain, err_axpby)

    def _time_pair(self, run_variant, run_cublas, policy: TimingPolicy) -> "PairedSamples":
        """Paired variant and cuBLAS samples with CUDA events until both series satisfy the policy
        (worker/stats.py: the median known to +-max_noise, no drift) or the time cap is hit.
        Samples are queued behind a stream hold (worker/stream_hold.py), so no sample waits for a
        launch: each cold sample behind its own, or a whole batch behind one. Batches during which NVML reported a throttled clock are dropped when the
        policy says so."""
        cp = self.cp
        flush = self._flusher(policy.flush) if policy.mode == "cold" else (lambda: None)
        hold = self._stream_hold() if policy.hold_stream else None
        stream = cp.cuda.get_current_stream()

        warm_end = time.perf_counter() + policy.warmup_ms / 1000.0
        while True:  # at least one warm-up launch of each, then until the warm-up time is spent
            run_variant()
            run_cublas()
            stream.synchronize()
            if time.perf_counter() >= warm_end:
                break

        got = PairedSamples()
        every_v: list[float] = []  # all samples in order, throttled or not (not those of a hold that ran out)
        every_c: list[float] = []
        sampling_since = time.perf_counter()
        deadline = sampling_since + policy.time_cap_s
        batch = FIRST_BATCH_PAIRS  # pairs queued behind one hold; grows while a batch is short (fewer host round trips)
        blocks = policy.interleave == "blocks"
        isolated = policy.isolate_samples and policy.mode == "cold"
        while True:
            events = []
            order = [run_variant] * batch + [run_cublas] * batch if blocks else [run_variant, run_cublas] * batch
            # Isolated (cold default): each sample behind a hold of its own, waited for before the
            # next is queued, as nvbench takes a cold sample. Back to back, a small kernel read
            # 0.5-0.8 us longer (docs/BENCHMARKS.md); hot samples stay back to back.
            timed_out = False
            for group in ([fn] for fn in order) if isolated else [order]:
                if hold is not None:
                    hold.hold(stream)  # the GPU waits here until the group is queued
                try:
                    for fn in group:
                        flush()
                        start, end = cp.cuda.Event(), cp.cuda.Event()
                        start.record(stream)
                        fn()
                        end.record(stream)
                        events.append((start, end))
                finally:
                    if hold is not None:
                        hold.release()
                end.synchronize()
                timed_out |= hold is not None and hold.timed_out()
            reasons = gpu_identity.throttle_reasons(self.pci_bus_id)
            times = [cp.cuda.get_elapsed_time(s, e) for s, e in events]
            if blocks:  # back into pairs: the i-th variant sample with the batch's i-th cuBLAS sample
                times = [t for pair in zip(times[:batch], times[batch:]) for t in pair]
            if reasons:
                got.reasons_seen |= reasons
            if timed_out:
                got.hold_timeouts += 1  # the GPU may have waited for launches: not a clean batch
            else:
                every_v += times[0::2]
                every_c += times[1::2]
                if reasons and policy.discard_throttled:
                    got.discarded += len(events) // 2
                else:
                    got.variant_ms += times[0::2]
                    got.cublas_ms += times[1::2]
            if sum(times) < 20.0 and batch < MAX_BATCH_PAIRS:
                batch *= 2
            # Throttled most of the time (a power cap on heavy tensor-core work, TF32 at 4096^3 and
            # up on the H100): that is the kernel's steady state, and both sides ran under it. The few
            # clean batches between caps are no better a figure, so every sample is judged and
            # reported, flagged (env.throttled_samples_kept).
            steady_throttle = got.discarded > len(got.variant_ms)
            v, c = (every_v, every_c) if steady_throttle else (got.variant_ms, got.cublas_ms)
            got.converged = policy.satisfied(v, c, sampled_s=time.perf_counter() - sampling_since)
            out_of_time = time.perf_counter() >= deadline and len(v) >= policy.min_samples
            # A slow kernel goes on past the cap to min_samples (the case time limit bounds it); only
            # holds that kept running out end a case with nothing.
            nothing = not v and time.perf_counter() >= deadline + policy.time_cap_s
            if got.converged or out_of_time or nothing:
                if steady_throttle:
                    got.variant_ms, got.cublas_ms, got.throttled_kept = every_v, every_c, True
                return got

    def _stream_hold(self):
        if self._hold is None:
            from worker.stream_hold import StreamHold

            self._hold = StreamHold(self.cp, self.device.compute_capability, settings)
        return self._hold

    def _flusher(self, how: str):
        """Before a cold sample: "readwrite" (default) reads and writes 2x the L2's size with our
        own kernel; "memset" zero-fills it with cudaMemset, as nvbench and CuPy's fill(0) do."""
        cp = self.cp
        l2 = self.device.attributes["L2CacheSize"]
        if how == "memset":
            if self._flush_buffer is None:
                self._flush_buffer = cp.empty(max(2 * l2, 1 << 20) // 4, dtype=cp.float32)
            buf = self._flush_buffer
            return lambda: buf.fill(0.0)
        if self._readwrite_flush is None:
            self._readwrite_flush = self._stream_hold().flusher(l2)
        return self._readwrite_flush


def _check_cublas_math_mode(cp) -> int | None:
    """The FP32 baseline must not be allowed TF32 tensor cores (CUBLAS_TF32_TENSOR_OP_MATH = 3)."""
    try:
        from cupy_backends.cuda.libs import cublas

        mode = cublas.getMathMode(cp.cuda.device.get_cublas_handle())
    except Exception:  # older CuPy without the binding: CUPY_TF32 was checked already
        return None
    if mode & 0xF not in (0, 2):  # CUBLAS_DEFAULT_MATH, CUBLAS_PEDANTIC_MATH
        raise RuntimeError(f"cuBLAS math mode {mode} allows reduced precision; the FP32 baseline would not be FP32")
    return mode


@dataclass
class PairedSamples:
    variant_ms: list[float] = field(default_factory=list)
    cublas_ms: list[float] = field(default_factory=list)
    converged: bool = False
    discarded: int = 0  # pairs dropped because the clocks were throttled
    reasons_seen: int = 0
    throttled_kept: bool = False  # throttled most of the time: every sample kept, throttled or not
    hold_timeouts: int = 0  # batches dropped because the stream hold gave up before the host released it


def _compact(samples: list[float]) -> list[float]:
    """Six significant digits: CUDA events resolve about 0.5 us, so nothing real is lost."""
    return [float(f"{x:.6g}") for x in samples]


def _rel_error(cp, c, ref) -> float:
    diff = float(cp.linalg.norm((c - ref).astype(cp.float64)))
    scale = float(cp.linalg.norm(ref.astype(cp.float64)))
    err = diff / scale if scale > 0 else diff
    return err if err == err else float("inf")  # NaN (an unwritten element) never passes
