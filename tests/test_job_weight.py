"""Issue 37, rows 6 and 7: tuned settings belong to one kernel, and one job holds a GPU for a
bounded time. Through the real server (uvicorn) and a real worker with the CPU double, on both
databases; a job's own kernel is really compiled by NVRTC in the confined compile process.

No sleeps order the threads: each check polls job state against a generous deadline, so the tests
hold on a busy 2-core machine.
"""

import time

import httpx

from core.description.builtins import builtin_kernels
from core.records.db import session_factory
from core.records.kernel_store import kernel_hash
from core.records.tokens import create_token
from tests.descriptions import one_file

DEADLINE_S = 20.0  # one HTTP answer
JOB_DEADLINE_S = 240.0  # one job on a busy machine
# 2^26 template instantiations: NVRTC runs away (tests/test_compile_sandbox.py), a 300-byte bomb.
BOMB = (
    "template<int N, unsigned M> struct T { __device__ static float f(float x) "
    "{ return T<N-1, 2*M>::f(x) + T<N-1, 2*M+1>::f(x); } };\n"
    "template<unsigned M> struct T<0, M> { __device__ static float f(float x) { return x + M; } };\n"
    'extern "C" __global__ void k(float *x) { x[0] = T<26, 0>::f(x[0]); }\n'
)


class Api:
    def __init__(self, base: str, token: str):
        self.base, self.headers = base, {"Authorization": f"Bearer {token}"}

    def post(self, path: str, body: dict) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", json=body, headers=self.headers, timeout=DEADLINE_S)

    def get(self, path: str, **params) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", params=params, headers=self.headers, timeout=DEADLINE_S)

    def submit(self, body: dict) -> int:
        answer = self.post("/api/jobs", body)
        assert answer.status_code == 202, answer.text
        return answer.json()["id"]

    def finished(self, job_id: int, timeout: float = JOB_DEADLINE_S) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.get(f"/api/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} not finished after {timeout} s: {job}")


def api_for(cfg, base: str, name: str = "writer") -> Api:
    with session_factory(cfg)() as db:
        return Api(base, create_token(db, name, scopes=("jobs",)))


def own_naive(block_values: list[int]) -> dict:
    """A job's own kernel named `naive`: the built-in's files with a line more, other tunables."""
    desc = builtin_kernels()["naive"].model_dump(mode="json")
    desc["files"] = {path: text + "\n// a job's own copy\n" for path, text in desc["files"].items()}
    desc["tunables"] = {"BLOCK": {"values": block_values, "default": block_values[0]}}
    return desc


def test_row_6_a_jobs_own_naive_neither_changes_nor_takes_the_builtins_tuned_config(cfg, live_server, start_worker):
    """Issue 37, row 6, as reported: an autotune of a job's own `naive` with BLOCK: [8] made
    everyone's next `naive` on that GPU model run with BLOCK = 8. Tuned configurations are kept
    under the kernel's hash now (core/records/kernel_store.py kernel_hash)."""
    api = api_for(cfg, live_server(cfg))
    start_worker(cfg)
    size = [16, 16, 16]
    builtin = kernel_hash(builtin_kernels()["naive"])

    # The attack on a GPU model where the built-in was never tuned: the next bench keeps its default.
    attack = api.finished(api.submit({"kind": "autotune", "sources": [own_naive([8])], "variants": ["naive"],
                                      "sizes": [size]}))
    assert attack["status"] == "succeeded", attack["error"]
    tuned = api.get("/api/tuned", variant="naive").json()
    assert [t["tunables"] for t in tuned] == [{"BLOCK": 8}] and tuned[0]["kernel_hash"] != builtin, tuned
    bench = api.finished(api.submit({"variants": ["naive"], "sizes": [size]}))
    assert bench["status"] == "succeeded", bench["error"]
    assert bench["results"][0]["tunables"] == {"BLOCK": 32}, bench["results"][0]  # the default, not 8

    # The built-in tuned, then attacked again: its row keeps its job and choice, and the next
    # bench of `naive` runs with it.
    honest = api.finished(api.submit({"kind": "autotune", "variants": ["naive"], "sizes": [size]}))
    assert honest["status"] == "succeeded", honest["error"]
    mine = [t for t in api.get("/api/tuned", variant="naive").json() if t["kernel_hash"] == builtin]
    assert len(mine) == 1 and mine[0]["job_id"] == honest["id"], mine
    again = api.finished(api.submit({"kind": "autotune", "sources": [own_naive([8, 16])], "variants": ["naive"],
                                     "sizes": [size]}))
    assert again["status"] == "succeeded", again["error"]
    after = [t for t in api.get("/api/tuned", variant="naive").json() if t["kernel_hash"] == builtin]
    assert after == mine, after
    bench = api.finished(api.submit({"variants": ["naive"], "sizes": [size]}))
    assert bench["results"][0]["tunables"] == mine[0]["tunables"], bench["results"][0]
    # A job's own copy does not pick up the built-in's choice either: its own default or its own tuned.
    own = api.finished(api.submit({"sources": [own_naive([8, 16, 32][::-1])], "variants": ["naive"],
                                   "sizes": [size]}))
    assert own["status"] == "succeeded", own["error"]
    assert own["results"][0]["tunables"] == {"BLOCK": 32}, own["results"][0]


def test_row_7_the_job_budget_ends_a_long_job_with_a_clear_error(cfg, live_server, start_worker):
    """A job's cases (compiles included) get GEMMWATCH_JOB_BUDGET_S of GPU-process time: past it the
    case running is stopped and the rest end with "job budget of N s spent"; the job finishes."""
    api = api_for(cfg, live_server(cfg))
    start_worker(cfg, GEMMWATCH_JOB_BUDGET_S="3", FAKE_GPU_SLEEP_S="2", GEMMWATCH_CASE_TIMEOUT_S="120")
    sizes = [[16, 16, 16], [32, 32, 32], [48, 48, 48], [64, 64, 64]]
    started = time.monotonic()
    job = api.finished(api.submit({"variants": ["naive"], "sizes": sizes}))
    assert job["status"] == "failed", job
    assert "job budget of 3 s spent (GEMMWATCH_JOB_BUDGET_S)" in job["error"], job["error"]
    assert len(job["results"]) == len(sizes)  # every case ended, each with its result
    spent = [r for r in job["results"] if r["error"] and "job budget of 3 s spent" in r["error"]]
    assert spent and spent[-1]["error"].endswith("not run"), job["results"]
    assert time.monotonic() - started < JOB_DEADLINE_S
    # The worker goes on with the next job (a fresh GPU process where the budget stopped one).
    quick = api.finished(api.submit({"variants": ["naive"], "sizes": [[16, 16, 16]]}))
    assert quick["status"] == "succeeded", quick["error"]


def test_row_7_a_failing_compile_across_three_sizes_compiles_once(cfg, live_server, start_worker):
    """Issue 37, row 7, as reported: a 300-byte template bomb at 3 sizes compiled 3 times, each to
    its time limit. A failed compile is remembered by its hash (worker/compile/failed_compiles.py): the
    second and third sizes fail at once with the same error, and say so in env."""
    api = api_for(cfg, live_server(cfg))
    start_worker(cfg, GEMMWATCH_COMPILE_TIMEOUT_S="4", GEMMWATCH_CASE_TIMEOUT_S="120")
    bomb = one_file("bomb", BOMB, "k", [32], [1, 32])
    job = api.finished(api.submit({"sources": [bomb], "sizes": [[8, 8, 8], [16, 16, 16], [24, 24, 24]]}))
    assert job["status"] == "failed", job
    errors = [r["error"] for r in job["results"]]
    assert len(errors) == 3 and "compile exceeded the 4 s compile time limit" in errors[0], errors
    assert errors[1] == errors[0] and errors[2] == errors[0], errors
    remembered = [bool(r["env"].get("compile_failure_remembered")) for r in job["results"]]
    assert remembered == [False, True, True], remembered


def test_row_7_an_autotune_job_is_bounded_by_its_sizes_and_configurations(cfg, live_server):
    """256 sizes of a kernel with one configuration were accepted as an autotune: 256 cases, four
    times a bench job's bound. Its variants x sizes now count against GEMMWATCH_MAX_CASES, its
    configurations against GEMMWATCH_MAX_AUTOTUNE_CASES (128)."""
    api = api_for(cfg, live_server(cfg))
    one_config = "guide_smem_submatrix_16"
    assert builtin_kernels()[one_config].configurations() == [{}]
    sizes = [[16 * (i + 1), 16, 16] for i in range(256)]
    refused = api.post("/api/jobs", {"kind": "autotune", "variants": [one_config], "sizes": sizes})
    assert refused.status_code == 422 and "1 variants x 256 sizes = 256; at most 64" in refused.text, refused.text
    naive = api.post("/api/jobs", {"kind": "autotune", "variants": ["naive"], "sizes": sizes[:50]})
    assert naive.status_code == 422 and "150 cases; at most 128" in naive.text, naive.text
    assert api.get("/api/limits").json()["max_autotune_cases"] == 128


def test_row_7_a_token_holds_at_most_its_cap_of_jobs_queued(cfg, live_server):
    """Per token, GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN jobs queued or running at once: one more is a
    429 that says so; another token is not held back, and a cancel makes room."""
    base = live_server(cfg, GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN="3")  # no worker: jobs stay queued
    api, other = api_for(cfg, base), api_for(cfg, base, "someone-else")
    body = {"variants": ["naive"], "sizes": [[16, 16, 16]]}
    held = [api.submit(body) for _ in range(3)]
    refused = api.post("/api/jobs", body)
    assert refused.status_code == 429, refused.text
    assert "token 'writer' has 3 jobs queued or running; at most 3 at once (GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN)" \
        in refused.json()["detail"], refused.text
    other.submit(body)
    assert api.post(f"/api/jobs/{held[0]}/cancel", {}).status_code == 200
    api.submit(body)
    assert api.get("/api/limits").json()["max_queued_jobs_per_token"] == 3
