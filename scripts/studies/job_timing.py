#!/usr/bin/env python3
"""Post the same job N times to a running gemmwatch and report, per run, the time from
POST /api/jobs to `succeeded`, and per variant the spread of its median time across runs
((max - min) / median of the medians). Used for the cost and repeatability figures in
docs/BENCHMARKS.md.
  python3 scripts/studies/job_timing.py --server http://127.0.0.1:8000 --variants smem_tiled --size 4096 --runs 5
A job is posted with a write token: --token, else $GEMMWATCH_TOKEN (`gemmwatch up` writes one to its data folder).
"""

import argparse
import json
import os
import statistics
import time

import httpx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="http://127.0.0.1:8000")
    ap.add_argument("--variants", required=True, help="comma-separated")
    ap.add_argument("--size", type=int, required=True, help="cube side")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--token", default=os.environ.get("GEMMWATCH_TOKEN"), help="write token (default $GEMMWATCH_TOKEN)")
    args = ap.parse_args()

    body = {"variants": args.variants.split(","), "sizes": [[args.size] * 3]}
    latencies, medians = [], {}
    # POST /api/jobs takes a write token; reading a job does not need one.
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    with httpx.Client(base_url=args.server, timeout=60, headers=headers) as client:
        for run in range(args.runs):
            t0 = time.perf_counter()
            job = client.post("/api/jobs", json=body).raise_for_status().json()
            while job["status"] in ("queued", "running"):
                time.sleep(0.02)
                job = client.get(f"/api/jobs/{job['id']}").json()
            latencies.append(time.perf_counter() - t0)
            if job["status"] != "succeeded":
                raise SystemExit(f"job {job['id']} {job['status']}: {job['error']}")
            for r in job["results"]:
                medians.setdefault(r["variant"], []).append(r["median_ms"])
                medians.setdefault(f"cublas (beside {r['variant']})", []).append(r["cublas_median_ms"])
            print(f"run {run + 1}: job {job['id']} POST -> succeeded {latencies[-1]:.2f} s", flush=True)

    report = {"latency_s": latencies, "medians_ms": medians, "spread": {}}
    for name, values in medians.items():
        spread = (max(values) - min(values)) / statistics.median(values)
        report["spread"][name] = spread
        print(f"{name:40} medians {['%.4f' % v for v in values]} ms  spread {100 * spread:.2f} %")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
