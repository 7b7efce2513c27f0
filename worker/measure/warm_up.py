"""The GPU process's one-time start-up work, done when the worker starts instead of inside a job.

A fresh GPU process pays once for what its first cases first touch: CuPy compiles (with NVRTC, about
0.5 s each on the H200's host) every elementwise and reduction kernel the runner uses on a dtype the
first time, to fill, convert and check matrices: 18 of them for the first FP32 case, more for the
first FP8 and BF16 ones. Measured on a fresh H200 (issue 53), a CI run's first job spent about 16 s of
its 39 s there. One small case per precision, run through the runner's own path when the worker starts,
compiles them while the worker is idle; the built-ins' cubins land in the kernel cache on the way.
"""

import os
import time

from worker.measure.cases import TimingPolicy, builtin_case

# One built-in per precision the runner checks and times (FP32, TF32, BF16, FP16, FP8): each touches
# that precision's fills, conversions and checks. A GPU that cannot run one (FP8 before sm_89) is told
# so by the runner, which is not a failure of the warm-up.
WARM_UP_KERNELS = ("naive", "tf32_mma_sync", "bf16_mma_sync", "fp16_mma_sync", "fp8_naive")
WARM_UP_SIZE = 128  # the compiled code is the same at every size; the CuPy kernels are too


def warm_up(runner, policy: TimingPolicy) -> dict:
    """Run each warm-up case; what ran, what failed, the seconds it took and the process. A failure is
    reported and the next case runs: a job would meet the same failure and report it with its own case."""
    began = time.monotonic()
    ran, failed = [], []
    for name in WARM_UP_KERNELS:
        try:
            out = runner.run_case(builtin_case(name, WARM_UP_SIZE, WARM_UP_SIZE, WARM_UP_SIZE), policy)
        except Exception as exc:
            failed.append(f"{name}: {exc}"[:300])
            continue
        if out.not_applicable:
            continue
        if out.error and not out.verified:
            failed.append(f"{name}: {out.error}"[:300])
        else:
            ran.append(name)
    return {"ran": ran, "failed": failed, "seconds": round(time.monotonic() - began, 2), "pid": os.getpid()}


def said(report: dict) -> str:
    """The warm-up's report as the worker's log says it."""
    failed = f"; failed: {'; '.join(report['failed'])}" if report["failed"] else ""
    return (f"GPU process {report['pid']} warmed up in {report['seconds']:.1f} s: "
            f"{', '.join(report['ran']) or 'nothing'}{failed}")
