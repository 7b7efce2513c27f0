"""The profile step of a confirmation (issue 39) through the API and a real worker, on a machine
without Nsight Compute: the CPU double stands in for the GPU, the kernels are compiled for real
(the confined NVRTC process) and disassembled by the real cuobjdump, so the SASS diff is the one
a GPU worker makes. ncu's own output is tested against H100 recordings in test_profile_diff.py."""

import re
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from core.records.db import session_factory
from core.records.models import Job, Profile, Result
from tests.conftest import make_client, wait_for_job
from tests.test_ci_hook import KERNEL
from tests.test_confirm import bench, confirmed
from worker.profile import profiler

# The head spills: a dynamically indexed array lives in local memory (STL/LDL, a stack frame),
# and the CPU double times it 3 % slower, so the confirmation finds a regression to profile.
SPILLS = """#define FAKE_GPU_SLOWDOWN_PCT 3
extern "C" __global__ void my_gemm(int M, int N, int K, float alpha, const float* A, const float* B,
                                   float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float part[32] = {0.0f};
    for (int k = 0; k < K; ++k) part[(k * 7 + row) & 31] += A[row * K + k] * B[k * N + col];
    float acc = 0.0f;
    for (int i = 0; i < 32; ++i) acc += part[i];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
"""


def recorded_split_diff():
    from tests.test_profile_diff import _load, diff_launch

    base, head = _load("split_base"), _load("split_head")
    [diff] = diff_launch(base[0], head[0], base[1], head[1], base[2], head[2])
    return diff


def _as_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_a_confirmed_regression_is_profiled_after_its_samples_and_says_why_there_is_no_ncu(cfg, start_worker):
    start_worker(cfg, GEMMWATCH_NCU="ncu-not-on-this-machine", FAKE_GPU_COMPUTE_CAPABILITY="9.0")
    client = make_client(cfg)
    bench(client, "aaaa0101", KERNEL, [])
    head = bench(client, "bbbb0102", SPILLS, ["aaaa0101"])
    got = confirmed(client, head)
    mine, naive = got["my_gemm"], got["naive"]
    assert mine["status"] == "regression", mine
    # Only the confirmed change is profiled; the built-in that did not change is not.
    assert naive["status"] != "regression" and naive["profile_status"] is None
    assert mine["profile_status"] == "sass only", mine["profile_reason"]
    assert mine["profile_reason"] == "Nsight Compute (GEMMWATCH_NCU='ncu-not-on-this-machine') is not found on this worker"
    # The SASS diff names the spill, with what moved, in the one line a reader gets.
    line = mine["profile"]
    assert line.startswith("my_gemm: no Nsight Compute profile"), line
    assert re.search(r"; SASS: local-memory spills: stack frame 0 bytes → \d+ bytes", line), line

    profile = client.get(f"/api/results/{mine['result_id']}/profile")
    assert profile.status_code == 200, profile.text
    body = profile.json()
    assert body["status"] == "sass only" and body["summary"] == line
    [kernel] = body["data"]["kernels"]
    rows = {r["key"]: r for r in kernel["rows"]}
    assert rows["res.stack"]["base"] == 0 and rows["res.stack"]["head"] > 0
    assert rows["sass.STL"]["head"] > rows["sass.STL"]["base"] == 0
    assert kernel["ranked"][0] in ("res.stack", "res.local", "sass.STL", "sass.LDL", "loop.STL", "loop.LDL")
    assert kernel["main_loop"] is not None  # the loop's instructions, base against head

    # No timed sample after the profile began: every result of the job was stored before it.
    confirm_job = client.get(f"/api/jobs/{body['job_id']}").json()
    with session_factory(cfg)() as db:
        stored = list(db.scalars(select(Result.created_at).where(Result.job_id == confirm_job["id"])))
    assert len(stored) == 2 and max(stored) <= _as_time(body["started_at"]) <= _as_time(body["finished_at"])

    # The job page shows the line and links the whole diff; the commit page links the row to it.
    page = client.get(f"/jobs/{confirm_job['id']}").text
    assert 'id="profiles"' in page and "local-memory spills" in page
    assert f"/api/results/{mine['result_id']}/profile" in page
    commit_page = client.get("/commits/bbbb0102").text
    assert f'<a href="#profile-{mine["result_id"]}">why</a>' in commit_page and "local-memory spills" in commit_page
    # A visitor whose token may submit jobs gets each confirmed row's Profile button there too.
    assert f'action="/jobs/{confirm_job["id"]}/profile"' in commit_page
    anonymous = TestClient(client.app).get("/commits/bbbb0102").text
    assert "local-memory spills" in anonymous and 'class="profile-row"' not in anonymous

    # The pages as a GPU worker's profile makes them: the H100 recordings of the reverted
    # optimisation (Nsight Compute and SASS), stored in place of this one.
    recorded = recorded_split_diff()
    with session_factory(cfg)() as db:
        row = db.scalar(select(Profile).where(Profile.result_id == mine["result_id"]))
        row.status, row.reason, row.summary = "profiled", None, recorded.summary_line()
        row.data = {"kernels": [recorded.to_json()], "ncu_version": "recorded", "ncu_wall_s": 9.0}
        db.commit()
    for url in (f"/jobs/{confirm_job['id']}", "/commits/bbbb0102"):
        page = client.get(url).text
        assert "sgemm_tail_split_k: duration 2,771,936 ns → 2,835,552 ns (+2.3 %)" in page, url
        assert "main-loop math (FFMA/MMA) after the barrier" in page and "No Nsight Compute profile" not in page
        ranked = page.index("main-loop math (FFMA/MMA) after the barrier</td>")
        assert ranked < page.index("L1 hit rate</td>"), "the ranked cause comes before the unchanged rows"


def test_a_profile_asked_for_comes_whatever_the_verdict_and_none_otherwise(cfg, start_worker):
    start_worker(cfg, GEMMWATCH_NCU="", FAKE_GPU_COMPUTE_CAPABILITY="9.0")
    client = make_client(cfg)
    base = bench(client, "aaaa0201", KERNEL, [])
    same = bench(client, "cccc0203", KERNEL, ["aaaa0201"])
    unasked = confirmed(client, same, variants=["my_gemm"])["my_gemm"]
    assert unasked["status"] != "regression" and unasked["profile_status"] is None
    missing = client.get(f"/api/results/{unasked['result_id']}/profile")
    assert missing.status_code == 404 and missing.json()["detail"] == f"no profile of result {unasked['result_id']}"
    assert client.get("/api/results/999999/profile").json()["detail"] == "no result 999999"

    asked = confirmed(client, same, variants=["my_gemm"], profile=True)["my_gemm"]
    assert asked["profile_status"] == "sass only", asked
    assert asked["profile_reason"] == "GEMMWATCH_NCU is empty: Nsight Compute is off on this worker"
    # The same kernel at both commits: the SASS diff says nothing moved.
    assert asked["profile"].endswith("SASS: nothing else moved beyond noise"), asked["profile"]
    with session_factory(cfg)() as db:
        assert db.scalar(select(Profile).where(Profile.result_id == unasked["result_id"])) is None
    assert base["status"] == "succeeded"

    # The job page's button asks the same: a new confirmation of the same cases, profiled.
    confirm_id = client.get(f"/api/results/{unasked['result_id']}").json()["job_id"]
    page = client.get(f"/jobs/{confirm_id}").text
    assert 'id="profile-form"' in page and 'id="profile-token"' not in page  # a jobs token's request: just press
    form = TestClient(client.app, follow_redirects=False, headers={"Origin": "http://testserver"})
    assert 'id="profile-token"' in form.get(f"/jobs/{confirm_id}").text  # no session: a token is typed in
    denied = form.post(f"/jobs/{confirm_id}/profile", data={"token": "gw_not-a-token"})
    assert denied.status_code == 303 and denied.headers["location"] == f"/jobs/{confirm_id}?profile=denied"
    assert "Not profiled: a valid write token is needed" in client.get(denied.headers["location"]).text
    token = client.headers["Authorization"].removeprefix("Bearer ")
    pressed = form.post(f"/jobs/{confirm_id}/profile", data={"token": token})
    assert pressed.status_code == 303 and pressed.headers["location"].endswith("?profile=queued"), pressed.text
    new_id = int(pressed.headers["location"].split("/")[2].split("?")[0])
    assert new_id > confirm_id and "Queued: base and head timed again" in client.get(pressed.headers["location"]).text
    job = wait_for_job(client, new_id, timeout=180)
    assert job["status"] == "succeeded" and job["kind"] == "confirm", job["error"]
    [again] = client.get(f"/api/jobs/{new_id}/confirmation").json()
    assert again["variant"] == "my_gemm" and again["profile_status"] == "sass only", again
    with session_factory(cfg)() as db:
        assert db.get(Job, new_id).confirm["profile"] is True
    assert form.post("/jobs/424242/profile", data={"token": token}).status_code == 404


@pytest.mark.parametrize("returncode, text, words", [
    (1, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
     "no permission to the GPU's performance counters"),
    (0, "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.", "profiled no kernel"),
    (9, "==ERROR== Failed to prepare kernel for profiling\n==ERROR== Unknown Error on device 0.",
     "exited with status 9: ==ERROR== Failed to prepare kernel for profiling"),
])
def test_why_nsight_compute_gave_no_profile_is_said_in_its_words(returncode, text, words):
    assert words in profiler._ncu_failure(returncode, text)


def test_nsight_compute_runs_with_the_clocks_left_alone_and_only_the_profiled_range():
    command = profiler.ncu_command("ncu", ["python", "-m", "worker.profile.profile_launch", "s", "r"])
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("--nvtx-include") + 1] == "gemmwatch_profile/"
    assert command[command.index("--target-processes") + 1] == "application-only"  # not the compile's probe
    assert command[-5:] == ["python", "-m", "worker.profile.profile_launch", "s", "r"]
    # Every metric the diff reads is asked for, the stall reasons through ncu's own expression.
    asked = command[command.index("--metrics") + 1].split(",")
    assert {"gpu__time_duration.sum", "launch__registers_per_thread", "smsp__inst_executed_op_local_ld.sum",
            "launch__occupancy_limit_registers"} <= set(asked)
    # None patched into the kernel's SASS: each such metric costs a replay of its own and a slower
    # kernel (a pair at 4096^3 took 9.7-11.6 s with them on the H100, 6.0-6.9 s without).
    assert not [m for m in asked if m.startswith("sass__") or "__sass_" in m]
    stalls = re.compile(asked[-1].removeprefix("regex:"))
    assert stalls.match("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio")
