"""The webhook: a confirmed regression on a watched branch reaches a real HTTP receiver (on
127.0.0.1) from a real worker, after the receiver failed once; an unwatched branch sends nothing."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import make_client, wait_for_job
from tests.test_ci_hook import KERNEL
from tests.descriptions import one_file
from tests.test_confirm import SIZE, SLOWER, bench


class Receiver:
    """Answers 503 to the first POST, 200 after; keeps every body (and every attempt's job)."""

    def __init__(self):
        self.bodies: list[dict] = []
        self.tried: list[int] = []  # the job of every POST, answered 503 or 200
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                receiver.attempts += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.tried.append(body["job"])
                ok = receiver.attempts > 1
                if ok:
                    receiver.bodies.append(body)
                self.send_response(200 if ok else 503)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait(self, timeout: float = 180) -> list[dict]:
        deadline = time.monotonic() + timeout
        while not self.bodies and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.bodies


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


def _confirm_a_slowed_commit(cfg, start_worker, receiver, branches: str):
    """Base and a 3 % slower head on branch main, then the head's confirmation; its job id."""
    start_worker(cfg, GEMMWATCH_WEBHOOK_URL=receiver.url, GEMMWATCH_WEBHOOK_BRANCHES=branches)
    client = make_client(cfg)
    bench(client, "aaaa0001", KERNEL, [])
    slowed = bench(client, "bbbb0002", SLOWER, ["aaaa0001"])
    resp = client.post(f"/api/jobs/{slowed['id']}/confirm", json={"variants": ["my_gemm"]})
    assert resp.status_code == 202, resp.text
    return client, resp.json()["id"]


def test_a_confirmed_regression_is_posted_with_retries(cfg, start_worker, receiver):
    client, confirm_id = _confirm_a_slowed_commit(cfg, start_worker, receiver, "main")
    assert wait_for_job(client, confirm_id, timeout=120)["status"] == "succeeded"
    (body,) = receiver.wait()
    assert receiver.attempts == 2  # the first answer was 503
    assert body["event"] == "confirmed_regression" and body["job"] == confirm_id
    assert (body["head_sha"], body["base_sha"], body["branch"]) == ("bbbb0002", "aaaa0001", "main")
    (reg,) = body["regressions"]
    assert reg["variant"] == "my_gemm" and reg["status"] == "regression" and reg["low"] > 1.0


def test_an_unwatched_branch_sends_nothing(cfg, start_worker, receiver):
    client, job_id = _confirm_a_slowed_commit(cfg, start_worker, receiver, "release")
    assert wait_for_job(client, job_id, timeout=120)["status"] == "succeeded"
    statuses = [c["status"] for c in client.get(f"/api/jobs/{job_id}/confirmation").json()]
    assert statuses == ["regression"]  # a regression, but not on a watched branch
    # The worker decides there and then: no message for this job (notify builds it as the job ends).
    from worker import webhook

    assert webhook.notify(cfg.model_copy(update={"webhook_url": receiver.url, "webhook_branches": "release"}),
                          job_id) is None
    # And nothing was sent, shown without waiting to see: a regression on the watched branch, confirmed
    # after it by the same one-job-at-a-time worker, is sent. Any POST for the unwatched job would have
    # been started (its thread begun) before that later job ran; the receiver saw only the later one.
    later = bench_on(client, "cccc0003", "release", SLOWER, ["aaaa0001"])
    resp = client.post(f"/api/jobs/{later['id']}/confirm", json={"variants": ["my_gemm"]})
    assert resp.status_code == 202, resp.text
    watched = resp.json()["id"]
    assert wait_for_job(client, watched, timeout=120)["status"] == "succeeded"
    (body,) = receiver.wait()
    assert body["job"] == watched and body["branch"] == "release"
    assert receiver.tried == [watched, watched]  # its 503 and its retry: never the unwatched job


def bench_on(client, sha: str, branch: str, source: str, parents: list[str]) -> dict:
    """tests/test_confirm.py bench, on a branch of its own."""
    body = {"variants": ["my_gemm", "naive"], "sizes": SIZE, "sources": [one_file("my_gemm", source, "my_gemm", [16, 16], [16, 16])],
            "commit": {"sha": sha, "repo": "r", "branch": branch, "parents": parents}}
    resp = client.post("/api/jobs", json=body)
    assert resp.status_code == 202, resp.text
    job = wait_for_job(client, resp.json()["id"], timeout=120)
    assert job["status"] == "succeeded", job["error"]
    return job
