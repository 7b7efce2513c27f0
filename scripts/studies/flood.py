#!/usr/bin/env python3
"""Study (issue 37, must-show 2): unauthenticated 4 MB job posts flooding a real server while
readers poll it. Starts `gemmwatch serve` (one process) on a fresh data folder with the embedded
SQLite database, seeds it with a few jobs through a token, then for --seconds runs --posters
clients each sending 4 MB `POST /api/jobs` without a token, one after another, beside --readers
clients each polling `GET /api/jobs?limit=20` and `GET /healthz` in turn, one request every
--poll-every seconds (0: each as soon as the last is answered). Prints the readers'
latency percentiles, what the posters were answered, and the server process's largest resident
memory (sampled from /proc every 100 ms).

Every client is a raw HTTP/1.1 connection on asyncio streams (scripts/raw_http.py): on a 2-core
machine the clients share the cores with the server.

  .venv/bin/python scripts/studies/flood.py [--posters 20] [--readers 50] [--seconds 20] [--poll-every 0.5]
"""

import argparse
import asyncio
import multiprocessing
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
from raw_http import RawConnection  # noqa: E402


def rss_bytes(pid: int) -> int:
    """The resident memory of a process and its children (`serve --processes N` spawns N)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return total
    return total + sum(rss_bytes(int(child)) for child in children)


async def poster(base: str, body: bytes, until: float, answers: list) -> None:
    request = RawConnection(base).encode("POST", "/api/jobs", body)
    while time.monotonic() < until:
        try:  # a new connection each time: the server may close one after a refusal
            async with RawConnection(base) as connection:
                answers.append(await connection.send(request))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            answers.append(type(exc).__name__)


def posters_process(base: str, body: bytes, posters: int, seconds: float, started: float, out) -> None:
    """The posters on an event loop of their own, in a process of their own: on one loop with the
    readers, the readers' latencies counted the posters' turns on that loop as the server's."""
    async def run() -> list:
        answers: list = []
        until = started + seconds
        await asyncio.gather(*(poster(base, body, until, answers) for _ in range(posters)))
        return answers

    out.put(asyncio.run(run()))


async def reader_client(base: str, until: float, every_s: float, phase: float, latencies: list, statuses: list) -> None:
    """Polls the job list and /healthz in turn, one request every `every_s` (0: as fast as answered),
    starting `phase` of a period in: readers that poll on their own clocks, not in lockstep."""
    await asyncio.sleep(phase * every_s)
    async with RawConnection(base) as connection:
        requests = [connection.encode("GET", "/api/jobs?limit=20"), connection.encode("GET", "/healthz")]
        i = 0
        while time.monotonic() < until:
            started = time.monotonic()
            statuses.append(await connection.send(requests[i % 2]))
            latencies.append(time.monotonic() - started)
            i += 1
            await asyncio.sleep(max(0.0, started + every_s - time.monotonic()))


async def memory_sampler(pid: int, until: float, samples: list) -> None:
    while time.monotonic() < until:
        samples.append(rss_bytes(pid))
        await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posters", type=int, default=20)
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--poll-every", type=float, default=0.5, help="seconds between a reader's requests (0: closed loop)")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--processes", type=int, default=1, help="`gemmwatch serve --processes`")
    parser.add_argument("--body-bytes", type=int, default=4_000_000)
    args = parser.parse_args()

    data = tempfile.mkdtemp()
    env = {**os.environ, "GEMMWATCH_DATA_DIR": data}
    from core.records.db import session_factory, upgrade_database
    from core.settings import Settings

    upgrade_database(Settings(GEMMWATCH_DATA_DIR=data))  # `serve` serves a database it is given
    server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(args.port),
                               "--processes", str(args.processes)], cwd=ROOT,
                              env=env, stdout=subprocess.DEVNULL, stderr=open(f"{data}/serve.log", "w"))
    try:
        import httpx

        base = f"http://127.0.0.1:{args.port}"
        for _ in range(300):
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        from core.records.tokens import create_token

        with session_factory(Settings(GEMMWATCH_DATA_DIR=data))() as db:
            token = create_token(db, "seed")
        for i in range(20):  # something to read: jobs of the built-in ladder
            httpx.post(f"{base}/api/jobs", json={"variants": ["naive", "smem_tiled"], "sizes": [[64, 64, 64]]},
                       headers={"Authorization": f"Bearer {token}"}, timeout=30)
        piece = "/*\n*/#define A0\n"  # what the source guard works hardest on
        text = piece * (args.body_bytes // len(piece))
        job = {"sources": [{"name": "heavy", "files": {"heavy.cu": text}, "source": "heavy.cu", "entry": "heavy",
                            "block": [16, 16], "grid": {"tile": [16, 16]}}], "sizes": [[64, 64, 64]]}
        body = json.dumps(job).encode()
        idle = rss_bytes(server.pid)

        async def flood(started: float):
            until = started + args.seconds
            latencies, statuses, memory = [], [], []
            await asyncio.gather(memory_sampler(server.pid, until, memory),
                                 *(reader_client(base, until, args.poll_every, i / args.readers, latencies, statuses)
                                   for i in range(args.readers)))
            return latencies, statuses, memory

        spawn = multiprocessing.get_context("spawn")
        out = spawn.Queue()
        started = time.monotonic() + 2.0  # both sides start together, after the posters' process is up
        attack = spawn.Process(target=posters_process, args=(base, body, args.posters, args.seconds, started, out))
        attack.start()
        time.sleep(max(0.0, started - time.monotonic()))
        latencies, statuses, memory = asyncio.run(flood(started))
        answers = out.get(timeout=120)
        attack.join(30)
        latencies.sort()

        def pct(p):
            return 1000 * latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))]

        counts = {a: answers.count(a) for a in sorted(set(map(str, answers)))}
        print(f"{args.posters} posters of {len(body) / 1e6:.1f} MB without a token, {args.readers} readers, "
              f"each polling every {args.poll_every:g} s, {args.seconds:g} s, {args.processes} server process(es) "
              f"(SQLite), {os.cpu_count()} cores; posters in a process of their own")
        print(f"posts answered: {counts}")
        print(f"reads: {len(latencies)}, statuses {sorted(set(statuses))}; latency ms p50 {pct(50):.1f}, "
              f"p90 {pct(90):.1f}, p99 {pct(99):.1f}, max {1000 * latencies[-1]:.1f}")
        print(f"server RSS: idle {idle / 2**20:.0f} MiB, largest during the flood {max(memory) / 2**20:.0f} MiB")
    finally:
        server.terminate()
        server.wait(20)


if __name__ == "__main__":
    main()
