#!/usr/bin/env python3
"""One process's worth of the small-size comparison with nvbench, to run many times (issue 10).

cuBLAS at 256^3 and 512^3 (a split-K GEMM plus its reduction) read 4-6 % below nvbench in some
runs and 2 % above in others. Whether that difference is systematic shows only across processes:
each run of this script times cuBLAS and smem_tiled at 128^3-512^3 through the runner twice (as
a job would, one case after another), then through nvbench's cold measurement, and prints one
JSON line per case.
    for i in 1 2 3 4 5 6; do python3 scripts/nvbench_repeat.py $i; done
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.settings import Settings  # noqa: E402
from kernels.registry import VARIANTS  # noqa: E402
from worker.cases import Case, TimingPolicy  # noqa: E402
from worker.runner import CupyRunner  # noqa: E402

SIZES = (128, 256, 512)


def main() -> None:
    import cupy as cp

    from tests.test_gpu_nvbench import nvbench_medians

    run = sys.argv[1] if len(sys.argv) > 1 else "1"
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    ours: dict[str, list[float]] = {}
    benchmarks = {}
    for d in SIZES:
        case = Case(0, "smem_tiled", d, d, d, seed=d, launch=VARIANTS["smem_tiled"].resolve())
        for _ in range(2):
            out = runner.run_case(case, policy)
            ours.setdefault(f"smem_tiled-{d}", []).append(out.median_ms)
            ours.setdefault(f"cublas-{d}", []).append(out.cublas_median_ms)
        a, b = runner._inputs(case)
        c = cp.empty((d, d), dtype=cp.float32)
        launch = runner._compile(case)
        benchmarks[f"smem_tiled-{d}"] = lambda launch=launch, a=a, b=b, c=c: launch(a, b, c, 1.0, 0.0)
        benchmarks[f"cublas-{d}"] = lambda a=a, b=b, c=c: cp.matmul(a, b, out=c)
    theirs = nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))
    for key, (first, second) in ours.items():
        print(json.dumps({"run": run, "case": key, "gemmwatch_us": [round(1e3 * first, 3), round(1e3 * second, 3)],
                          "nvbench_us": round(1e3 * theirs[key], 3), "ratio_first": round(first / theirs[key], 4)}),
              flush=True)


if __name__ == "__main__":
    main()
