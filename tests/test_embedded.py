"""`gemmwatch up` on a machine without a GPU: it serves, and a job fails with 'no CUDA device'."""

import os
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import HAVE_GPU, HTTP_TIMEOUT_S, ROOT, free_port


@pytest.mark.skipif(HAVE_GPU, reason="asserts the no-GPU behaviour; the GPU path is tests/test_gpu.py")
def test_up_serves_and_jobs_fail_cleanly_without_a_gpu(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "BROKER_URL") and not k.startswith("GEMMWATCH_")}
    env["PYTHONPATH"] = str(ROOT)
    log = open(tmp_path / "up.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", "up", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 240  # a loaded machine starts a server and a worker slowly
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=HTTP_TIMEOUT_S).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, "gemmwatch up did not serve within 240 s"
            time.sleep(0.1)
        assert (tmp_path / ".gemmwatch" / "gemmwatch.db").exists()  # SQLite is the default
        body = {"variants": ["naive"], "sizes": [[64, 64, 64]]}
        assert httpx.post(f"{base}/api/jobs", json=body, timeout=HTTP_TIMEOUT_S).status_code == 401  # writes need a token
        token = (tmp_path / ".gemmwatch" / "token").read_text().strip()
        assert oct((tmp_path / ".gemmwatch" / "token").stat().st_mode & 0o777) == "0o600"
        job = httpx.post(f"{base}/api/jobs", json=body, headers={"Authorization": f"Bearer {token}"},
                         timeout=HTTP_TIMEOUT_S).json()
        deadline = time.monotonic() + 240
        while job["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"job still {job['status']}: a real worker should have failed it"
            time.sleep(0.1)
            job = httpx.get(f"{base}/api/jobs/{job['id']}", timeout=HTTP_TIMEOUT_S).json()
        assert job["status"] == "failed"
        assert job["error"].startswith("no CUDA device")
        assert httpx.get(f"{base}/", timeout=HTTP_TIMEOUT_S).status_code == 200
        log = (tmp_path / "up.log").read_text()
        assert f"http://127.0.0.1:{port}/" in log
        assert token not in log  # tokens are never logged
        workers = children(proc.pid)
        assert workers, "gemmwatch up started no worker process"
    finally:
        proc.terminate()
        proc.wait(30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers):  # no worker outlives `up`
        assert time.monotonic() < deadline, f"worker processes {workers} outlived gemmwatch up"
        time.sleep(0.1)


def children(pid: int) -> list[int]:
    return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]


def alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/status").read().split("State:")[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")
