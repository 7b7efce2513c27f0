#!/usr/bin/env python3
"""Why small kernels read slower in gemmwatch than in nvbench (issue 10): one factor at a time.

For a few small cases, the runner's own sampling (worker/measure/timing.py) under variations, then nvbench's
cold measurement of the same launches in the same process:
  default        what a job does (each cold sample behind its own stream hold, 2x L2 read-write flush)
  batched        a batch of up to 32 pairs behind one stream hold, back to back (the default until 2026-11-23)
  batch256       up to 256 pairs per batch: fewer idle gaps while the host computes the stop rule
  memset1x       nvbench's flush: a memset of 1x the L2 size
  hot            no flush at all (the warm-L2 floor)
  blocks         a batch's variant samples in a row, then its cuBLAS samples (GEMMWATCH_INTERLEAVE=blocks)
  alone          the variant's samples with nothing between them but the flush (cuBLAS not run)
  memset_async   the flush as nvbench does it: cudaMemsetAsync of 1x the L2 (the driver's memset)
  carveout100    our read-write flush kernel with its preferred shared-memory carveout at 100 %
  idle_first     a 5 us one-thread idle kernel before each flush: nothing queued right behind a stop event
  one_per_hold   one pair per stream hold and a synchronise after it, as nvbench takes one sample
  cublas_wrapped cuBLAS called inside a new cupy ExternalStream wrapper of the same stream per call,
                 as the nvbench test's launch does (does that change what cuBLAS runs?)
Prints one JSON line per case and way.   python scripts/studies/small_size_study.py [way ...]
"""

import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.settings import Settings  # noqa: E402
from worker.measure import timing  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner, Problem  # noqa: E402

CASES = [("warp_tile_large", 256), ("smem_tiled", 256), ("warp_tile_large", 512), ("smem_tiled", 128),
         ("thread_tile_8x8", 128)]
if "--cublas" in sys.argv:  # only the sizes where cuBLAS launches a split-K GEMM and its reduction
    sys.argv.remove("--cublas")
    CASES = [("smem_tiled", 256), ("smem_tiled", 512), ("smem_tiled", 128)]


def main() -> None:
    import cupy as cp

    from tests.test_gpu_nvbench import nvbench_medians

    r = CupyRunner()
    dev = r.device
    base = TimingPolicy.from_settings(Settings())
    l2 = dev.device.attributes["L2CacheSize"]
    one_l2 = cp.empty(l2 // 4, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()

    def memset_async():
        cp.cuda.runtime.memsetAsync(one_l2.data.ptr, 0, one_l2.nbytes, stream.ptr)

    readwrite = dev._flusher("readwrite")
    idle = cp.RawKernel(r"""extern "C" __global__ void idle(long long ns) {
        long long t0, t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { __nanosleep(200); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns); }""", "idle")

    def idle_then_flush():
        idle((1,), (1,), (cp.int64(5000),))
        readwrite()
    flush_kernel = dev._stream_hold()._flush
    wanted = sys.argv[1:]
    benchmarks = {}
    for name, d in CASES:
        case = builtin_case(name, d, d, d, seed=d)
        launch = r.resolve(case.kernel)
        # Built here rather than by r.calls(case): cublas_wrapped needs the inputs and cuBLAS's C.
        problem = Problem(dev, case, launch.form)
        a, b, c_ref = problem.a, problem.b, dev.matrix(d, d, "row")
        run_v = problem.kernel_call(dev.compile(launch), launch, problem.new_c(), 1.0, 0.0)
        run_c = dev.cublas_call(a, b, c_ref, problem.precision)

        def run_c_wrapped(a=a, b=b, c_ref=c_ref):
            with cp.cuda.ExternalStream(cp.cuda.get_current_stream().ptr):
                cp.matmul(a, b, out=c_ref)
        benchmarks[f"{name}-{d}"] = run_v
        benchmarks[f"cublas-{d}"] = run_c
        ways = {
            "default": (base, 32, None),
            "batched": (replace(base, isolate_samples=False), 32, None),
            "batch256": (base, 256, None),
            "memset1x": (base, 32, lambda: one_l2.fill(0.0)),
            "hot": (replace(base, mode="hot"), 32, None),
            "blocks": (replace(base, interleave="blocks"), 32, None),
            "alone": (base, 32, None),  # no cuBLAS between the variant's samples, as nvbench times it
            "memset_async": (base, 32, memset_async),
            "carveout100": (base, 32, readwrite),
            "idle_first": (base, 32, idle_then_flush),
            "one_per_hold": (base, 1, None),
            "cublas_wrapped": (base, 32, None),
        }
        for way, (policy, max_batch, flush) in ways.items():
            if wanted and way not in wanted:
                continue
            # Only the carveout way sets the flush kernel's preference; every other way leaves it unset.
            flush_kernel.preferred_shared_memory_carveout = 100 if way == "carveout100" else -1
            # The loop reads its batch sizes from worker/measure/timing.py's module globals on every call.
            timing.MAX_BATCH_PAIRS = max_batch
            timing.FIRST_BATCH_PAIRS = min(4, max_batch)
            original = dev._flusher
            if flush is not None:  # the device's sample() asks _flusher for its flush: hand it this one
                dev._flusher = lambda how, flush=flush: flush
            try:
                cublas = run_c_wrapped if way == "cublas_wrapped" else run_c
                with dev.measuring():
                    t = timing.time_pair(dev, run_v, (lambda: None) if way == "alone" else cublas, policy)
            finally:
                dev._flusher = original
            print(json.dumps({"case": f"{name}-{d}", "way": way, "variant_us": 1e3 * statistics.median(t.variant_ms),
                              "cublas_us": 1e3 * statistics.median(t.cublas_ms), "pairs": len(t.variant_ms)}), flush=True)
        timing.MAX_BATCH_PAIRS, timing.FIRST_BATCH_PAIRS = 32, 4
    theirs = nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))
    for key, ms in theirs.items():
        print(json.dumps({"case": key, "way": "nvbench", "us": 1e3 * ms}), flush=True)


if __name__ == "__main__":
    main()
