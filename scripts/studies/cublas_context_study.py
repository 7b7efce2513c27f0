#!/usr/bin/env python3
"""Why the runner's cuBLAS samples at 256^3 and 512^3 read ~5 % below nvbench while a bare loop
of the same isolated cold samples reads what nvbench reads (issue 10).

In one process, for each size, the same cupy.matmul on the same arrays, each way twice (ABAB),
and then once more under a CUPTI trace for the kernels' own start and end:
  loop          isolated cold samples of cuBLAS alone (hold, flush, start, matmul, stop, release, wait)
  loop_after_v  the same, each behind an isolated cold sample of the variant (smem_tiled)
  runner        the runner's timing loop (worker/measure/timing.py) with the variant, as a job times it (cuBLAS median)
  runner_alone  the same loop with nothing as the variant
Prints JSON lines.   python3 scripts/studies/cublas_context_study.py [size ...]
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root
sys.path.insert(0, str(Path(__file__).resolve().parent))

from core.settings import Settings  # noqa: E402
from cublas_split_k_trace import cublas_calls, sample_in_order, summarise_calls, time_pair, traced  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [256, 512]
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    flush = runner.device._flusher("readwrite")
    for d in sizes:
        case = builtin_case("smem_tiled", d, d, d, seed=d)
        ours = {"gemmwatch_", "flush", "elementwise", runner.resolve(case.kernel).entry}
        # The kernel over the case's inputs into a C of its own, cupy.matmul into another: as a job runs them.
        variant, cublas = runner.calls(case)

        def loop_after_v():
            times = []
            for _ in range(300):
                sample_in_order(runner, variant, "flush_in_hold", flush, n=1)
                times += sample_in_order(runner, cublas, "flush_in_hold", flush, n=1)
            return times

        ways = {
            "loop": lambda: sample_in_order(runner, cublas, "flush_in_hold", flush, n=300),
            "loop_after_v": loop_after_v,
            "runner": lambda: time_pair(runner, variant, cublas, policy).cublas_ms,
            "runner_alone": lambda: time_pair(runner, lambda: None, cublas, policy).cublas_ms,
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
