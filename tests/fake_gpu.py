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
  FAKE_GPU_COMPUTE_CAPABILITY=x.y  the compute capability the double reports (default 0.0, no GPU):
                                kernels built for one target (sm_90a) are not applicable elsewhere

A job's own kernels are compiled for sm_90 by the product's own compile step (worker/compiler.py:
NVRTC from its PyPI wheel, in the confined compile process), so compile errors, refusals and
the filtered log come back exactly as on a GPU worker; only loading and running the cubin is
left out. A source that defines FAKE_GPU_SLOWDOWN_PCT is timed that much slower (to stand in
for a slower kernel).
"""

import math
import os
import re
import socket
import time

import numpy as np

from api.settings import settings
from worker import ab, compiler, resources, stats
from worker.cases import Case, CaseOutcome, TimingPolicy, gflops


def compile_as_a_worker_would(launch) -> None:
    """The same call CupyRunner._compile makes, for an sm_90 GPU."""
    compiler.compile_launch(launch, "9.0", settings)

FAKE_MODEL = "FAKE"


class CpuRunner:
    @staticmethod
    def registration_identity() -> dict:
        """FAKE_GPU_MODEL / FAKE_GPU_UUID let one machine stand in for several nodes' GPUs."""
        model = os.environ.get("FAKE_GPU_MODEL", FAKE_MODEL)
        return {
            "name": f"{model} CPU double",
            "model": model,
            "uuid": os.environ.get("FAKE_GPU_UUID", f"FAKE-{socket.gethostname()}"),
            "index": 0,
            "sm_count": os.cpu_count(),
            "compute_capability": os.environ.get("FAKE_GPU_COMPUTE_CAPABILITY", "0.0"),
            "driver": "none",
            "memory_mib": 0,
        }

    def identity(self) -> dict:
        return self.registration_identity()

    def run_case(self, case: Case, policy: TimingPolicy) -> CaseOutcome:
        time.sleep(float(os.environ.get("FAKE_GPU_SLEEP_S", "0")))
        if os.environ.get("FAKE_GPU_CRASH_VARIANT") == case.variant:
            os._exit(77)
        if os.environ.get("FAKE_GPU_HANG_VARIANT") == case.variant:
            while True:
                time.sleep(1)
        slowdown = _slowdown(case.launch)
        base_slowdown = _slowdown(case.base) if case.base is not None else None
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
        if case.launch is not None:
            out.env["resources"] = fake_resources(case.launch)
        if not out.verified:
            out.error = f"wrong result: relative error {err:.3g} > {policy.max_rel_error:g}"
            return out
        if case.base is not None:  # a confirmation: the same product timed as head and as base
            out.mode = ab.AB_MODE
            out.env["base_resources"] = fake_resources(case.base)
            head_ms, base_ms, converged = _interleaved(variant, variant, slowdown, base_slowdown, policy)
            ab.record(out, case, head_ms, base_ms, converged)
            return out

        v_ms, b_ms, converged = _interleaved(variant, baseline, slowdown, 1.0, policy)
        s = stats.summarise(v_ms)
        out.add_timing(v_ms, s)
        out.converged = converged
        out.gflops = gflops(case.m, case.n, case.k, out.median_ms)
        out.cublas_median_ms = stats.summarise(b_ms)["median_ms"]
        out.cublas_gflops = gflops(case.m, case.n, case.k, out.cublas_median_ms)
        out.pct_of_cublas = 100.0 * out.cublas_median_ms / out.median_ms
        out.env.update({"stats": s, "runner": "tests.fake_gpu:CpuRunner"})
        return out


def _slowdown(launch) -> float:
    """A job's own kernel is compiled as a worker would; FAKE_GPU_SLOWDOWN_PCT in it slows its timing."""
    if launch is None or launch.origin != "job":
        return 1.0
    compile_as_a_worker_would(launch)
    match = re.search(r"#define\s+FAKE_GPU_SLOWDOWN_PCT\s+(\d+)", launch.source)
    return 1.0 + (int(match.group(1)) / 100 if match else 0.0)


def _interleaved(fn_a, fn_b, scale_a: float, scale_b: float, policy: TimingPolicy):
    """A B A B samples until the policy is satisfied or the time cap, as the runner's _time_pair."""
    warm_end = time.perf_counter() + policy.warmup_ms / 1000.0
    while time.perf_counter() < warm_end:  # as the real runner: BLAS threads and caches settle first
        fn_a()
        fn_b()
    a_ms, b_ms = [], []
    since = time.perf_counter()
    deadline = since + policy.time_cap_s
    order = ((fn_a, scale_a, a_ms), (fn_b, scale_b, b_ms))
    while True:
        # A B, then B A: the Python between pairs (the stopping rule) leaves the CPU's caches cold for
        # whichever runs first, a position bias a GPU's event timing does not have; alternating
        # the order cancels it, and an untimed call before each sample shrinks it.
        order = order[::-1]
        for fn, scale, into in order:
            fn()
            t0 = time.perf_counter()
            fn()
            into.append((time.perf_counter() - t0) * 1e3 * scale)
        converged = policy.satisfied(a_ms, b_ms, sampled_s=time.perf_counter() - since)
        if converged or (time.perf_counter() > deadline and len(a_ms) >= policy.min_samples):
            return a_ms, b_ms, converged


def fake_resources(launch) -> dict:
    """Plausible attributes for a kernel the CPU cannot load: registers grow with the outputs each
    thread holds (or FAKE_GPU_REGS in the source), shared memory with two K-slabs of the tile."""
    threads = math.prod(launch.block)
    outputs = max(1, launch.tile[0] * launch.tile[1] // threads)
    match = re.search(r"#define\s+FAKE_GPU_REGS\s+(\d+)", launch.source)
    regs = int(match.group(1)) if match else min(255, 32 + 2 * outputs)
    bk = int(launch.defines.get("BK", 8))
    smem = 4 * bk * (launch.tile[0] + launch.tile[1]) if outputs > 1 else 0
    return resources.describe({"num_regs": regs, "shared_size_bytes": smem, "local_size_bytes": 0,
                               "max_threads_per_block": 1024}, launch.block)
