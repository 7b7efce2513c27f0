#!/usr/bin/env python3
"""Copy finished jobs' results into a gemmwatch through POST /api/results (idempotent).

For results measured on a machine whose database stays behind (a lent GPU machine): save
`GET /api/jobs/{id}` there as JSON, bring the files here, then
  python3 scripts/import_job_results.py job1.json job2.json --server http://127.0.0.1:8000 --token $TOKEN
Each job becomes one posted run (run_id from the GPU's UUID and the job id, so a second import adds
nothing), filed under the job's commit, with the GPU identity its worker recorded. `gemmwatch demo`
posts the figures in cli/demo_figures/ the same way (cli/demo.py as_batch).
"""

import argparse
import json
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli.demo import as_batch  # noqa: E402  (the one place a saved job becomes a posted run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("jobs", nargs="+", type=Path, help="JSON files of GET /api/jobs/{id}")
    ap.add_argument("--server", default="http://127.0.0.1:8000")
    ap.add_argument("--token", required=True)
    args = ap.parse_args()
    with httpx.Client(base_url=args.server, headers={"Authorization": f"Bearer {args.token}"}, timeout=60) as client:
        for path in args.jobs:
            resp = client.post("/api/results", json=as_batch(json.loads(path.read_text())))
            print(f"{path}: {resp.status_code} {resp.text[:200]}")
            if resp.status_code not in (200, 201):
                sys.exit(1)


if __name__ == "__main__":
    main()
