#!/usr/bin/env python3
"""Print the kernel ladder as a Markdown table from a gemmwatch server's results for one commit:
GFLOPS and percent of cuBLAS FP32 (measured in the same job) per variant and size.
  python3 scripts/studies/ladder_table.py --server http://127.0.0.1:8000 --sha 1a2b3c4 --gpu H100
"""

import argparse
import math
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.description.builtins import builtin_kernels  # noqa: E402

SIZES = [1024, 2048, 4096, 8192]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="http://127.0.0.1:8000")
    ap.add_argument("--sha", required=True)
    ap.add_argument("--gpu", default="H100")
    args = ap.parse_args()

    rows = httpx.get(f"{args.server}/api/results", params={"sha": args.sha, "gpu": args.gpu, "limit": 5000}).json()
    best: dict[tuple[str, int], dict] = {}
    for r in rows:
        if r["m"] == r["n"] == r["k"] and r["m"] in SIZES and r["verified"]:
            key = (r["variant"], r["m"])
            if key not in best or r["id"] > best[key]["id"]:  # the newest job's figure
                best[key] = r
    print("| variant | technique | " + " | ".join(f"{s}³ GFLOPS (% cuBLAS)" for s in SIZES) + " | geomean % |")
    print("| --- | --- | " + " | ".join("---:" for _ in SIZES) + " | ---: |")
    for name, desc in builtin_kernels().items():  # the built-ins of this checkout (cuBLAS is not one)
        technique = desc.technique or ""
        cells, pcts = [], []
        for s in SIZES:
            r = best.get((name, s))
            cells.append(f"{r['gflops']:,.0f} ({r['pct_of_cublas']:.1f} %)" if r else "—")
            if r:
                pcts.append(r["pct_of_cublas"])
        geo = math.exp(sum(math.log(p) for p in pcts) / len(pcts)) if len(pcts) == len(SIZES) else None
        print(f"| {name} | {technique} | " + " | ".join(cells) + f" | {geo:.1f} % |" if geo else
              f"| {name} | {technique} | " + " | ".join(cells) + " | — |")
    # The baseline rows, one per compute mode: a TF32 kernel is measured against cuBLAS TF32.
    for mode in ("fp32", "tf32"):
        cublas = [r for r in best.values() if r["compute_mode"] == mode]
        per_size = {s: sorted(r["cublas_gflops"] for r in cublas if r["m"] == s) for s in SIZES}
        if any(per_size.values()):
            print(f"| cuBLAS {mode.upper()} (median over the jobs' paired runs) | vendor baseline | "
                  + " | ".join(f"{v[len(v) // 2]:,.0f}" if v else "—" for v in per_size.values()) + " | 100 % |")


if __name__ == "__main__":
    main()
