"""Refuse before reading: a write's size and its token are checked before its body is read.

FastAPI reads and parses a request's whole body before any dependency runs, so a route could
only check the token after the body was in memory and, for POST /api/jobs, after every kernel
description had been validated (the source guard included) on the event loop. Eight
unauthenticated 4 MB job posts froze every route, /healthz included, for up to a minute and took
the API to 2.8 GB (issue 37, row 1). Here, for every POST, PUT, PATCH and DELETE, in this order:

1. a Content-Length over the route's limit is a 413 at once;
2. an API write without a bearer token is a 401 at once; a token that is unknown, revoked or
   lacks the route's scope is a 401 or 403 after one lookup (on a thread), with nothing read;
3. the body is read here, counted as it streams (a chunked body has no Content-Length), and a
   413 as soon as it passes the limit; only a body within it reaches the route.

Pure ASGI, inside SameOriginWrites (a cross-origin write is refused before this).
"""

import json
import re
from dataclasses import dataclass

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from api.auth import bearer_of, unauthorized, writer_refusal
from api.same_origin import UNSAFE
from core.settings import Settings

# Any other write (a dashboard form, a request to no route) carries a few fields at most.
SMALL_BODY = 64 << 10


@dataclass(frozen=True)
class Gate:
    path: re.Pattern
    limit: str | None  # the Settings field that bounds the body; None: SMALL_BODY
    scope: str  # the token scope the write needs (api/auth.py)


GATES = (
    Gate(re.compile(r"/api/jobs"), "max_job_bytes", "jobs"),
    Gate(re.compile(r"/api/jobs/\d+/(confirm|cancel)"), None, "jobs"),
    Gate(re.compile(r"/api/results"), "max_results_bytes", "results"),
    Gate(re.compile(r"/api/imports"), "max_results_bytes", "results"),
)


class TooLarge(Exception):
    pass


class RequestGate:
    def __init__(self, app, cfg: Settings):
        self.app = app
        self.cfg = cfg

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in UNSAFE:
            return await self.app(scope, receive, send)
        gate = next((g for g in GATES if g.path.fullmatch(scope["path"])), None)
        limit = getattr(self.cfg, gate.limit) if gate and gate.limit else SMALL_BODY
        headers = {name.lower(): value for name, value in scope["headers"]}
        refusal = _too_long(headers.get(b"content-length"), limit)
        if refusal is None and gate is not None and self.cfg.auth_writes:
            refusal = await self._token_refusal(headers.get(b"authorization"), gate.scope)
        if refusal is None:
            try:
                body = await _read(receive, limit)
            except TooLarge:
                refusal = _too_large(limit)
        if refusal is not None:
            return await _answer(send, refusal)
        if body is not None:  # None: the client went away while sending
            await self.app(scope, _replay(body, receive), send)

    async def _token_refusal(self, header: bytes | None, scope: str) -> HTTPException | None:
        token = bearer_of(header.decode("latin-1") if header else None)
        if token is None:
            return unauthorized()  # no database, no thread: the flood's case
        return await run_in_threadpool(writer_refusal, self.cfg, token, scope)


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the request body is larger than this route takes: at most {limit} bytes"
                              " (GEMMWATCH_MAX_JOB_BYTES for a job, GEMMWATCH_MAX_RESULTS_BYTES for results)")


def _too_long(header: bytes | None, limit: int) -> HTTPException | None:
    if header is None:
        return None
    if not header.strip().isdigit():
        return HTTPException(400, "Content-Length must be a number of bytes")
    return _too_large(limit) if int(header) > limit else None


async def _read(receive, limit: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive):
    """The body as the route reads it, once; after it, the connection's own messages (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


async def _answer(send, refusal: HTTPException) -> None:
    # Connection: close, since the body is left unread: the server then ends the connection
    # after this answer instead of reading the rest as the next request.
    body = json.dumps({"detail": refusal.detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    headers += [(k.lower().encode(), v.encode()) for k, v in (refusal.headers or {}).items()]
    await send({"type": "http.response.start", "status": refusal.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
