#!/usr/bin/env python3
"""Load test: N POST /api/jobs from C concurrent clients against a running gemmwatch, then
wait until every job has ended. Reports requests per second and p50/p99 latency of the
POSTs, and checks in the database that exactly N jobs were stored and all of them ended.
  python3 scripts/load_test.py --server http://127.0.0.1:8000 --token gw_... \
      --database-url postgresql+psycopg://postgres@127.0.0.1/gemmwatch_load --jobs 1000 --clients 50

Each client is one keep-alive HTTP/1.1 connection sending its next POST as soon as the last
is answered (closed loop). The default client ("raw") writes pre-encoded requests on asyncio
streams, as wrk does: on the 2-core test machine the client shares the cores with the server,
PostgreSQL and the workers, and httpx spent ~3 ms of CPU per request there, which the
latencies then included. `--client httpx` keeps the old client for comparison.
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
from core.records.models import Job  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from raw_http import RawConnection  # noqa: E402

BODY = {"variants": ["naive"], "sizes": [[8, 8, 8]]}


class RawClient:
    """One keep-alive connection that POSTs the same pre-encoded request (scripts/raw_http.py)."""

    def __init__(self, server: str, token: str, path: str, body: dict):
        self.connection = RawConnection(server, token)
        self.request = self.connection.encode("POST", path, body)

    async def __aenter__(self):
        await self.connection.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self.connection.__aexit__(*exc)

    async def post(self) -> int:
        return await self.connection.send(self.request)


class HttpxClient:
    def __init__(self, server: str, token: str, path: str, body: dict):
        self.client = httpx.AsyncClient(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.path, self.body = path, body

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.client.aclose()

    async def post(self) -> int:
        return (await self.client.post(self.path, json=self.body)).status_code


CLIENTS = {"raw": RawClient, "httpx": HttpxClient}


async def post_all(server: str, token: str, jobs: int, clients: int,
                   client: str = "raw") -> tuple[list[float], list[int], float]:
    latencies: list[float] = []
    statuses: list[int] = []
    left = iter(range(jobs))

    async def client_loop():
        async with CLIENTS[client](server, token, "/api/jobs", BODY) as c:
            for _ in left:
                t0 = time.perf_counter()
                status = await c.post()
                latencies.append(time.perf_counter() - t0)
                statuses.append(status)

    start = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return latencies, statuses, time.perf_counter() - start


def count(engine, *statuses: str) -> int:
    with engine.connect() as conn:
        query = select(func.count()).select_from(Job)
        if statuses:
            query = query.where(Job.status.in_(statuses))
        return conn.scalar(query)


def run(server: str, token: str, database_url: str, jobs: int, clients: int, drain_timeout: float,
        client: str = "raw", after_posts=None) -> dict:
    """after_posts: called once every POST is answered, before waiting for the jobs to end."""
    engine = create_engine(database_url)
    before = count(engine)
    latencies, statuses, elapsed = asyncio.run(post_all(server, token, jobs, clients, client))
    stored = count(engine) - before
    if after_posts is not None:
        after_posts()
    deadline = time.monotonic() + drain_timeout
    t_drain = time.perf_counter()
    while count(engine, "queued", "running") and time.monotonic() < deadline:
        time.sleep(1)
    lat = sorted(latencies)
    report = {
        "jobs": jobs, "clients": clients, "client": client, "post_seconds": elapsed, "requests_per_second": jobs / elapsed,
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
    ap.add_argument("--client", choices=sorted(CLIENTS), default="raw")
    args = ap.parse_args()
    print(json.dumps(run(args.server, args.token, args.database_url, args.jobs, args.clients, args.drain_timeout,
                         args.client), indent=1))


if __name__ == "__main__":
    main()
