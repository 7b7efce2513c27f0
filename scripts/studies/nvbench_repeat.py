#!/usr/bin/env python3
"""One process's worth of the small-size comparison with nvbench, to run many times (issue 10).

cuBLAS at 256^3 and 512^3 (a split-K GEMM plus its reduction) read 4-6 % below nvbench in some
runs and 2 % above in others. Whether that difference is systematic shows only across processes:
each run of this script times cuBLAS and smem_tiled at 128^3-512^3 through the runner twice (as
a job would, one case after another), then through nvbench's cold measurement, and prints one
JSON line per case.
    for i in 1 2 3 4 5 6; do python3 scripts/studies/nvbench_repeat.py $i; done
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

SIZES = (128, 256, 512)


def main() -> None:
    from tests.test_gpu_nvbench import nvbench_medians

    run = sys.argv[1] if len(sys.argv) > 1 else "1"
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    ours: dict[str, list[float]] = {}
    benchmarks = {}
    for d in SIZES:
        case = builtin_case("smem_tiled", d, d, d, seed=d)
        for _ in range(2):
            out = runner.run_case(case, policy)
            ours.setdefault(f"smem_tiled-{d}", []).append(out.median_ms)
            ours.setdefault(f"cublas-{d}", []).append(out.cublas_median_ms)
        # The same launches over the case's inputs for nvbench: the kernel and cupy.matmul, unverified.
        benchmarks[f"smem_tiled-{d}"], benchmarks[f"cublas-{d}"] = runner.calls(case)
    theirs = nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))
    for key, (first, second) in ours.items():
        print(json.dumps({"run": run, "case": key, "gemmwatch_us": [round(1e3 * first, 3), round(1e3 * second, 3)],
                          "nvbench_us": round(1e3 * theirs[key], 3), "ratio_first": round(first / theirs[key], 4)}),
              flush=True)


if __name__ == "__main__":
    main()
