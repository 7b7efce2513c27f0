"""Issue 37, must-show 2: more readers at once than the API has database connections are all
answered. Through the real server, on both databases.

Before core/web_deps.py bounded its sessions, 25 clients polling GET /api/jobs stalled the server: a
sync endpoint's session holds its connection until closed, and between the endpoint and the
close the request waits for a thread again (FastAPI validates the response on one). Every
connection came to be held by a request waiting for a thread, every thread waited for a
connection, and after the pool's 30 s timeout the readers got 500s.

The readers are raw connections on one event loop (scripts/raw_http.py), so their requests
arrive together as a browser's or a fleet's would; a threaded client spreads them out.
"""

import asyncio
import importlib.util
import time
from pathlib import Path

spec = importlib.util.spec_from_file_location("raw_http", Path(__file__).resolve().parents[1] / "scripts" / "raw_http.py")
raw_http = importlib.util.module_from_spec(spec)
spec.loader.exec_module(raw_http)

READERS = 40  # more than the pool's connections and the threads together, before and after
ROUNDS = 3
# Under the pool's 30 s checkout timeout, which is how long a stalled request waited before its 500.
DEADLINE_S = 25.0


async def read_together(base: str) -> list[tuple[int, float]]:
    async def reader(i: int) -> list[tuple[int, float]]:
        async with raw_http.RawConnection(base) as connection:
            requests = [connection.encode("GET", "/api/jobs?limit=20"), connection.encode("GET", "/healthz")]
            answers = []
            for r in range(ROUNDS):
                started = time.monotonic()
                status = await asyncio.wait_for(connection.send(requests[(i + r) % 2]), DEADLINE_S * 2)
                answers.append((status, time.monotonic() - started))
            return answers

    return [a for answers in await asyncio.gather(*(reader(i) for i in range(READERS))) for a in answers]


def test_more_readers_at_once_than_connections_are_all_answered(cfg, live_server):
    # Two threads: the fewer threads, the sooner they all wait on the pool (a stall needed
    # connections + threads readers at once).
    base = live_server(cfg, GEMMWATCH_API_THREADS="2")
    answers = asyncio.run(read_together(base))
    assert len(answers) == READERS * ROUNDS
    assert {status for status, _ in answers} == {200}, sorted({status for status, _ in answers})
    slowest = max(seconds for _, seconds in answers)
    assert slowest < DEADLINE_S, f"a reader waited {slowest:.1f} s"
