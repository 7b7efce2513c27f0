#!/usr/bin/env python3
"""cuBLAS at 128^3-512^3 (FP32): what each tool's sample holds, kernel by kernel (issue 10).

At 256^3 and 512^3 gemmwatch's cold cuBLAS median read 4-6 % below nvbench's while every ladder
kernel agreed; those are the sizes where one cupy.matmul is two launches (a split-K GEMM and its
reduction). Three tools time the same cupy.matmul on the same arrays in one process:
  gemmwatch  the runner's own sampling (worker/measure/timing.py's time_pair, default policy, smem_tiled as the variant)
  nvbench    cuda-bench's cold measurement, the launch wrapped as tests/test_gpu_nvbench.py does
  do_bench   triton.testing.do_bench (its own cache clear before each sample, one event pair each)
First an order trial: isolated cold samples with the flush inside the stream hold (gemmwatch's
order) or before it behind a synchronise (nvbench's), with either flush. Then the tools without a
profiler (the figures), then each again under torch.profiler, whose CUPTI trace lists every kernel
the GPU ran with its own start and end: which kernels cuBLAS chose inside each tool, how long each
ran, and the gap between the two launches of a split-K call.
Prints JSON lines.   python3 scripts/studies/cublas_split_k_trace.py [size ...]
"""

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.settings import Settings  # noqa: E402
from worker.measure import timing  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def quantiles_us(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {f"p{int(q * 100)}": round(1e3 * s[min(len(s) - 1, int(q * len(s)))], 3) for q in QUANTILES} | {"n": len(s)}


def traced(fn):
    """fn() under torch.profiler (CUPTI): its result, and the kernels and memsets the GPU ran."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        result = fn()
        torch.cuda.synchronize()
    path = Path(tempfile.mkstemp(suffix=".json")[1])
    prof.export_chrome_trace(str(path))
    return result, activities(path)


def activities(trace_path: Path) -> dict:
    """The trace's kernels and memsets, in order on each stream."""
    events = json.loads(trace_path.read_text())["traceEvents"]
    wanted = [e for e in events if e.get("cat") in ("kernel", "gpu_memset")]
    by_stream: dict = {}
    for e in sorted(wanted, key=lambda e: e["ts"]):
        by_stream.setdefault(e.get("args", {}).get("stream"), []).append(e)
    return by_stream


def is_cublas(e: dict, ours: set[str]) -> bool:
    name = e["name"]
    return e.get("cat") == "kernel" and not any(tag in name for tag in ours) and ("gemm" in name.lower() or "xmma" in name)


def short(e: dict) -> str:
    """A readable name for an activity: cuBLAS's long xmma kernel names by their role."""
    if e.get("cat") == "gpu_memset":
        return "memset"
    name = e["name"]
    if "sm80_xmma" in name:
        return "cublas_split_k_reduction" if "split_k" in name else "cublas_gemm"
    return name[:40]


def cublas_calls(by_stream: dict, ours: set[str]) -> list[tuple[str, list[dict]]]:
    """The trace's cuBLAS calls, each with what ran just before it on its stream: a GEMM kernel
    not of ours plus the split-K reduction kernel(s) right behind it."""
    calls = []
    for acts in by_stream.values():
        current = None
        for i, e in enumerate(acts):
            if not is_cublas(e, ours):
                current = None
            elif "split_k" in e["name"].lower():
                if current is not None:
                    current.append(e)
            else:
                current = [e]
                calls.append((short(acts[i - 1]) if i else "start", current))
    return calls


def example_timeline(by_stream: dict, ours: set[str], skip: int = 50) -> dict[str, list[dict]]:
    """For each grid of cuBLAS's first kernel: one call well into the run (the skip-th) and the
    activities around it: what, start relative to the call's first kernel, duration (us)."""
    out = {}
    for acts in by_stream.values():
        seen: dict = {}
        for i, e in enumerate(acts):
            if is_cublas(e, ours) and "split_k" not in e["name"]:
                grid = "x".join(map(str, e["args"].get("grid", [])))
                seen[grid] = seen.get(grid, 0) + 1
                if seen[grid] == skip:
                    t0 = e["ts"]
                    out[grid] = [{"what": short(x), "at_us": round(x["ts"] - t0, 3), "dur_us": round(x["dur"], 3)}
                                 for x in acts[max(0, i - 4):i + 3]]
    return out


def summarise_calls(calls: list[tuple[str, list[dict]]]) -> list[dict]:
    """Per distinct call (what ran before it, kernel names and grids): count, median duration of
    each kernel, median gap between them and median span from the first's start to the last's end (us)."""
    shapes: dict = {}
    for before, call in calls:
        key = (before,) + tuple((short(k), tuple(k["args"].get("grid", []))) for k in call)
        shapes.setdefault(key, []).append(call)
    out = []
    for key, group in sorted(shapes.items(), key=lambda kv: -len(kv[1])):
        if len(group) < 10:
            continue
        row = {"calls": len(group), "after": key[0], "kernels": [{"name": n, "grid": list(g)} for n, g in key[1:]]}
        for i in range(len(key) - 1):
            row["kernels"][i]["median_us"] = round(statistics.median(c[i]["dur"] for c in group), 3)
        if len(key) > 2:
            row["median_gap_us"] = round(statistics.median(c[1]["ts"] - (c[0]["ts"] + c[0]["dur"]) for c in group), 3)
        row["median_span_us"] = round(statistics.median(c[-1]["ts"] + c[-1]["dur"] - c[0]["ts"] for c in group), 3)
        out.append(row)
    return out


def time_pair(runner, run_variant, run_cublas, policy: TimingPolicy) -> timing.PairedSamples:
    """Paired samples by the loop a job's case is timed with, NVML open for its throttle readings."""
    with runner.device.measuring():
        return timing.time_pair(runner.device, run_variant, run_cublas, policy)


def sample_in_order(runner, fn, order: str, flush, n: int = 400) -> list[float]:
    """Cold samples one at a time, each behind its own stream hold, the flush placed as named:
    'flush_in_hold' (gemmwatch: hold, flush, start, fn, stop, release, wait) or
    'flush_sync_hold' (nvbench: flush, wait, hold, start, fn, stop, release, wait)."""
    cp = runner.device.cp
    hold = runner.device._stream_hold()
    stream = cp.cuda.get_current_stream()
    times = []
    for _ in range(n):
        if order == "flush_sync_hold":
            flush()
            stream.synchronize()
        hold.hold(stream)
        if order == "flush_in_hold":
            flush()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        hold.release()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return times


def main() -> None:
    import cupy as cp
    import triton.testing

    from tests.test_gpu_nvbench import nvbench_samples

    sizes = [int(a) for a in sys.argv[1:]] or [128, 256, 512]
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    tmp = Path(tempfile.mkdtemp())
    ours = {"gemmwatch_", "nvbench", "flush", "elementwise"}  # names of kernels that are not cuBLAS's
    cublas, variants = {}, {}
    for d in sizes:
        case = builtin_case("smem_tiled", d, d, d, seed=d)
        ours.add(runner.resolve(case.kernel).entry)
        # The kernel over the case's inputs into a C of its own, cupy.matmul into another: as a job runs them.
        variants[d], cublas[d] = runner.calls(case)

    def gemmwatch(d):
        return time_pair(runner, variants[d], cublas[d], policy).cublas_ms

    def do_bench(d):
        def run():
            cublas[d]()
        return triton.testing.do_bench(run, warmup=25, rep=300, return_mode="all")

    l2 = runner.device.device.attributes["L2CacheSize"]
    one_l2 = cp.empty(l2 // 4, dtype=cp.float32)
    flushes = {"readwrite2x": runner.device._flusher("readwrite"),
               "memset1x": lambda: cp.cuda.runtime.memsetAsync(one_l2.data.ptr, 0, one_l2.nbytes,
                                                              cp.cuda.get_current_stream().ptr)}
    for d in sizes:
        for what, fn in (("cublas", cublas[d]), ("smem_tiled", variants[d])):
            for flush_name, flush in flushes.items():
                for order in ("flush_in_hold", "flush_sync_hold"):
                    ms = sample_in_order(runner, fn, order, flush)
                    print(json.dumps({"order": order, "flush": flush_name, "kernel": what, "size": d,
                                      "median_us": round(1e3 * statistics.median(ms), 3)}), flush=True)

    for profiled in (False, True):
        for tool in ("gemmwatch", "do_bench"):
            for d in sizes:
                take = (lambda d=d: gemmwatch(d)) if tool == "gemmwatch" else (lambda d=d: do_bench(d))
                ms, acts = traced(take) if profiled else (take(), None)
                row = {"tool": tool, "size": d, "profiled": profiled, "median_us": round(1e3 * statistics.median(ms), 3),
                       "quantiles": quantiles_us(ms)}
                if profiled:
                    row["calls"] = summarise_calls(cublas_calls(acts, ours))
                    row["example"] = example_timeline(acts, ours)
                print(json.dumps(row), flush=True)
    # nvbench keeps every benchmark ever registered in the process, so it runs once, profiled;
    # its own timed medians are its figures.
    found, acts = traced(lambda: nvbench_samples({f"cublas-{d}": cublas[d] for d in sizes}, tmp))
    calls = summarise_calls(cublas_calls(acts, ours))
    for d in sizes:
        ms = found[f"cublas-{d}"]
        print(json.dumps({"tool": "nvbench", "size": d, "profiled": True, "median_us": round(1e3 * statistics.median(ms), 3),
                          "quantiles": quantiles_us(ms)}), flush=True)
    print(json.dumps({"tool": "nvbench", "calls": calls, "example": example_timeline(acts, ours)}), flush=True)


if __name__ == "__main__":
    main()
