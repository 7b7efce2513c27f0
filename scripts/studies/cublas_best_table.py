#!/usr/bin/env python3
"""Study (issue 40): cuBLAS's default call against cuBLAS's best (the fastest of cuBLASLt's
heuristic candidates, worker/measure/cublas_best.py) per precision at SIZES^3 on this GPU, through the
runner as a job's cuBLAS-alone case measures it (cold). Prints a markdown table and writes the
cases' env.cublas_best to OUT.json.
  python3 scripts/studies/cublas_best_table.py OUT.json [SIZE ...]
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from core.description.builtins import CUBLAS_VARIANTS  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402
from worker.measure.runner import CupyRunner  # noqa: E402

out_path = Path(sys.argv[1])
sizes = [int(s) for s in sys.argv[2:]] or [1024, 2048, 4096, 8192]
cfg = Settings()
runner = CupyRunner(cfg)
policy = TimingPolicy.from_settings(cfg)
rows, kept = [], []
print("| precision | size | cuBLAS default | cuBLAS best | best / default time | best's algorithm (id, tile, stages, split-K) | timed against |")
print("| --- | --- | ---: | ---: | ---: | --- | --- |")
for variant in CUBLAS_VARIANTS:
    for s in sizes:
        out = runner.run_case(builtin_case(variant, s, s, s, seed=1), policy)
        best = out.env.get("cublas_best") or {}
        kept.append({"variant": variant, "size": s, "cublas_best": best, "error": out.error,
                     "cublas_median_ms": out.cublas_median_ms})
        if out.error or not best.get("default"):
            print(f"| {variant} | {s}³ | {out.error or best.get('why')} | | | | |", flush=True)
            continue
        d, b = best["default"]["median_ms"], best["best"]["median_ms"]
        tflops = lambda ms: 2.0 * s**3 / (ms * 1e-3) / 1e12  # noqa: E731
        algo = best["best"].get("algo") or {}
        print(f"| {variant} | {s}³ | {d:.4f} ms ({tflops(d):,.0f} TFLOPS) | {b:.4f} ms ({tflops(b):,.0f} TFLOPS) | "
              f"{b / d:.3f} | {algo.get('id', 'default call')}, {algo.get('tile_id', '')}, {algo.get('stages_id', '')}, "
              f"{algo.get('splitk', '')} | {best['against']} |", flush=True)
out_path.write_text(json.dumps(kept, indent=1))
