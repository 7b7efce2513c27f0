"""`gemmwatch serve --processes N`: N server processes on one port, each accepting on a socket
of its own (api/serve.py), so a burst of keep-alive clients is spread over all of them."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from core.records.db import upgrade_database
from tests.conftest import ROOT, die_with_parent, free_port, make_settings, worker_env


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def sockets_on(port: int, pids: list[int], state: str) -> dict[int, int]:
    """Sockets with this local port and TCP state ('01' established, '0A' listening) that each
    process holds (from /proc/net/tcp*)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == state:
                inodes.add(cols[9])
    held = {}
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        links = [os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink()]
        held[pid] = sum(1 for link in links if link.startswith("socket:[") and link[8:-1] in inodes)
    return held


def test_processes_share_one_port_and_the_connections_and_stop_together(tmp_path, sqlite_url):
    cfg = make_settings(tmp_path, sqlite_url)
    upgrade_database(cfg)
    port = free_port()
    log = open(tmp_path / "serve.log", "ab")
    server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--processes", "2"],
                              cwd=ROOT, env=worker_env(cfg, runner=None), stdout=log, stderr=log,
                              preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 240  # a loaded 2-core machine starts two server processes slowly
        while not _healthy(port) or len(servers := listening(port, server.pid)) < 2:
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        assert len(servers) == 2  # each with a listening socket of its own

        # 40 keep-alive clients connecting at once, as the load test's do; each asks once.
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        for c in clients:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for c in clients:
            assert c.recv(4096).startswith(b"HTTP/1.1 200")
        held = sockets_on(port, servers, "01")
        # With one shared socket, one process could take all 40; spread by the kernel, the
        # chance that either holds none is 2 * 2^-40.
        assert sum(held.values()) == 40 and min(held.values()) > 0, held
        for c in clients:
            c.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    assert server.returncode is not None
    assert not [pid for pid in servers if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]
    with socket.socket() as s:  # the port is free again
        s.bind(("127.0.0.1", port))


def listening(port: int, parent: int) -> list[int]:
    return [pid for pid, n in sockets_on(port, children_of(parent), "0A").items() if n == 1]


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_process_that_cannot_serve_ends_the_service_with_an_error(tmp_path, sqlite_url):
    cfg = make_settings(tmp_path, sqlite_url)
    upgrade_database(cfg)
    with socket.socket() as taken:  # another program holds the port, without SO_REUSEPORT
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = subprocess.run([sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--processes", "2"],
                             cwd=ROOT, env=worker_env(cfg, runner=None), capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "a server process exited with 1" in run.stderr
    assert "Address already in use" in run.stderr
