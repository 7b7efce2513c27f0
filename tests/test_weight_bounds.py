"""Issue 37, rows 3 and 8, through the real server on both databases: what one job or one post
stores, and what every reader then gets, is bounded.

Row 3: a < 1 KB source whose macros double 20 times around an undefined name made NVRTC write a
15 MB compile log (165 MB with a longer name), stored whole as its result's error and served in
GET /api/jobs, / and the job page. Now the compile process sends back the log's head and tail
(worker/compile/compile_sandbox.py), a caller sees at most GEMMWATCH_COMPILE_LOG_MAX_BYTES of it, and any
stored error is at most 64 KiB (core/text_bounds.py). The kernel cache holds at most
GEMMWATCH_KERNEL_CACHE_MAX_BYTES, least recently used entries evicted (worker/compile/compile_cache.py evict).

Row 8: posted results with 100,000 samples each made GET /api/results 62 MB for every reader. Lists
now carry no samples (GET /api/results/{id} has them), and a post carries at most
GEMMWATCH_MAX_POSTED_SAMPLES samples in all (a 422 beyond).

No sleeps order the threads: each wait polls against a generous deadline (a busy 2-core machine).
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from core.records.db import session_factory
from core.text_bounds import ERROR_MAX_BYTES, head_and_tail
from core.records.tokens import create_token
from tests.descriptions import one_file
from worker.compile import compile_cache, compiler

DEADLINE_S = 30.0
PAGE_MAX_BYTES = 2 << 20  # a few MB at most for any page or list here

# Row 3 as reported: 2^20 pasted copies of an undefined name, one identifier of 14.7 MB that
# NVRTC's error quotes whole.
DOUBLINGS = 20
BOMB = ("#define C_(a, b) a##b\n#define C(a, b) C_(a, b)\n#define A0 undefined_name\n"
        + "".join(f"#define A{i} C(A{i - 1}, A{i - 1})\n" for i in range(1, DOUBLINGS + 1))
        + 'extern "C" __global__ void k(int M, int N, int K, float alpha, const float *A, const float *B, '
          f'float beta, float *x) {{ x[0] = A{DOUBLINGS}; }}\n')


def token_for(cfg, *scopes: str) -> str:
    with session_factory(cfg)() as db:
        return create_token(db, "writer", scopes=scopes)


def wait_for(base: str, job_id: int, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{base}/api/jobs/{job_id}", timeout=DEADLINE_S).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s")


def test_row_3_a_compile_log_bomb_is_stored_and_served_as_its_head_and_tail(cfg, live_server, start_worker):
    assert len(BOMB) < 1024
    base = live_server(cfg)
    start_worker(cfg, GEMMWATCH_CASE_TIMEOUT_S="120")
    token = token_for(cfg, "jobs")
    job = {"sources": [one_file("bomb", BOMB, "k", [32], [1, 32])], "sizes": [[8, 8, 8]]}
    answer = httpx.post(f"{base}/api/jobs", json=job, headers={"Authorization": f"Bearer {token}"},
                        timeout=DEADLINE_S)
    assert answer.status_code == 202, answer.text
    done = wait_for(base, answer.json()["id"])
    assert done["status"] == "failed", done
    [result] = done["results"]
    error = result["error"]
    # The author still sees where and what: the diagnostic's head, the compiler's summary at the end.
    assert error.startswith("compile error:\nbomb.cu(") and 'identifier "undefined_nameundefined_name' in error
    assert "bytes left out" in error and error.rstrip().endswith('1 error detected in the compilation of "bomb.cu".')
    assert len(error.encode()) <= ERROR_MAX_BYTES, len(error)
    assert len((done["error"] or "").encode()) <= ERROR_MAX_BYTES
    for path in ("/api/jobs", "/", f"/jobs/{done['id']}", f"/api/jobs/{done['id']}", f"/jobs/{done['id']}?format=json"):
        page = httpx.get(f"{base}{path}", timeout=DEADLINE_S)
        assert page.status_code == 200 and len(page.content) < PAGE_MAX_BYTES, (path, len(page.content))


def test_row_3_a_log_cut_in_two_withholds_its_tail_up_to_the_next_location():
    """The tail of a cut log starts inside a diagnostic whose location was left out: withheld up to
    the next location line (worker/compile/compile_log.py), so a cut never shows another file's lines."""
    raw = ("/etc/passwd(1): error: x\n root:x:0:0 quoted\n" * 3 + "job.cu(3): error: mine\n  quoted\n")
    cut = "job.cu(1): error: head\n\u2026 120 bytes left out \u2026\n root:x:0:0 quoted\n" + raw
    shown = compiler.filter_log(cut, "job.cu")
    assert "root:" not in shown and "job.cu(1): error: head" in shown and "job.cu(3): error: mine" in shown
    assert "\u2026 120 bytes left out \u2026" in shown
    assert head_and_tail("x" * 100, 100) == "x" * 100
    bounded = head_and_tail("a" * 5000 + "b" * 5000, 1000)
    assert len(bounded.encode()) <= 1000 and bounded.startswith("a") and bounded.endswith("b")


def test_row_3_the_kernel_cache_evicts_its_least_recently_used_entries(tmp_path):
    cache = tmp_path / "kernel-cache"
    cache.mkdir()
    for i, digest in enumerate(("old", "used", "new")):
        (cache / f"{digest}.cubin").write_bytes(b"x" * 1000)
        (cache / f"{digest}.json").write_bytes(b"{}")
        os.utime(cache / f"{digest}.cubin", (1000 + i, 1000 + i))
        os.utime(cache / f"{digest}.json", (1000 + i, 1000 + i))
    os.utime(cache / "used.cubin", (5000, 5000))  # a hit touches its binary
    (cache / "other.cubin.tmp").write_bytes(b"x" * 5000)  # being written by another worker: left alone
    assert compile_cache.evict(cache, 2100, keep="new") == ["old"]
    assert sorted(p.name for p in cache.iterdir()) == ["new.cubin", "new.json", "other.cubin.tmp",
                                                       "used.cubin", "used.json"]
    assert compile_cache.evict(cache, 1100, keep="new") == ["used"]
    assert compile_cache.evict(cache, 10, keep="new") == []  # the entry just written stays


def test_row_3_a_cubin_over_its_cap_is_refused_and_not_kept(tmp_path):
    from core.settings import Settings

    # A generous compile time: 4000 lines took past the default 60 s on a loaded 2-core machine, and
    # the subject here is the size cap, not the time limit.
    settings = Settings(GEMMWATCH_DATA_DIR=str(tmp_path / "data"), GEMMWATCH_KERNEL_MAX_BYTES=str(1 << 16),
                        GEMMWATCH_COMPILE_TIMEOUT_S="900")
    body = "".join(f"x[{i}] = x[{i}] * {i}.5f + x[{i + 1}];\n" for i in range(4000))
    source = f'extern "C" __global__ void k(float *x) {{\n{body}}}\n'
    try:
        compiler.compile_kernel(source, name="big.cu", options=["-arch=sm_90", "-std=c++17"], untrusted=True,
                                cfg=settings)
    except compiler.CompileRefused as refused:
        assert "over the 65536 bytes a kernel may be (GEMMWATCH_KERNEL_MAX_BYTES" in str(refused)
    else:
        raise AssertionError("a cubin over GEMMWATCH_KERNEL_MAX_BYTES was kept")
    assert not list(settings.kernel_cache_dir.glob("*.cubin")) if settings.kernel_cache_dir.exists() else True


GPU = {"uuid": "GPU-5c3e1a2b-0000-4000-8000-00000000beef", "name": "NVIDIA H100 80GB HBM3", "model": "H100"}


def heavy_post(run: int, results: int, samples: int) -> bytes:
    rows = [{"variant": "naive", "m": 64, "n": 64, "k": 64 + i, "verified": True, "median_ms": 0.0123,
             "n_samples": samples, "samples_ms": [0.012345] * samples,
             "env": {"cublas_samples_ms": [0.011111] * samples}} for i in range(results)]
    return httpx.Request("POST", "http://x", json={"run_id": f"run-heavy-{run:04d}", "gpu": GPU,
                                                   "results": rows}).content


def test_row_8_posted_samples_are_capped_per_post_and_lists_carry_none(cfg, live_server):
    base = live_server(cfg)
    headers = {"Authorization": f"Bearer {token_for(cfg, 'results')}", "Content-Type": "application/json"}

    # Six results of 100,000 samples and 100,000 cuBLAS samples each: 1.2 million, over the cap.
    over = httpx.post(f"{base}/api/results", content=heavy_post(0, 6, 100_000), headers=headers, timeout=DEADLINE_S)
    assert over.status_code == 422, over.status_code
    assert "at most 1000000 (GEMMWATCH_MAX_POSTED_SAMPLES)" in over.text

    # Posts within the cap, while /healthz is polled: every answer within the deadline.
    done = threading.Event()
    answers: list[httpx.Response] = []

    def posting() -> None:
        with ThreadPoolExecutor(2) as pool:
            answers.extend(pool.map(lambda run: httpx.post(f"{base}/api/results", content=heavy_post(run, 4, 100_000),
                                                           headers=headers, timeout=120), (1, 2)))
        done.set()

    thread = threading.Thread(target=posting)
    thread.start()
    healthz = []
    while not done.is_set() or not healthz:
        started = time.monotonic()
        healthz.append(httpx.get(f"{base}/healthz", timeout=DEADLINE_S).status_code)
        assert time.monotonic() - started < DEADLINE_S
    thread.join(DEADLINE_S)
    assert [a.status_code for a in answers] == [201, 201], [a.text[:300] for a in answers]
    assert set(healthz) == {200}

    # Eight results of 100,000 cuBLAS samples each stored: a list carries none of them.
    listed = httpx.get(f"{base}/api/results?limit=5000", timeout=DEADLINE_S)
    assert listed.status_code == 200 and len(listed.json()) == 8
    assert len(listed.content) < 256 << 10, len(listed.content)
    assert all("cublas_samples_ms" not in r["env"] and "samples_ms" not in r for r in listed.json())
    job_id = answers[0].json()["job_id"]
    for path in ("/api/jobs", f"/api/jobs/{job_id}", "/", f"/jobs/{job_id}"):
        page = httpx.get(f"{base}{path}", timeout=DEADLINE_S)
        assert page.status_code == 200 and len(page.content) < PAGE_MAX_BYTES, (path, len(page.content))
    # One result still has its samples, both series, whole.
    one = httpx.get(f"{base}/api/results/{listed.json()[0]['id']}", timeout=DEADLINE_S).json()
    assert len(one["samples_ms"]) == 100_000 and len(one["env"]["cublas_samples_ms"]) == 100_000
