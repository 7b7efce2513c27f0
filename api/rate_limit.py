"""A rate limit per client and per token (issue 49, row 10), before anything else is done with a
request: an answer of 429 with Retry-After, from a token bucket per key, in this server process.

- Requests without a token (no Authorization header): per client address, every method, at
  GEMMWATCH_RATE_LIMIT_ANON_PER_S with a burst of GEMMWATCH_RATE_LIMIT_BURST. The audit's 311
  requests a second of 401s, and 64 clients on `/`, meet it. `/healthz` is never limited (the
  probes that restart a server must get through).
- Writes with a token: per token (its SHA-256, never the token), at GEMMWATCH_RATE_LIMIT_WRITES_PER_S.

Each is off at 0, the default: a deployment chooses its figures (README's settings table). The
buckets are per process (`gemmwatch serve --processes N` gives a client N buckets) and keep at most
BUCKETS_KEPT keys, the least recently seen dropped first.
"""

import hashlib
import math
import time
from collections import OrderedDict

from core.settings import Settings

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
BUCKETS_KEPT = 100_000
EXEMPT = ("/healthz",)


class TokenBuckets:
    """rate tokens a second, up to burst; take() says how long to wait (0: go on now)."""

    def __init__(self, rate: float, burst: int, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        now = self.clock()
        level, then = self.buckets.pop(key, (float(self.burst), now))
        level = min(float(self.burst), level + (now - then) * self.rate)
        if level >= 1.0:
            self.buckets[key] = (level - 1.0, now)
            wait = 0.0
        else:
            self.buckets[key] = (level, now)
            wait = (1.0 - level) / self.rate
        while len(self.buckets) > BUCKETS_KEPT:
            self.buckets.popitem(last=False)
        return wait


class RateLimit:
    def __init__(self, app, cfg: Settings):
        self.app = app
        self.anonymous = (TokenBuckets(cfg.rate_limit_anon_per_s, cfg.rate_limit_burst)
                          if cfg.rate_limit_anon_per_s > 0 else None)
        self.writes = (TokenBuckets(cfg.rate_limit_writes_per_s, cfg.rate_limit_burst)
                       if cfg.rate_limit_writes_per_s > 0 else None)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in EXEMPT or (self.anonymous is None and self.writes is None):
            return await self.app(scope, receive, send)
        authorization = dict(scope["headers"]).get(b"authorization")
        wait = 0.0
        if authorization is None and self.anonymous is not None:
            wait = self.anonymous.take((scope.get("client") or ("?", 0))[0])
        elif authorization is not None and scope["method"] in UNSAFE and self.writes is not None:
            wait = self.writes.take(hashlib.sha256(authorization).hexdigest())
        if wait <= 0:
            return await self.app(scope, receive, send)
        body = b'{"detail":"too many requests from this client or token: retry after the seconds Retry-After says"}'
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(max(1, math.ceil(wait))).encode())]})
        await send({"type": "http.response.body", "body": body})
