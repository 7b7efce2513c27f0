#!/usr/bin/env python3
"""Load test: N POST /api/jobs from C concurrent clients against a running gemmwatch, then
wait until every job has ended. Reports requests per second and p50/p99 latency of the
POSTs, and checks in the database that exactly N jobs were stored and all of them ended.
  python3 scripts/load_test.py --server http://127.0.0.1:8000 --token gw_... \
      --database-url postgresql+psycopg://postgres@127.0.0.1/gemmwatch_load --jobs 1000 --clients 50
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, func, select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from api.models import Job  # noqa: E402

BODY = {"variants": ["naive"], "sizes": [[8, 8, 8]]}


async def post_all(server: str, token: str, jobs: int, clients: int) -> tuple[list[float], list[int], float]:
    latencies: list[float] = []
    statuses: list[int] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(jobs):
        queue.put_nowait(i)

    async def client_loop():
        async with httpx.AsyncClient(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
            while True:
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                t0 = time.perf_counter()
                resp = await c.post("/api/jobs", json=BODY)
                latencies.append(time.perf_counter() - t0)
                statuses.append(resp.status_code)

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies, statuses, time.perf_counter() - start


def count(engine, *statuses: str) -> int:
    with engine.connect() as conn:
        query = select(func.count()).select_from(Job)
        if statuses:
            query = query.where(Job.status.in_(statuses))
        return conn.scalar(query)


def run(server: str, token: str, database_url: str, jobs: int, clients: int, drain_timeout: float) -> dict:
    engine = create_engine(database_url)
    before = count(engine)
    latencies, statuses, elapsed = asyncio.run(post_all(server, token, jobs, clients))
    stored = count(engine) - before
    deadline = time.monotonic() + drain_timeout
    t_drain = time.perf_counter()
    while count(engine, "queued", "running") and time.monotonic() < deadline:
        time.sleep(1)
    lat = sorted(latencies)
    report = {
        "jobs": jobs, "clients": clients, "post_seconds": elapsed, "requests_per_second": jobs / elapsed,
        "p50_ms": 1e3 * statistics.median(lat), "p99_ms": 1e3 * lat[max(0, int(0.99 * len(lat)) - 1)],
        "max_ms": 1e3 * lat[-1], "status_codes": {str(s): statuses.count(s) for s in set(statuses)},
        "stored": stored, "succeeded": count(engine, "succeeded") , "failed": count(engine, "failed"),
        "still_open": count(engine, "queued", "running"), "drain_seconds": time.perf_counter() - t_drain,
    }
    engine.dispose()
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--drain-timeout", type=float, default=1800)
    args = ap.parse_args()
    print(json.dumps(run(args.server, args.token, args.database_url, args.jobs, args.clients, args.drain_timeout), indent=1))


if __name__ == "__main__":
    main()
