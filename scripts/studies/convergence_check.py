#!/usr/bin/env python3
"""Must-show 2 of issue 10: how many cases of a full-ladder run converge with default settings.

Every built-in kernel (and cuBLAS) at 256^3 ... 8192^3 and the skinny shapes, through the runner
exactly as a job runs it. Prints one JSON line per case and a summary line: the share converged,
and which cases at 2048^3 and up ran into the time cap (converged false means the cap ended it).
  python scripts/studies/convergence_check.py > convergence.jsonl
  python scripts/studies/convergence_check.py 8192 16x4096x4096      # only these shapes
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from core.description.builtins import variant_names  # noqa: E402
from core.description.problem_size import required_dims  # noqa: E402
from core.settings import Settings  # noqa: E402
from worker.measure.cases import TimingPolicy, builtin_case  # noqa: E402

SHAPES = [(d, d, d) for d in (256, 512, 1024, 2048, 4096, 8192)] + [
    (16, 4096, 4096), (4096, 16, 4096), (64, 8192, 8192), (8192, 8192, 64)]


def main() -> None:
    from worker.measure.runner import CupyRunner

    runner = CupyRunner()
    policy = TimingPolicy.from_settings(Settings())
    rows = []
    wanted = [required_dims(a) for a in sys.argv[1:]]
    for m, n, k in wanted or SHAPES:
        for name in variant_names():  # cuBLAS first, then every built-in with its defaults
            t0 = time.perf_counter()
            out = runner.run_case(builtin_case(name, m, n, k, seed=m + n + k), policy)
            rows.append({"variant": name, "shape": f"{m}x{n}x{k}", "verified": out.verified,
                         "converged": out.converged, "n": out.n_samples, "seconds": round(time.perf_counter() - t0, 2),
                         "big": min(m, n, k) >= 2048, "error": out.error,
                         "throttled_kept": out.env.get("throttled_samples_kept"),
                         # Both series must converge: the variant's and its interleaved cuBLAS baseline's.
                         **(out.env.get("convergence") or {}).get("variant", {}),
                         "cublas": (out.env.get("convergence") or {}).get("cublas")})
            print(json.dumps(rows[-1]), flush=True)
    timed = [r for r in rows if r["verified"]]
    capped_big = [f"{r['variant']} {r['shape']}" for r in timed if r["big"] and not r["converged"]]
    print(json.dumps({"cases": len(timed), "converged_share": sum(r["converged"] for r in timed) / len(timed),
                      "capped_at_2048_and_up": capped_big}))


if __name__ == "__main__":
    main()
