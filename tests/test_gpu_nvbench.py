"""gemmwatch's cold medians against NVIDIA's own tool, nvbench (the `cuda-bench` package).

Same process, same GPU, same input arrays: cuBLAS and three ladder variants, timed by the
gemmwatch runner (interleaved with cuBLAS, stream held, L2 flushed) and by nvbench's cold
measurement (its blocking kernel, its L2 flush, one sample per launch). Every case must agree
within 2.5 % (or the events' 0.5 us resolution, where that is more) and the median ratio within 1 %: below 1024^3 too, since cold samples are isolated
(each behind its own stream hold, synchronised before the next, as nvbench takes them); queued
back to back, small kernels read a constant 0.5-0.8 us longer (docs/BENCHMARKS.md). One exception,
bounded by one flip and the events' resolution (1.4 us): cuBLAS below 1024^3. At 256^3 and 512^3
one cupy.matmul is two launches (a split-K GEMM and its reduction), and the GPU's gap between them
flips between ~1.0 and ~1.9 us in stretches, whatever takes the samples; the kernels themselves
time the same in both tools (CUPTI traces, docs/BENCHMARKS.md). A gemmwatch measurement sits in
one stretch and nvbench's 1.5 s median mixes them, so the two can read as far apart as one flip
(0.9 us) give or take the events' 0.5 us (seen: -7.1 % on the H100, -7.5 % at 512^3 on the H200,
-10.1 % = 1.25 us at 256^3 on the H200, where a bound of 10 % failed).
GEMMWATCH_BENCH_OUT=path appends the table as JSON lines.
"""

import json
import os
import statistics
import struct
from pathlib import Path

import pytest

from core.settings import Settings
from worker.measure.cases import TimingPolicy, builtin_case

pytestmark = pytest.mark.gpu

SHAPES = [(128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (4096, 4096, 4096),
          (16, 4096, 4096), (4096, 16, 4096), (64, 8192, 8192), (8192, 8192, 64)]
KERNELS = ["smem_tiled", "thread_tile_8x8", "warp_tile_large"]
TOLERANCE = 0.025  # each case
OVERALL = 0.01  # the median ratio over all cases
CUBLAS_SMALL_MS = 0.0014  # cuBLAS below 1024^3: one flip of the gap between its two launches and the events' resolution
# Both tools read CUDA events, whose resolution is about 0.5 us (cudaEventElapsedTime's own
# documentation): no case is held closer than that. It decides only below 20 us, where 2.5 % is
# less (smem_tiled at 256^3, 15 us, once read 0.38 us, 2.6 %, above nvbench on the H100).
EVENT_RESOLUTION_MS = 0.0005


def nvbench_medians(benchmarks: dict, tmp: Path) -> dict[str, float]:
    """Run every benchmark once under nvbench (cold measurement); median GPU time (ms) by name."""
    return {name: statistics.median(samples) for name, samples in nvbench_samples(benchmarks, tmp).items()}


def nvbench_samples(benchmarks: dict, tmp: Path) -> dict[str, list[float]]:
    """Run every benchmark once under nvbench (cold measurement); its sample times (ms) by name
    (an nvbench that writes no sample file gives its mean as the one sample)."""
    import cuda.bench as bench
    import cupy as cp

    for name, fn in benchmarks.items():
        def body(state, fn=fn):
            def launch(handle):
                with cp.cuda.Stream.from_external(handle.get_stream()):
                    fn()
            state.exec(launch, batched=False)  # only its cold samples are compared: skip the batched (hot) pass

        bench.register(body).set_name(name)
    out = tmp / "nvbench.json"
    # --jsonbin: the JSON plus every sample time (float32 seconds) in a file beside it.
    bench.run_all_benchmarks(["nvbench", "--jsonbin", str(out), "--timeout", "1.5", "--min-samples", "50"])
    found = {}
    for b in json.loads(out.read_text())["benchmarks"]:
        state = b["states"][0]
        summaries = {s["tag"]: {d["name"]: d["value"] for d in s["data"]} for s in state["summaries"]}
        samples = next((v for tag, v in summaries.items() if tag.endswith("nv/cold/sample_times")), None)
        if samples:
            name = samples["filename"]
            path = next(p for p in (Path(name), tmp / name, Path.cwd() / name) if p.exists())
            raw = path.read_bytes()
            found[b["name"]] = [1e3 * t for t in struct.unpack(f"<{len(raw) // 4}f", raw)]
        else:  # an nvbench without sample files: its mean
            found[b["name"]] = [1e3 * float(summaries["nv/cold/time/gpu/mean"]["value"])]
    return found


def test_cold_medians_agree_with_nvbench_at_every_shape(tmp_path):
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    # What a job gets (cold, stream held), but beside cuBLAS's default call: runner.calls() hands nvbench
    # that call, and the question here is the timing, not which algorithm cuBLASLt's search picks (timed
    # beside its best, cuBLAS read 17 % and 49 % faster than nvbench's default call at 256^3 and 16x4096x4096).
    policy = TimingPolicy.from_settings(Settings(GEMMWATCH_CUBLAS_BASELINE="default"))
    ours, benchmarks = {}, {}
    for m, n, k in SHAPES:
        for name in KERNELS:
            case = builtin_case(name, m, n, k, seed=m * 7 + n * 3 + k)
            out = runner.run_case(case, policy)
            assert out.verified, out.error
            # NVML's SM clock before and after the case: a ratio off at a low clock says why.
            clocks = [out.env["before"].get("sm_clock_mhz"), out.env["after"].get("sm_clock_mhz")]
            ours[f"{name}-{m}x{n}x{k}"] = (out.median_ms, out.converged, clocks)
            ours.setdefault(f"cublas-{m}x{n}x{k}", (out.cublas_median_ms, out.converged, clocks))
            run_variant, run_cublas = runner.calls(case)
            benchmarks[f"{name}-{m}x{n}x{k}"] = run_variant
            benchmarks.setdefault(f"cublas-{m}x{n}x{k}", run_cublas)
    theirs = nvbench_medians(benchmarks, tmp_path)

    rows = []
    for key, (ms, converged, clocks) in ours.items():
        rows.append({"case": key, "gemmwatch_ms": ms, "nvbench_ms": theirs[key], "ratio": ms / theirs[key],
                     "converged": converged, "sm_mhz_before_after": clocks})
        print(json.dumps(rows[-1]))
    if os.environ.get("GEMMWATCH_BENCH_OUT"):
        with open(os.environ["GEMMWATCH_BENCH_OUT"] + ".nvbench.jsonl", "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    assert abs(statistics.median(r["ratio"] for r in rows) - 1) <= OVERALL
    def bound(row) -> float:
        small = any(row["case"].endswith(f"-{d}x{d}x{d}") for d in (128, 256, 512))
        allowed_ms = CUBLAS_SMALL_MS if small and row["case"].startswith("cublas-") else EVENT_RESOLUTION_MS
        return max(TOLERANCE, allowed_ms / row["nvbench_ms"])

    off = [r for r in rows if abs(r["ratio"] - 1) > bound(r)]
    assert not off, off
