"""What each pytest-xdist worker owns, so tests running side by side never meet.

`make test` runs the suite in several xdist worker processes. Each one gets:
- its own Redis database: Celery workers of one test must not take another test's jobs off a
  shared `gpu.any` queue, and each session flushes its database at the start;
- its own range of TCP ports for the servers the tests start: `gemmwatch serve` binds with
  SO_REUSEPORT, so two servers given the same port would both start and share its connections
  rather than one failing. Asking the kernel for a free port (bind to port 0) and binding it
  later leaves that window open between two processes; ranges that never overlap close it.
Temporary folders (data dirs, filesystem brokers, logs) are already per worker: pytest's
basetemp is, and every test has its own tmp_path. PostgreSQL tests make a database per test.
"""

import itertools
import os
import socket
from urllib.parse import urlsplit, urlunsplit

DEFAULT_REDIS = "redis://127.0.0.1:6379/1"  # gw0 db 1, gw1 db 2, ...
REDIS_DATABASES = 16  # redis-server's default `databases`

# Below Linux's ephemeral range (32768-60999), so no connection's local port lands in ours.
PORT_BASE, PORTS_PER_WORKER = 20000, 400


def worker_index() -> int:
    """0 for the main process (no xdist) and gw0, 1 for gw1, ..."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw"))


def redis_url(setting: str | None = None, index: int | None = None) -> str:
    """This worker's Redis URL, from GEMMWATCH_TEST_REDIS.

    One URL: worker k uses its database number + k (redis://127.0.0.1:6379/1 gives gw0 db 1,
    gw1 db 2). A comma-separated list: worker k uses the k-th, for when the numbers next to
    yours are someone else's."""
    setting = setting if setting is not None else os.environ.get("GEMMWATCH_TEST_REDIS", DEFAULT_REDIS)
    index = worker_index() if index is None else index
    urls = [u.strip() for u in setting.split(",") if u.strip()]
    if len(urls) > 1:
        if index >= len(urls):
            raise RuntimeError(f"GEMMWATCH_TEST_REDIS lists {len(urls)} Redis URLs; xdist worker {index} needs one more")
        return urls[index]
    parts = urlsplit(urls[0])
    db = int(parts.path.strip("/") or 0) + index
    if db >= REDIS_DATABASES:
        raise RuntimeError(f"xdist worker {index} would use Redis database {db}; lower GEMMWATCH_TEST_REDIS's "
                           f"database number or list one URL per worker")
    return urlunsplit(parts._replace(path=f"/{db}"))


_next_port = itertools.count()


def free_port() -> int:
    """A port of this worker's own range that nothing listens on (checked by binding it, as a
    server would, with SO_REUSEADDR: a port whose last connection is in TIME_WAIT is free)."""
    first = PORT_BASE + worker_index() * PORTS_PER_WORKER
    for _ in range(PORTS_PER_WORKER):
        port = first + next(_next_port) % PORTS_PER_WORKER
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}..{first + PORTS_PER_WORKER - 1}")
