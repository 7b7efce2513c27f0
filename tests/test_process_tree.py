"""Issue 49, row 9: a GPU process ended at a job's budget or a case's time limit takes what it
started with it (worker/process_tree.py): a parent whose child put itself in a session of its own,
as the compile process's nvcc does, and whose grandchild sleeps; then a real job whose nvcc
compile outlives its budget, through the server and a worker."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from core.settings import Settings
from tests.conftest import HTTP_TIMEOUT_S
from tests.descriptions import one_file
from tests.test_include_probe import GEMM
from tests.test_request_gate import token_with
from worker.compile import nvcc
from worker.process_tree import descendants, kill_tree

TREE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"],
                 start_new_session=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_is_killed_with_its_whole_tree_whatever_session_they_took():
    parent = subprocess.Popen([sys.executable, "-c", TREE])
    deadline = time.monotonic() + 60
    while len(descendants(parent.pid)) < 2:  # the child and the grandchild, started by now
        assert time.monotonic() < deadline, "the tree did not start"
        time.sleep(0.05)
    below = kill_tree(parent.pid)
    assert len(below) == 2
    parent.wait(30)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in below):  # reaped by init once killed
        assert time.monotonic() < deadline, [p for p in below if alive(p)]
        time.sleep(0.05)
    assert os.getpid() not in below


# 16,384 dependent FMAs, unrolled in full: nvcc's device compile takes 43 s and 240 MB over them on
# an idle machine (nvcc 13.5), all of it in nvcc's children; the GEMM beside it is what the job names.
SLOW = """extern "C" __global__ void unrolled(const float *X, float *out) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = X[j];
#pragma unroll
    for (int i = 0; i < 256; ++i) {
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = fmaf(acc[(j * 7 + i) % 64], X[i * 64 + j], acc[(j + 1) % 64]);
    }
#pragma unroll
    for (int j = 0; j < 64; ++j) out[j] = acc[j];
}
"""
BUDGET_S = 10  # the compile has begun by then even on a busy machine; 33 s of it are left


def compile_processes(under: Path) -> set[int]:
    """Live processes working in a folder beneath `under` (a compile's own temporary folder)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd").startswith(str(under)) and alive(int(entry.name)):
                    found.add(int(entry.name))
            except OSError:  # gone meanwhile, or not ours
                continue
    return found


@pytest.mark.skipif(nvcc.nvcc_path(Settings()) is None, reason="needs nvcc (gemmwatch[compile])")
def test_a_job_stopped_by_its_budget_leaves_no_compile_running(cfg, start_worker, live_server, tmp_path):
    """The row through the real server (both databases) and a real worker: a job whose nvcc compile
    outlives GEMMWATCH_JOB_BUDGET_S ends with its budget's error, and none of the compile's
    processes (nvcc, cicc, ptxas) outlives it. Before the fix they ran on under init for the rest
    of the compile, here 30 s or more."""
    scratch = tmp_path / "worker-tmp"  # the worker's compile folders, and only this test's
    scratch.mkdir()
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="300", GEMMWATCH_JOB_BUDGET_S=str(BUDGET_S), TMPDIR=str(scratch))
    base = live_server(cfg)
    source = one_file("slow", SLOW + GEMM, "probe", [16, 16], compiler="nvcc")
    posted = httpx.post(f"{base}/api/jobs", json={"sources": [source], "sizes": [[16, 16, 16]]},
                        headers={"Authorization": f"Bearer {token_with(cfg, 'slow')}"}, timeout=HTTP_TIMEOUT_S)
    assert posted.status_code == 202, posted.text
    seen: set[int] = set()
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT_S) as reader:
        deadline = time.monotonic() + 300
        while (job := reader.get(f"/api/jobs/{posted.json()['id']}").json())["status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, job
            seen |= compile_processes(scratch)
            time.sleep(0.05)
    (only,) = job["results"]
    assert f"job budget of {BUDGET_S} s spent" in (only["error"] or ""), only
    assert seen, "no compile process was seen: the job ended before its compile began"
    deadline = time.monotonic() + 10  # killed ones are gone in milliseconds once the job has ended
    while left := compile_processes(scratch):
        assert time.monotonic() < deadline, f"compile processes {sorted(left)} outlived the job's budget stop"
        time.sleep(0.05)
