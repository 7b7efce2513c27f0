#!/usr/bin/env python3
"""A repository's own runner beside gemmwatch, as a Markdown table (scripts/studies/home_build_cuda_hgemm.sh).

Reads the runner's logs, in which the repository's Tester (Bruce-Lee-LY/cuda_hgemm's
src/common/tester.h) prints one line per kernel,
    [HGEMM ... profile] Wmma-Async-Pg2s exit, profiling time: 1.234 ms (..%), throughput: 111.4 TFLOPS (..%)
after an "A (M x K) * B (K x N) = C (M x N)" line naming the size, and gemmwatch's results
(GET /api/results as JSON). The Tester's name becomes the manifest's by `--prefix` and snake case
("Wmma-Async-Pg2s" -> "cuda_hgemm_wmma_async_pg2s"); its "Cublas-Tensor-Op" stands beside the
median of gemmwatch's cuBLAS figures at that size.

    python3 scripts/studies/compare_home_build.py --results OUT/results.json OUT/own_runner*.log

Standard library only (it runs on the GPU machine as the study leaves it).
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

SIZE_LINE = re.compile(r"A \((\d+) x (\d+)\) \* B \((\d+) x (\d+)\) = C")
KERNEL_LINE = re.compile(r"\] (\S+) exit, profiling time: ([0-9.]+) ms .*throughput: ([0-9.]+) TFLOPS")
CUBLAS = "Cublas-Tensor-Op"


def variant_name(tester_name: str, prefix: str) -> str:
    return prefix + tester_name.lower().replace("-", "_")


def own_figures(logs: list[Path]) -> dict[tuple[str, tuple[int, int, int]], tuple[float, float]]:
    """(Tester's name, (M, N, K)) -> (mean ms, TFLOPS) from the runner's logs."""
    found: dict = {}
    for log in logs:
        size = None
        for line in log.read_text(errors="replace").splitlines():
            if m := SIZE_LINE.search(line):
                size = (int(m.group(1)), int(m.group(4)), int(m.group(2)))  # M, N, K
            elif (m := KERNEL_LINE.search(line)) and size is not None:
                found[(m.group(1), size)] = (float(m.group(2)), float(m.group(3)))
    return found


def fmt(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table(own: dict, results: list[dict], prefix: str) -> str:
    by_variant = {(r["variant"], (r["m"], r["n"], r["k"])): r for r in results}
    sizes = sorted({s for _n, s in own} | {s for _v, s in by_variant})
    lines = []
    for size in sizes:
        m, n, k = size
        lines += [f"### {m} x {n} x {k}", "",
                  "| kernel | own runner, ms (mean) | own TFLOPS | gemmwatch, ms (median) | gemmwatch TFLOPS | "
                  "gemmwatch / own | verified | rel_error | note |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
        names = [name for name, s in own if s == size and name != CUBLAS]
        names += sorted(v for v, s in by_variant if s == size and v.startswith(prefix)
                        and v not in {variant_name(x, prefix) for x in names})
        for name in names:
            variant = name if name.startswith(prefix) else variant_name(name, prefix)
            mine = own.get((name, size))
            r = by_variant.get((variant, size))
            ms = r.get("median_ms") if r else None
            tflops = r["gflops"] / 1000 if r and r.get("gflops") else None
            ratio = ms / mine[0] if ms and mine else None
            note = "not run by gemmwatch" if r is None else (r.get("error") or "")[:120].replace("|", "/")
            lines.append(f"| {variant.removeprefix(prefix)} | {fmt(mine and mine[0])} | {fmt(mine and mine[1], 1)} | "
                         f"{fmt(ms)} | {fmt(tflops, 1)} | {fmt(ratio)} | "
                         f"{'—' if r is None else ('yes' if r.get('verified') else 'no')} | "
                         f"{'—' if r is None or r.get('rel_error') is None else format(r['rel_error'], '.2e')} | "
                         f"{note} |")
        theirs = [r["cublas_median_ms"] for (v, s), r in by_variant.items()
                  if s == size and v.startswith(prefix) and r.get("cublas_median_ms")]
        mine = own.get((CUBLAS, size))
        cublas_ms = statistics.median(theirs) if theirs else None
        flops = 2 * m * n * k
        lines.append(f"| cuBLAS (CUBLAS_COMPUTE_16F) | {fmt(mine and mine[0])} | {fmt(mine and mine[1], 1)} | "
                     f"{fmt(cublas_ms)} | {fmt(cublas_ms and flops / cublas_ms / 1e9, 1)} | "
                     f"{fmt(cublas_ms / mine[0] if cublas_ms and mine else None)} | | | "
                     f"gemmwatch: median over its {len(theirs)} cases |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", type=Path, help="the runner's logs")
    ap.add_argument("--results", type=Path, required=True, help="GET /api/results, saved as JSON")
    ap.add_argument("--prefix", default="cuda_hgemm_", help="what the manifest puts before each kernel's name")
    args = ap.parse_args()
    try:
        results = json.loads(args.results.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"{args.results}: no results ({exc})", file=sys.stderr)
        results = []
    if isinstance(results, dict):  # a job (GET /api/jobs/{id}) holds them under "results"
        results = results.get("results", [])
    print(table(own_figures([p for p in args.logs if p.is_file()]), results, args.prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
