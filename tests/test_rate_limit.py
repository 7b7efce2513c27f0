"""Issue 49, row 10: a rate limit per client and per token (api/rate_limit.py): 429 with Retry-After."""

import httpx
import pytest

from api.rate_limit import TokenBuckets
from tests.conftest import HTTP_TIMEOUT_S
from tests.test_request_gate import token_with


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_its_rate_and_says_how_long_to_wait():
    clock = Clock()
    buckets = TokenBuckets(rate=2.0, burst=3, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # one token a half second
    assert buckets.take("b") == 0.0  # another key, a bucket of its own
    clock.now += 0.5
    assert buckets.take("a") == 0.0 and buckets.take("a") == pytest.approx(0.5)
    clock.now += 60  # refilled to its burst, never past it
    assert [buckets.take("a") for _ in range(4)][-1] == pytest.approx(0.5)


def test_unauthenticated_writes_and_a_tokens_writes_meet_their_limits_and_healthz_does_not(cfg, live_server):
    # One token in 1,000 s: the buckets cannot refill during the test, however slow the machine
    # (at 0.2 a second, a busy machine's 6th request came 5 s after the 4th and got its 202).
    base = live_server(cfg, GEMMWATCH_RATE_LIMIT_ANON_PER_S="0.001", GEMMWATCH_RATE_LIMIT_WRITES_PER_S="0.001",
                       GEMMWATCH_RATE_LIMIT_BURST="4")
    job = {"variants": ["naive"], "sizes": [[64, 64, 64]]}
    anonymous = [httpx.post(f"{base}/api/jobs", json=job, timeout=HTTP_TIMEOUT_S) for _ in range(10)]
    assert [a.status_code for a in anonymous[:4]] == [401] * 4
    assert {a.status_code for a in anonymous[4:]} == {429}
    assert all(int(a.headers["Retry-After"]) >= 1 for a in anonymous[4:])
    assert httpx.get(f"{base}/healthz", timeout=HTTP_TIMEOUT_S).status_code == 200
    first, second = token_with(cfg, "first"), token_with(cfg, "second")
    mine = [httpx.post(f"{base}/api/jobs", json=job, headers={"Authorization": f"Bearer {first}"},
                       timeout=HTTP_TIMEOUT_S).status_code for _ in range(6)]
    assert mine[:4] == [202] * 4 and mine[4:] == [429, 429], mine
    other = httpx.post(f"{base}/api/jobs", json=job, headers={"Authorization": f"Bearer {second}"}, timeout=HTTP_TIMEOUT_S)
    assert other.status_code == 202, other.text  # a bucket per token
    assert httpx.get(f"{base}/api/jobs", headers={"Authorization": f"Bearer {first}"},
                     timeout=HTTP_TIMEOUT_S).status_code == 200  # reads with a token: not limited
