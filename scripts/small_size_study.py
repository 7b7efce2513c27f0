#!/usr/bin/env python3
"""Why small kernels read slower in gemmwatch than in nvbench (issue 10): one factor at a time.

For a few small cases, the runner's own sampling (_time_pair) under variations, then nvbench's
cold measurement of the same launches in the same process:
  default        what a job does (batches of up to 32 pairs behind a stream hold, 2x L2 read-write flush)
  batch256       up to 256 pairs per batch: fewer idle gaps while the host computes the stop rule
  memset1x       nvbench's flush: a memset of 1x the L2 size
  hot            no flush at all (the warm-L2 floor)
  blocks         a batch's variant samples in a row, then its cuBLAS samples (GEMMWATCH_INTERLEAVE=blocks)
  alone          the variant's samples with nothing between them but the flush (cuBLAS not run)
Prints one JSON line per case and way.   python scripts/small_size_study.py
"""

import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.settings import Settings  # noqa: E402
from kernels.registry import VARIANTS  # noqa: E402
from worker import runner as runner_module  # noqa: E402
from worker.cases import Case, TimingPolicy  # noqa: E402

CASES = [("warp_tile_large", 256), ("smem_tiled", 256), ("warp_tile_large", 512), ("smem_tiled", 128)]


def main() -> None:
    import cupy as cp

    from tests.test_gpu_nvbench import nvbench_medians

    r = runner_module.CupyRunner()
    base = TimingPolicy.from_settings(Settings())
    l2 = r.device.attributes["L2CacheSize"]
    one_l2 = cp.empty(l2 // 4, dtype=cp.float32)
    benchmarks = {}
    for name, d in CASES:
        case = Case(0, name, d, d, d, seed=d, launch=VARIANTS[name].resolve())
        a, b = r._inputs(case)
        launch = r._compile(case)
        c, c_ref = cp.empty((d, d), dtype=cp.float32), cp.empty((d, d), dtype=cp.float32)
        run_v = lambda launch=launch, a=a, b=b, c=c: launch(a, b, c, 1.0, 0.0)  # noqa: E731
        run_c = lambda a=a, b=b, c_ref=c_ref: cp.matmul(a, b, out=c_ref)  # noqa: E731
        benchmarks[f"{name}-{d}"] = run_v
        benchmarks[f"cublas-{d}"] = run_c
        ways = {
            "default": (base, 32, None),
            "batch256": (base, 256, None),
            "memset1x": (base, 32, lambda: one_l2.fill(0.0)),
            "hot": (replace(base, mode="hot"), 32, None),
            "blocks": (replace(base, interleave="blocks"), 32, None),
            "alone": (base, 32, None),  # no cuBLAS between the variant's samples, as nvbench times it
        }
        for way, (policy, max_batch, flush) in ways.items():
            runner_module.MAX_BATCH_PAIRS = max_batch
            original = r._flusher
            if flush is not None:
                r._flusher = lambda how, flush=flush: flush
            try:
                t = r._time_pair(run_v, (lambda: None) if way == "alone" else run_c, policy)
            finally:
                r._flusher = original
            print(json.dumps({"case": f"{name}-{d}", "way": way, "variant_us": 1e3 * statistics.median(t.variant_ms),
                              "cublas_us": 1e3 * statistics.median(t.cublas_ms), "pairs": len(t.variant_ms)}), flush=True)
        runner_module.MAX_BATCH_PAIRS = 32
    theirs = nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))
    for key, ms in theirs.items():
        print(json.dumps({"case": key, "way": "nvbench", "us": 1e3 * ms}), flush=True)


if __name__ == "__main__":
    main()
