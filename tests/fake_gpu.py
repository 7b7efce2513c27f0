"""Test double for the GPU runner (CI has no GPU). Never imported by product code.

It does real work on the CPU with NumPy, so results vary with the inputs and the timing is
measured rather than invented: float32 product as "the variant", float64 as the reference,
perf_counter samples interleaved with a float64 "baseline", the product's own statistics
code for the summary. Selected with GEMMWATCH_RUNNER=tests.fake_gpu:CpuRunner.

Fault injection for tests, through the environment:
  FAKE_GPU_CRASH_VARIANT=name   the child process dies (like a sticky CUDA fault) on that variant
  FAKE_GPU_HANG_VARIANT=name    the child process never returns from that variant
  FAKE_GPU_WRONG_VARIANT=name   that variant drops its last K column (a wrong kernel)
  FAKE_GPU_SLEEP_S=seconds      each case sleeps first (to observe progress)

A job's own kernels are compiled for sm_90 by the product's own compile step (worker/compiler.py:
NVRTC from its PyPI wheel, in the confined compile process), so compile errors, refusals and
the filtered log come back exactly as on a GPU worker; only loading and running the cubin is
left out. A source that defines FAKE_GPU_SLOWDOWN_PCT is timed that much slower (to stand in
for a slower kernel).
"""

import os
import re
import socket
import time

import numpy as np

from api.settings import settings
from worker import compiler, stats
from worker.cases import Case, CaseOutcome, TimingPolicy, gflops


def compile_as_a_worker_would(launch) -> None:
    """The same call CupyRunner._compile makes, for an sm_90 GPU."""
    compiler.compile_launch(launch, "9.0", settings)

FAKE_MODEL = "FAKE"


class CpuRunner:
    def identity(self) -> dict:
        return {
            "name": f"{FAKE_MODEL} CPU double",
            "model": FAKE_MODEL,
            "uuid": f"FAKE-{socket.gethostname()}",
            "sm_count": os.cpu_count(),
            "compute_capability": "0.0",
            "driver": "none",
            "memory_mib": 0,
        }

    def run_case(self, case: Case, policy: TimingPolicy) -> CaseOutcome:
        time.sleep(float(os.environ.get("FAKE_GPU_SLEEP_S", "0")))
        if os.environ.get("FAKE_GPU_CRASH_VARIANT") == case.variant:
            os._exit(77)
        if os.environ.get("FAKE_GPU_HANG_VARIANT") == case.variant:
            while True:
                time.sleep(1)
        slowdown = 1.0
        if case.launch is not None and case.launch.origin == "job":
            compile_as_a_worker_would(case.launch)
            match = re.search(r"#define\s+FAKE_GPU_SLOWDOWN_PCT\s+(\d+)", case.launch.source)
            slowdown += int(match.group(1)) / 100 if match else 0.0
        rng = np.random.default_rng(case.seed)
        a = rng.uniform(-1, 1, (case.m, case.k)).astype(np.float32)
        b = rng.uniform(-1, 1, (case.k, case.n)).astype(np.float32)
        wrong = os.environ.get("FAKE_GPU_WRONG_VARIANT") == case.variant

        def variant():
            return a[:, :-1] @ b[:-1, :] if wrong else a @ b

        def baseline():
            return a.astype(np.float64) @ b.astype(np.float64)

        ref = baseline()
        got = variant()
        err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        out = CaseOutcome(mode=policy.mode, rel_error=err, verified=err <= policy.max_rel_error)
        if not out.verified:
            out.error = f"wrong result: relative error {err:.3g} > {policy.max_rel_error:g}"
            return out

        warm_end = time.perf_counter() + policy.warmup_ms / 1000.0
        while time.perf_counter() < warm_end:  # as the real runner: BLAS threads and caches settle first
            variant()
            baseline()
        v_ms, b_ms = [], []
        deadline = time.perf_counter() + policy.time_cap_s
        while True:
            for fn, into in ((variant, v_ms), (baseline, b_ms)):
                t0 = time.perf_counter()
                fn()
                elapsed = (time.perf_counter() - t0) * 1e3
                into.append(elapsed * slowdown if fn is variant else elapsed)
            if policy.satisfied(v_ms, b_ms) or (time.perf_counter() > deadline and len(v_ms) >= policy.min_samples):
                break
        s = stats.summarise(v_ms)
        out.add_timing(v_ms, s)
        out.converged = policy.satisfied(v_ms, b_ms)
        out.gflops = gflops(case.m, case.n, case.k, out.median_ms)
        out.cublas_median_ms = stats.summarise(b_ms)["median_ms"]
        out.cublas_gflops = gflops(case.m, case.n, case.k, out.cublas_median_ms)
        out.pct_of_cublas = 100.0 * out.cublas_median_ms / out.median_ms
        out.env = {"stats": s, "runner": "tests.fake_gpu:CpuRunner"}
        return out
