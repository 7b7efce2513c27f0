#!/usr/bin/env python3
"""A built-in kernel's % of cuBLAS by gemmwatch, checked by two other tools (issue 40).

For each variant and size, in one process on one GPU: gemmwatch's case as a job runs it (verified,
cold samples, against cuBLAS's best where cuBLASLt offers candidates), then the same launches over
the same inputs (runner.calls: the kernel, and cuBLAS's default call) timed by nvbench's cold
measurement (its L2 flush, one launch a sample) and by triton's do_bench (L2 zeroed before each
call, calls queued back to back). A figure that moved a lot between commits is believed only if
the other two tools see the kernel beside cuBLAS about where gemmwatch does.
Run on a GPU: python3 scripts/studies/kernel_cross_check.py VARIANT[,VARIANT...] SIZE [SIZE...]
(a size is N for N^3, or MxNxK). Prints one JSON line per case.
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.description.problem_size import required_dims  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402


def main() -> None:
    from triton.testing import do_bench

    from tests.test_gpu_nvbench import nvbench_medians

    variants, sizes = sys.argv[1].split(","), [required_dims(s) for s in sys.argv[2:]]
    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    lines, benchmarks = [], {}
    for name in variants:
        for m, n, k in sizes:
            case = builtin_case(name, m, n, k, seed=7)
            out = runner.run_case(case, policy)
            key = f"{name}-{m}x{n}x{k}"
            kernel, cublas = runner.calls(case)
            benchmarks[f"{key}-kernel"], benchmarks[f"{key}-cublas"] = kernel, cublas
            bench_kernel, bench_cublas = do_bench(kernel, warmup=100, rep=500), do_bench(cublas, warmup=100, rep=500)
            lines.append({"case": key, "verified": out.verified, "gemmwatch_pct": out.pct_of_cublas,
                          "gemmwatch_us": round(1e3 * out.median_ms, 2) if out.median_ms else None,
                          "gemmwatch_cublas_us": round(1e3 * out.cublas_median_ms, 2) if out.cublas_median_ms else None,
                          "against": out.env.get("cublas_best", {}).get("against"),
                          "do_bench_us": [round(1e3 * bench_kernel, 2), round(1e3 * bench_cublas, 2)],
                          "do_bench_pct": round(100 * bench_cublas / bench_kernel, 1)})
    theirs = nvbench_medians(benchmarks, Path(tempfile.mkdtemp()))
    for line in lines:
        kernel_ms, cublas_ms = theirs[line["case"] + "-kernel"], theirs[line["case"] + "-cublas"]
        line["nvbench_us"] = [round(1e3 * kernel_ms, 2), round(1e3 * cublas_ms, 2)]
        line["nvbench_pct"] = round(100 * cublas_ms / kernel_ms, 1)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
