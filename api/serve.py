"""Serving the API from several processes, each accepting connections on a socket of its own.

`uvicorn --workers N` shares one listening socket between its processes, and whichever process
wakes first accepts every connection waiting (asyncio accepts up to the backlog per wake-up). So
50 clients that connect at once land mostly on one process and, with keep-alive, stay there: in
the load test one process served most of them and their latencies were three times the
others'. Here each process binds its own socket with SO_REUSEPORT, and the kernel spreads new
connections over them. One process (the default) is plain uvicorn.
"""

import multiprocessing
import multiprocessing.connection
import os
import signal
import socket

import uvicorn
from fastapi import FastAPI

from api.app import create_app
from core.settings import Settings

# uvicorn imports the app by name in each server process (spawned, below), so the factory it
# calls takes no argument: each process reads its settings from its environment once, here.
APP = "api.serve:app_of_this_process"


def app_of_this_process() -> FastAPI:
    return create_app(Settings())


def serve(host: str, port: int, processes: int = 1, log_level: str = "warning") -> None:
    if processes <= 1:
        uvicorn.run(APP, factory=True, host=host, port=port, log_level=log_level)
        return
    # Spawned, not forked: each child imports the app afresh, with no threads or connections
    # copied from this process. Two malloc arenas a process, not eight a core: a thread's 30 MB
    # body freed in one arena is reused by the next body on another thread, not kept beside it
    # (issue 49, must-show 2: the servers' memory under two attackers; docs/SECURITY.md).
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    spawn = multiprocessing.get_context("spawn")
    children = [spawn.Process(target=serve_one, args=(host, port, log_level), name=f"api-{i}")
                for i in range(processes)]
    for child in children:
        child.start()

    stopping = []

    def stop(signum, _frame):
        if signum is not None:
            stopping.append(signum)
        for child in children:
            if child.is_alive():
                child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        # One process gone for any reason ends the service, so a supervisor (compose's restart
        # policy) brings all of it back rather than leaving it at part strength.
        multiprocessing.connection.wait([c.sentinel for c in children])
    finally:
        stop(None, None)
        for child in children:
            child.join(20)
    failed = [c.exitcode for c in children if c.exitcode not in (0, -signal.SIGTERM)]
    if failed and not stopping:  # a process died on its own (port taken, a crash): say so
        raise SystemExit(f"gemmwatch serve: a server process exited with {failed[0]}")


def serve_one(host: str, port: int, log_level: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    # Not listening yet: the kernel spreads connections only over listening sockets, and uvicorn
    # listens once the app is imported and warmed up (api/warm_up.py). A socket listening from
    # here on took its share of the first clients and held them for the second or so that took.
    uvicorn.Server(uvicorn.Config(APP, factory=True, log_level=log_level)).run(sockets=[sock])
