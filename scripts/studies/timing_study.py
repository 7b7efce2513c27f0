#!/usr/bin/env python3
"""What the stream hold and the L2 flush change, from raw samples (docs/BENCHMARKS.md, issue 10).

cuBLAS FP32 alone at small, skinny and large shapes, timed by the runner under each way of
taking a sample: the old one (no hold, cudaMemset flush), hold only, the read-write flush only,
both (today's default), and hot (no flush). Prints one JSON line per (shape, way) with the median,
sample count, convergence figures and the first raw samples.
  python scripts/studies/timing_study.py > study.jsonl
  python scripts/studies/timing_study.py --l2-probe readwrite   # under ncu: one flush, then cuBLAS 1024^3
"""

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.description.builtins import CUBLAS  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure import stats  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402

SHAPES = [(256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (16, 4096, 4096), (4096, 16, 4096),
          (8192, 8192, 64)]
WAYS = {
    "old: no hold, memset flush": dict(hold_stream=False, flush="memset"),
    "hold, memset flush": dict(hold_stream=True, flush="memset"),
    "no hold, read-write flush": dict(hold_stream=False, flush="readwrite"),
    "new: hold, read-write flush": dict(hold_stream=True, flush="readwrite"),
    "hot: hold, no flush": dict(hold_stream=True, mode="hot"),
}


def study() -> None:
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    base = TimingPolicy.from_settings(Settings())
    for m, n, k in SHAPES:
        for way, change in WAYS.items():
            out = runner.run_case(builtin_case(CUBLAS, m, n, k, seed=42), replace(base, **change))
            samples = out.samples_ms
            print(json.dumps({
                "shape": f"{m}x{n}x{k}", "way": way, "median_us": 1e3 * out.median_ms, "n": out.n_samples,
                "converged": out.converged, "stddev_over_mean": out.noise, **stats.convergence(samples),
                "p10_us": 1e3 * statistics.quantiles(samples, n=10)[0], "max_us": 1e3 * max(samples),
                "first_samples_us": [round(1e3 * x, 2) for x in samples[:12]],
            }), flush=True)


def l2_probe(how: str) -> None:
    """One flush of the given kind, then cuBLAS at 1024^3, five times (ncu reads the GEMM's L2 hits)."""
    import cupy as cp

    from worker.measure.runner import CupyRunner, Problem

    runner = CupyRunner()
    problem = Problem(runner.device, builtin_case(CUBLAS, 1024, 1024, 1024, seed=42))  # the inputs a job's case gets
    a, b = problem.a, problem.b
    c = cp.empty((1024, 1024), dtype=cp.float32)
    flush = (lambda: None) if how == "none" else runner.device._flusher(how)
    for _ in range(5):
        flush()
        cp.matmul(a, b, out=c)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--l2-probe", choices=["none", "memset", "readwrite"])
    args = ap.parse_args()
    l2_probe(args.l2_probe) if args.l2_probe else study()
