"""`gemmwatch ci` against a running stack: exit codes, the Markdown summary, $GITHUB_STEP_SUMMARY."""

import json
import os
import subprocess
import sys

import pytest

from core.records.tokens import create_token
from core.records.db import session_factory, upgrade_database
from tests.conftest import HTTP_TIMEOUT_S, ROOT, make_settings

KERNEL = """
extern "C" __global__ void my_gemm(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""
# The CPU double times a source that defines this as that much slower: the "slowed" commit.
SLOWER = "#define FAKE_GPU_SLOWDOWN_PCT 1900\n" + KERNEL  # 20x: far beyond the CPU double's noise


def kernels_dir(path, text):
    path.mkdir()
    (path / "my_gemm.cu").write_text(text)
    (path / "gemmwatch.json").write_text(json.dumps(
        [{"name": "my_gemm", "source": "my_gemm.cu", "entry": "my_gemm", "block": [16, 16], "grid": {"tile": [16, 16]}}]))
    return path


@pytest.fixture
def server(tmp_path, pg_url, redis_url, start_worker, live_server):
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "ci")
    return live_server(cfg), token


# Each test waits on `gemmwatch ci`, whose own deadline (below) is the one that should speak first: every
# module that calls ci() takes this bound (pytest-timeout's 300 s cut one off beside a busy suite).
CI_DEADLINE = pytest.mark.timeout(1500)
pytestmark = CI_DEADLINE

def ci(server_url, token, tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEMMWATCH_")}
    env.update(GEMMWATCH_TOKEN=token, PYTHONPATH=str(ROOT), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    # A deadline for a busy 2-core machine: a fresh clone's first jobs compile in a worker that shares
    # the CPU with the rest of the suite (a commit's second job once waited past 120 s there).
    cmd = [sys.executable, "-m", "cli.main", "ci", "--server", server_url, "--size", "128", "--timeout", "900", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.long
def test_ci_passes_flags_a_slowed_kernel_and_fails_a_broken_one(server, tmp_path):
    url, token = server
    same, slow = kernels_dir(tmp_path / "a", KERNEL), kernels_dir(tmp_path / "b", SLOWER)

    first = ci(url, token, tmp_path, "--commit", "aaaa0001", "--branch", "main", "--kernels-dir", str(same))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no baseline" in first.stdout

    slowed = ci(url, token, tmp_path, "--commit", "bbbb0002", "--branch", "pr", "--base", "aaaa0001",
                "--kernels-dir", str(slow))
    assert slowed.returncode == 1, slowed.stdout + slowed.stderr
    assert "| my_gemm | 128×128×128 |" in slowed.stdout and "❌ regression" in slowed.stdout
    assert "Regressions:" in slowed.stdout and "my_gemm 128×128×128" in slowed.stdout

    unchanged = ci(url, token, tmp_path, "--commit", "cccc0003", "--branch", "pr2", "--base", "aaaa0001",
                   "--kernels-dir", str(same))
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert "❌" not in unchanged.stdout  # ok, or "faster" when the CPU double's timing wanders

    broken = kernels_dir(tmp_path / "c", KERNEL.replace("float acc = 0.0f;", "float acc = 0.0f"))
    failed = ci(url, token, tmp_path, "--commit", "dddd0004", "--base", "aaaa0001", "--kernels-dir", str(broken))
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "compile error" in failed.stdout

    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("### gemmwatch:") == 4 and "bbbb0002" in summary


def test_builtin_variants_against_the_base_branch(server, tmp_path):
    url, token = server
    for sha in ("eeee0001", "eeee0002"):
        run = ci(url, token, tmp_path, "--commit", sha, "--branch", "main", "--base-branch", "main", "--variants", "naive")
        assert run.returncode == 0, run.stdout + run.stderr
    assert "vs branch main" in run.stdout and "| naive |" in run.stdout


def test_unreachable_server_exits_3(tmp_path):
    run = ci("http://127.0.0.1:1", "gw_x", tmp_path, "--commit", "ffff0001", "--variants", "naive")
    assert run.returncode == 3


def test_a_bad_token_is_reported_and_exits_2(server, tmp_path):
    url, _ = server
    run = ci(url, "gw_wrong", tmp_path, "--commit", "ffff0002", "--variants", "naive")
    assert run.returncode == 2 and "401" in run.stderr


def folder_of(path, names):
    """One source, several kernels named after it (each its own variant)."""
    path.mkdir()
    (path / "my_gemm.cu").write_text(KERNEL)
    (path / "gemmwatch.json").write_text(json.dumps(
        [{"name": n, "source": "my_gemm.cu", "entry": "my_gemm", "block": [16, 16], "grid": {"tile": [16, 16]}}
         for n in names]))
    return path


def test_a_commit_past_one_jobs_limit_is_measured_in_several_jobs_and_reported_as_one(tmp_path, pg_url, redis_url,
                                                                                      start_worker, live_server):
    """A server that takes 4 cases per job: three kernels at two sizes are two jobs (two kernels,
    then one), every case in one summary, each row linked to its own job's result; more sizes
    than a job holds is refused before anything is posted."""
    cfg = make_settings(tmp_path, pg_url, redis_url)
    upgrade_database(cfg)
    start_worker(cfg)
    with session_factory(cfg)() as db:
        token = create_token(db, "ci")
    url = live_server(cfg, GEMMWATCH_MAX_CASES="4")
    import httpx

    assert httpx.get(f"{url}/api/limits", timeout=HTTP_TIMEOUT_S).json()["max_cases_per_job"] == 4
    folder = folder_of(tmp_path / "k", ["mine_a", "mine_b", "mine_c"])
    run = ci(url, token, tmp_path, "--commit", "abab0001", "--branch", "main", "--kernels-dir", str(folder), "--size", "64")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Measured in 2 jobs" in run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("| mine_")]
    assert sorted(r.split(" | ")[0:2] for r in rows) == sorted(
        [f"| {n}", s] for n in ("mine_a", "mine_b", "mine_c") for s in ("128×128×128", "64×64×64"))
    jobs = httpx.get(f"{url}/api/jobs", params={"limit": 10}, headers={"Authorization": f"Bearer {token}"},
                     timeout=HTTP_TIMEOUT_S).json()
    ours = sorted((j for j in jobs if j["commit"] and j["commit"]["sha"] == "abab0001"), key=lambda j: j["id"])
    assert [sorted(j["variants"]) for j in ours] == [["mine_a", "mine_b"], ["mine_c"]]
    assert all(f"#r-{ours[1]['id']}-mine_c-" in r for r in rows if r.startswith("| mine_c"))

    too_many = ci(url, token, tmp_path, "--commit", "abab0002", "--kernels-dir", str(folder),
                  *[a for s in ("1", "2", "3", "4") for a in ("--size", s)])
    assert too_many.returncode == 2 and "5 sizes are more cases than one job may hold" in too_many.stderr
    # The third kernel's source past the server's GEMMWATCH_MAX_SOURCE_BYTES (2,000,000): refused by
    # name before the first two kernels' job is posted, where it once ran them first.
    big = folder_of(tmp_path / "big", ["mine_a", "mine_b"])
    (big / "big.cu").write_text(KERNEL + "// " + "x" * 2_000_000 + "\n")
    listed = json.loads((big / "gemmwatch.json").read_text())
    (big / "gemmwatch.json").write_text(json.dumps(listed + [{**listed[0], "name": "mine_big", "source": "big.cu"}]))
    refused = ci(url, token, tmp_path, "--commit", "abab0003", "--kernels-dir", str(big), "--size", "64")
    assert refused.returncode == 2 and "mine_big" in refused.stderr and "the files hold" in refused.stderr, \
        refused.stdout + refused.stderr
    jobs = httpx.get(f"{url}/api/jobs", params={"limit": 10}, headers={"Authorization": f"Bearer {token}"},
                     timeout=HTTP_TIMEOUT_S).json()
    assert not [j for j in jobs if j["commit"] and j["commit"]["sha"] == "abab0003"]


def test_split_job_keeps_each_jobs_own_sources_and_every_variant_once():
    from cli.ci import BeyondServerLimits, split_job

    body = {"sizes": [[8, 8, 8]] * 3, "variants": [f"k{i}" for i in range(10)] + ["naive"],
            "sources": [{"name": f"k{i}"} for i in range(10)], "commit": {"sha": "x"}}
    limits = {"max_cases_per_job": 12, "max_sources_per_job": 64}
    parts = split_job(body, limits)
    assert [p["variants"] for p in parts] == [["k0", "k1", "k2", "k3"], ["k4", "k5", "k6", "k7"], ["k8", "k9", "naive"]]
    assert [[s["name"] for s in p["sources"]] for p in parts] == [p["variants"][:4] if i < 2 else ["k8", "k9"]
                                                                  for i, p in enumerate(parts)]
    assert all(len(p["variants"]) * len(p["sizes"]) <= 12 and p["commit"] == body["commit"] for p in parts)
    assert split_job(body, {"max_cases_per_job": 64, "max_sources_per_job": 2})[0]["variants"] == ["k0", "k1"]
    assert split_job(body, None) == [body]  # a server that does not say its limits: one job, as before
    with pytest.raises(BeyondServerLimits):
        split_job(body, {"max_cases_per_job": 2, "max_sources_per_job": 64})
    # A part past the server's source limit is refused before any part is posted, naming its kernels;
    # the limit is the server's own measure: the UTF-8 bytes of each distinct file of a job, once.
    sized = {**body, "sources": [{"name": f"k{i}", "files": {"k.cu": "é" * (50 if i == 7 else 10 + i)}}
                                 for i in range(10)]}
    second = 2 * (14 + 15 + 16 + 50)  # k4..k7's files: 190 bytes
    with pytest.raises(BeyondServerLimits, match=f"the 4 kernels k4, k5, k6, k7: the files hold {second} bytes.*"
                                                 f"at most {second - 1} a job"):
        split_job(sized, {**limits, "max_source_bytes": second - 1})
    assert len(split_job(sized, {**limits, "max_source_bytes": second})) == 3
    # A runner and headers every kernel shares count once: twelve kernels of one 300-byte unit are 300 bytes.
    shared = {**body, "sources": [{"name": f"k{i}", "files": {"runner.cu": "x" * 300}} for i in range(10)]}
    assert len(split_job(shared, {**limits, "max_source_bytes": 300})) == 3


def test_split_job_keeps_each_body_within_the_servers_request_bound():
    """Each kernel posts its own copy of the headers it shares (the server counts them once, the body
    holds them once per kernel): six ThunderKittens kernels are a 9 MB body. A part closes before its
    body would pass GEMMWATCH_MAX_JOB_BYTES, and a kernel whose own description passes it is refused
    by name before anything is posted."""
    import json as json_module

    from cli.ci import BeyondServerLimits, posted_bytes, split_job

    headers = {f"include/h{i}.cuh": "x" * 1000 for i in range(5)}  # 5 KB every kernel carries
    body = {"sizes": [[8, 8, 8]], "variants": [f"k{i}" for i in range(6)] + ["naive"], "commit": {"sha": "x"},
            "sources": [{"name": f"k{i}", "files": {**headers, "k.cu": "y"}} for i in range(6)]}
    limits = {"max_cases_per_job": 64, "max_sources_per_job": 64, "max_source_bytes": 10_000}
    assert len(split_job(body, limits)) == 1  # no body bound said: one job, as before
    bound = posted_bytes({**body, "variants": body["variants"][:3], "sources": body["sources"][:3]}) + 100
    parts = split_job(body, {**limits, "max_job_bytes": bound})
    assert [p["variants"] for p in parts] == [["k0", "k1", "k2"], ["k3", "k4", "k5", "naive"]]
    assert all(len(json_module.dumps(p).encode()) <= bound for p in parts)
    assert [[s["name"] for s in p["sources"]] for p in parts] == [["k0", "k1", "k2"], ["k3", "k4", "k5"]]
    with pytest.raises(BeyondServerLimits, match=r"k0: its description and files are \d+ bytes as posted, past the "
                                                  r"4000 a job's body may hold .*GEMMWATCH_MAX_JOB_BYTES"):
        split_job(body, {**limits, "max_job_bytes": 4000})
