#!/usr/bin/env python3
"""The API alone under scripts/load_test.py's closed-loop POSTs, with the CPU each request cost
the server processes and PostgreSQL (read from /proc), on a fresh PostgreSQL database.

No workers: the jobs stay queued, and the database is dropped afterwards. Where
tests/test_load.py answers "does it hold under the whole stack", this answers "what does one
request cost", which is what to compare between two versions of the code:
  python3 scripts/api_load_alone.py --runs 3
  python3 scripts/api_load_alone.py --root /path/to/other/checkout   # the same, for other code
Needs PostgreSQL (trust auth) and Redis as `make test` starts them; uses Redis db 5.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from core.records.tokens import create_token  # noqa: E402
from core.records.db import session_factory, upgrade_database  # noqa: E402
from core.settings import Settings  # noqa: E402
sys.path.insert(0, str(ROOT / "scripts"))
from load_test import post_all  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(matches) -> float:
    """User and system CPU of every process whose command line `matches`."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if matches(cmdline):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except OSError:  # gone meanwhile
            pass
    return total / TICKS


def is_server(cmdline: str) -> bool:
    # `gemmwatch serve` and the processes it spawns (multiprocessing's spawn entry point)
    return "cli.main serve" in cmdline or "multiprocessing.spawn" in cmdline


def is_postgres(cmdline: str) -> bool:
    return cmdline.startswith("postgres")


def measure(server: str, token: str, jobs: int, clients: int) -> dict:
    before = cpu_seconds(is_server), cpu_seconds(is_postgres)
    load = os.getloadavg()[0]
    latencies, statuses, elapsed = asyncio.run(post_all(server, token, jobs, clients))
    after = cpu_seconds(is_server), cpu_seconds(is_postgres)
    lat = sorted(latencies)
    return {
        "load_average": load, "requests_per_second": round(jobs / elapsed, 1),
        "p50_ms": round(1e3 * statistics.median(lat), 1), "p99_ms": round(1e3 * lat[max(0, int(0.99 * len(lat)) - 1)], 1),
        "max_ms": round(1e3 * lat[-1], 1), "status_codes": {str(s): statuses.count(s) for s in set(statuses)},
        "server_cpu_ms_per_request": round(1e3 * (after[0] - before[0]) / jobs, 2),
        "postgres_cpu_ms_per_request": round(1e3 * (after[1] - before[1]) / jobs, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--processes", type=int, default=2, help="gemmwatch serve --processes")
    ap.add_argument("--runs", type=int, default=1, help="rounds against the same server")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server to run")
    ap.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    ap.add_argument("--port", type=int, default=18321)
    args = ap.parse_args()

    name = f"gemmwatch_load_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = args.admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1) + f"/{name}"
    data = Path(tempfile.mkdtemp(prefix="gemmwatch-load-"))
    env = dict(os.environ, DATABASE_URL=url, BROKER_URL=args.redis, GEMMWATCH_DATA_DIR=str(data))
    cfg = Settings(DATABASE_URL=url, BROKER_URL=args.redis, GEMMWATCH_DATA_DIR=str(data))
    upgrade_database(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "load")
    server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(args.port),
                               "--processes", str(args.processes)], cwd=args.root, env=env)
    base = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/api/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        time.sleep(1)  # every process up, not only the one that answered
        for _ in range(args.runs):
            print(json.dumps(measure(base, token, args.jobs, args.clients)), flush=True)
    finally:
        server.terminate()
        server.wait(30)
        redis.Redis.from_url(args.redis).flushdb()
        with psycopg.connect(args.admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
