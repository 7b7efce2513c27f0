"""The webhook: a confirmed regression on a watched branch reaches a real HTTP receiver (on
127.0.0.1) from a real worker, after the receiver failed once; an unwatched branch sends nothing."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import make_client, wait_for_job
from tests.test_ci_hook import KERNEL
from tests.test_confirm import SLOWER, bench


class Receiver:
    """Answers 503 to the first POST, 200 after; keeps every body."""

    def __init__(self):
        self.bodies: list[dict] = []
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                receiver.attempts += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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

    def wait(self, timeout: float = 60) -> list[dict]:
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
    time.sleep(2)
    assert receiver.attempts == 0
