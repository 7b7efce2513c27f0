"""Issue 37, row 1: no one freezes the API without a token. A write's size and token are checked
before its body is read (api/request_gate.py), and a job's body is validated on a thread
(api/job_body.py). Through the real server, on both databases.

No sleeps order the threads here: each check polls against a generous deadline, so the test holds
on a busy 2-core machine; before the gate, each 4 MB post was parsed and guarded first (seconds
to minutes each) and /healthz waited behind them.
"""

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from core.records.db import session_factory
from core.records.tokens import create_token
from worker import process_tree
from tests.descriptions import one_file

# Just under the kernel description's own cap (core/description/kernel.py, 4,000,000 bytes), as in the issue.
FOUR_MB = 3_900_000
DEADLINE_S = 20.0  # each refusal and each /healthz answer, however busy the machine


def heavy_job(size: int = FOUR_MB) -> bytes:
    """A job whose one source is `size` bytes of what the source guard works hardest on (issue 37,
    row 2: about 8 minutes of one core per MB before that row's fix, which this test does not need)."""
    piece = "/*\n*/#define A0\n"
    text = piece * (size // len(piece))
    job = {"sources": [one_file("heavy", text, "heavy", [16, 16])], "sizes": [[64, 64, 64]]}
    return httpx.Request("POST", "http://x", json=job).content


def token_with(cfg, name: str, *scopes: str) -> str:
    with session_factory(cfg)() as db:
        return create_token(db, name, scopes=scopes or ("jobs", "results"))


def post(base: str, body: bytes, token: str | None = None, **extra) -> httpx.Response:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx.post(f"{base}/api/jobs", content=body, headers=headers, timeout=DEADLINE_S, **extra)


def test_unauthenticated_4mb_posts_are_refused_at_once_and_healthz_answers_meanwhile(cfg, live_server):
    base = live_server(cfg)
    body = heavy_job()
    answers: list[httpx.Response] = []
    done = threading.Event()

    def flood() -> None:
        with ThreadPoolExecutor(8) as pool:
            answers.extend(pool.map(lambda _: post(base, body), range(8)))
        done.set()

    flooding = threading.Thread(target=flood)
    flooding.start()
    healthz = []
    while not done.is_set() or not healthz:  # at least one /healthz, and as many as the flood lasts
        started = time.monotonic()
        healthz.append(httpx.get(f"{base}/healthz", timeout=DEADLINE_S).status_code)
        assert time.monotonic() - started < DEADLINE_S
    flooding.join(DEADLINE_S * 8)
    assert [a.status_code for a in answers] == [401] * 8
    assert "a valid API token is required" in answers[0].json()["detail"]
    assert set(healthz) == {200}
    # A made-up token is a 401 after its lookup, a token without the jobs scope a 403: neither body read.
    assert post(base, body, token="gw_not-a-token").status_code == 401
    refused = post(base, body, token=token_with(cfg, "poster", "results"))
    assert refused.status_code == 403 and "needs 'jobs'" in refused.json()["detail"]


def test_a_body_over_the_routes_limit_is_413_from_its_length_or_as_it_streams(cfg, live_server):
    base = live_server(cfg, GEMMWATCH_MAX_JOB_BYTES=str(1 << 20))
    token = token_with(cfg, "writer")
    body = heavy_job(2 << 20)

    said = post(base, body, token=token)
    assert said.status_code == 413 and "at most 1048576 bytes" in said.json()["detail"]

    def chunks():  # no Content-Length: chunked, counted as it arrives
        for start in range(0, len(body), 64 << 10):
            yield body[start:start + (64 << 10)]

    try:
        streamed = post(base, chunks(), token=token)
    except httpx.HTTPError:  # the server may close before the client has sent every chunk
        streamed = None
    if streamed is not None:
        assert streamed.status_code == 413
    assert httpx.get(f"{base}/api/jobs", timeout=DEADLINE_S).json() == []  # neither body got through
    # Small writes to other routes are bounded too (64 KiB), and the API still works.
    assert httpx.post(f"{base}/api/jobs/1/cancel", content=b"x" * (65 << 10),
                      headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_S).status_code == 413
    ok = httpx.post(f"{base}/api/jobs", json={"variants": ["naive"], "sizes": [[64, 64, 64]]},
                    headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_S)
    assert ok.status_code == 202, ok.text


@pytest.mark.parametrize("payload, where", [(b"{not json", "body"), (b'{"sizes": [[64, 64]]}', "sizes")])
def test_a_job_checked_on_a_thread_is_still_a_422_that_names_the_field(cfg, live_server, payload, where):
    base = live_server(cfg)
    answer = post(base, payload, token=token_with(cfg, "writer"))
    assert answer.status_code == 422
    assert any(where in map(str, e["loc"]) for e in answer.json()["detail"]), answer.json()


def test_row_2_a_source_of_ten_thousand_directives_is_judged_at_once(cfg, live_server):
    """Issue 37, row 2, as reported: 199 KB of `/*\\n*/#define A<j>` took the guard 67 s, since every
    directive looked for the end of a line that a multi-line comment never ends. The guard now finds
    each line's end once (core/description/source_guard.py _line_ends): the answer comes within the deadline,
    and the source is still judged (a refused directive among them is still refused, at its line)."""
    base = live_server(cfg)
    token = token_with(cfg, "writer")
    text = "".join(f"/*\n*/#define A{j}" for j in range(10500)) + '\nextern "C" __global__ void heavy() {}\n'
    job = {"sources": [one_file("heavy", text, "heavy", [16, 16])], "sizes": [[64, 64, 64]]}
    answer = httpx.post(f"{base}/api/jobs", json=job, headers={"Authorization": f"Bearer {token}"},
                        timeout=DEADLINE_S)
    assert answer.status_code == 202, answer.text
    bad = {**job, "sources": [one_file("heavy", text.replace("#define A9999", "#include_next A9999"), "heavy",
                                       [16, 16])]}
    refused = httpx.post(f"{base}/api/jobs", json=bad, headers={"Authorization": f"Bearer {token}"},
                         timeout=DEADLINE_S)
    assert refused.status_code == 422 and "#include_next is not allowed" in refused.text, refused.text
    assert "heavy.cu, line 10001" in refused.text, refused.text  # A<j> is on line j + 2


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit status may wait for a container's init to read it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_server_that_ends_leaves_none_of_its_validation_processes_behind(cfg, live_server, ending):
    """A large body is checked in a process forked from a fork server (api/validation_pool.py). That
    process waited for its next task for good, holding the fork server and the resource tracker up:
    each API process that ended, stopped or killed, left three processes running (54 a test run)."""
    base = live_server(cfg)
    server = live_server.procs[-1]
    answer = post(base, heavy_job(200_000), token=token_with(cfg, "writer"))  # past LARGE_BYTES: the pool's
    assert answer.status_code == 202, answer.text
    below = process_tree.descendants(server.pid)
    assert below, "the large body started no process: this test no longer tests the pool"
    server.send_signal(ending)
    server.wait(60)
    deadline = time.monotonic() + 60
    while (left := [pid for pid in below if running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"still running after their server ended: {left}"
