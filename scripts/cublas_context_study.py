#!/usr/bin/env python3
"""Why the runner's cuBLAS samples at 256^3 and 512^3 read ~5 % below nvbench while a bare loop
of the same isolated cold samples reads what nvbench reads (issue 10).

In one process, for each size, the same cupy.matmul on the same arrays, each way twice (ABAB),
and then once more under a CUPTI trace for the kernels' own start and end:
  loop          isolated cold samples of cuBLAS alone (hold, flush, start, matmul, stop, release, wait)
  loop_after_v  the same, each behind an isolated cold sample of the variant (smem_tiled)
  runner        the runner's _time_pair with the variant, as a job times it (cuBLAS median)
  runner_alone  _time_pair with nothing as the variant
Prints JSON lines.   python3 scripts/cublas_context_study.py [size ...]
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api.settings import Settings  # noqa: E402
from cublas_split_k_trace import cublas_calls, sample_in_order, summarise_calls, traced  # noqa: E402
from kernels.registry import VARIANTS  # noqa: E402
from worker.cases import Case, TimingPolicy  # noqa: E402
from worker.runner import CupyRunner  # noqa: E402


def main() -> None:
    import cupy as cp

    sizes = [int(a) for a in sys.argv[1:]] or [256, 512]
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    flush = runner._flusher("readwrite")
    for d in sizes:
        case = Case(0, "smem_tiled", d, d, d, seed=d, launch=VARIANTS["smem_tiled"].resolve())
        ours = {"gemmwatch_", "flush", "elementwise", case.launch.entry}
        a, b = runner._inputs(case)
        launch = runner._compile(case)
        c, c_ref = cp.empty((d, d), dtype=cp.float32), cp.empty((d, d), dtype=cp.float32)

        def variant():
            launch(a, b, c, 1.0, 0.0)

        def cublas():
            cp.matmul(a, b, out=c_ref)

        def loop_after_v():
            times = []
            for _ in range(300):
                sample_in_order(runner, variant, "flush_in_hold", flush, n=1)
                times += sample_in_order(runner, cublas, "flush_in_hold", flush, n=1)
            return times

        ways = {
            "loop": lambda: sample_in_order(runner, cublas, "flush_in_hold", flush, n=300),
            "loop_after_v": loop_after_v,
            "runner": lambda: runner._time_pair(variant, cublas, policy).cublas_ms,
            "runner_alone": lambda: runner._time_pair(lambda: None, cublas, policy).cublas_ms,
        }
        for rep in range(2):
            for way, fn in ways.items():
                print(json.dumps({"size": d, "way": way, "rep": rep, "median_us": round(1e3 * statistics.median(fn()), 3)}),
                      flush=True)
        for way, fn in ways.items():
            ms, acts = traced(fn)
            print(json.dumps({"size": d, "way": way, "profiled": True, "median_us": round(1e3 * statistics.median(ms), 3),
                              "calls": summarise_calls(cublas_calls(acts, ours))}), flush=True)


if __name__ == "__main__":
    main()
