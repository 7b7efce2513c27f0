#!/usr/bin/env python3
"""The issue-10 report at 1024^3 on the H200: gemmwatch's cold cuBLAS figure (65.18 us) equalled a
warm do_bench one, while torch.matmul with an L2 flush before each sample read 96.77 us.

FP32 cuBLAS at the given sizes, in one process, on the same inputs where the library allows:
  gemmwatch cold / hot   the runner's timing loop, worker/measure/timing.py (cupy.matmul; cold flushes 2x L2, read-write)
  nvbench cold           cuda-bench's cold measurement of the same cupy.matmul
  torch flushed          torch.matmul, 256 MB zeroed before each of 300 CUDA-event samples (the report's way)
  cupy flushed           cupy.matmul timed the torch way, to tell the library from the timing
  warm, back to back     300 calls between two events, no flush (the warm-L2 floor)
and, under a CUPTI trace, which kernels cupy.matmul and torch.matmul launch and how long they run.
Prints JSON lines.   python3 scripts/studies/cold_1024_study.py [size ...]
"""

import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root
sys.path.insert(0, str(Path(__file__).resolve().parent))

from core.description.builtins import CUBLAS  # noqa: E402
from core.settings import Settings  # noqa: E402
from cublas_split_k_trace import cublas_calls, summarise_calls, time_pair, traced  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner, Problem  # noqa: E402


def torch_flushed(fn, scratch, n: int = 300) -> float:
    """Median ms of fn over n CUDA-event samples, scratch zeroed before each (after 10 unrecorded)."""
    import torch

    times = []
    for _ in range(n + 10):
        scratch.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times[10:])


def warm(fn, n: int = 300) -> float:
    """Mean ms of fn over n calls back to back between two events, after 10 warm-up calls."""
    import torch

    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / n


def main() -> None:
    import cupy as cp
    import torch

    from tests.test_gpu_nvbench import nvbench_medians

    sizes = [int(a) for a in sys.argv[1:]] or [1024]
    runner = CupyRunner()
    cold = TimingPolicy.from_settings(Settings())
    hot = replace(cold, mode="hot")
    tmp = Path(tempfile.mkdtemp())
    scratch = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device="cuda")
    benchmarks = {}
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "tf32_allowed": torch.backends.cuda.matmul.allow_tf32}))
    for d in sizes:
        problem = Problem(runner.device, builtin_case(CUBLAS, d, d, d, seed=d))  # the inputs a job's case gets
        a, b = problem.a, problem.b
        c = cp.empty((d, d), dtype=cp.float32)
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")  # the same memory
        tc = torch.empty((d, d), dtype=torch.float32, device="cuda")

        def run_cupy(a=a, b=b, c=c):
            cp.matmul(a, b, out=c)

        def run_torch(ta=ta, tb=tb, tc=tc):
            torch.matmul(ta, tb, out=tc)

        rows = {
            "gemmwatch cold": statistics.median(time_pair(runner, lambda: None, run_cupy, cold).cublas_ms),
            "gemmwatch hot": statistics.median(time_pair(runner, lambda: None, run_cupy, hot).cublas_ms),
            "torch.matmul flushed": torch_flushed(run_torch, scratch),
            "cupy.matmul flushed the same way": torch_flushed(run_cupy, scratch),
            "torch.matmul warm, back to back": warm(run_torch),
            "cupy.matmul warm, back to back": warm(run_cupy),
        }
        for way, ms in rows.items():
            print(json.dumps({"size": d, "way": way, "us": round(1e3 * ms, 3)}), flush=True)
        for lib, fn in (("cupy", run_cupy), ("torch", run_torch)):
            _, acts = traced(lambda fn=fn: torch_flushed(fn, scratch, n=50))
            print(json.dumps({"size": d, "library": lib, "calls": summarise_calls(cublas_calls(acts, {"elementwise"}))}),
                  flush=True)
        benchmarks[f"cupy-{d}"] = run_cupy
        benchmarks[f"torch-{d}"] = run_torch
    for name, ms in nvbench_medians(benchmarks, tmp).items():
        print(json.dumps({"way": "nvbench cold", "case": name, "us": round(1e3 * ms, 3)}), flush=True)


if __name__ == "__main__":
    main()
