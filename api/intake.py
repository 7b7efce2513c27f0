"""Job intake: how a POST that queues a job (/api/jobs, /api/jobs/{id}/confirm) stores and
publishes it.

Written one by one, each job cost its request a thread hop, a token lookup, an insert and a
commit, and PostgreSQL a transaction; under 50 clients that per-request CPU was what kept the
p99 up (docs/BENCHMARKS.md, issue 12). Here the requests of one server process hand their job
to a single writer thread, which takes every job waiting at once, checks their tokens in one
query, stores them in one transaction and then publishes each: a group commit. Nothing about a
job's promise changes: it is answered 202 only once its row is committed and its message
published, and when the broker refuses, the job is kept as failed and the answer is 503.

A job that cannot be stored (a value the database refuses, a confirmation with nothing to
confirm) must not cost the others theirs: the group is rolled back and each job of it written
alone, so only that request gets the error.
"""

import asyncio
import logging
import queue
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import status
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from api.auth import forbidden, unauthorized
from api.queue_cap import over_cap
from core.records.tokens import find_tokens, has_scope, note_use
from core.jobs.broker import enqueue_job
from core.records.db import session_factory
from core.jobs.fleet import load_fleet
from core.jobs import job_intake as intake_rules
from core.records.models import ApiToken, Job, utcnow
from api.schemas import JobOut
from core.settings import Settings

log = logging.getLogger(__name__)

# The most jobs one transaction stores: a burst beyond it is taken in the next round.
MAX_GROUP = 100

# Makes the job from the request's checked token row (None where writes need no token): who may
# write a commit's identity, and whose job may be confirmed, depend on it.
BuildJob = Callable[[Session, ApiToken | None], Job]


@dataclass(eq=False)
class _Ticket:
    """One request's job on its way through the writer thread, and what the request gets back."""

    build: BuildJob  # makes the (not yet added) Job row; may raise an HTTPException for the request
    token: str | None  # the bearer token to check; None where writes need none
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    token_row: ApiToken | None = None  # the checked token's row: the job's submitter
    job: Job | None = None
    answer: Response | None = None
    error: BaseException | None = None


class JobIntake:
    """One per app: requests `submit` a job builder; the writer thread stores and publishes."""

    def __init__(self, cfg: Settings):
        self.cfg = cfg
        self._waiting: queue.SimpleQueue[_Ticket | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    async def submit(self, build: BuildJob, token: str | None) -> Response:
        loop = asyncio.get_running_loop()
        ticket = _Ticket(build, token, loop, loop.create_future())
        self._start()
        self._waiting.put(ticket)
        return await ticket.future

    def close(self, timeout: float = 30.0) -> None:
        """Answer every job handed in so far, then stop the thread."""
        thread, self._thread = self._thread, None  # a job submitted later starts a new one
        if thread is not None:
            self._waiting.put(None)
            thread.join(timeout)

    def _start(self) -> None:
        # Started by the first job, not when the app is built: `gemmwatch serve` spawns its
        # processes, and a test client may never run the app's lifespan.
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="gemmwatch-intake", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._waiting.get()
            if first is None:
                return
            group, stopping = [first], False
            while len(group) < MAX_GROUP:
                try:
                    ticket = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if ticket is None:
                    stopping = True
                    break
                group.append(ticket)
            try:
                self._store_and_publish(group)
            except Exception as exc:  # the database away, say: every request of the group hears it
                log.exception("job intake: a group of %d failed", len(group))
                for ticket in group:
                    if ticket.answer is None and ticket.error is None:
                        ticket.error = exc
            _settle(group)
            if stopping:
                return

    def _store_and_publish(self, group: list[_Ticket]) -> None:
        with session_factory(self.cfg)() as db:
            allowed = self._authorize(db, group)
            try:
                _store(db, allowed)
                stored = allowed
            except Exception:
                db.rollback()
                stored = self._store_one_by_one(db, allowed)
            self._publish(db, stored)

    def _authorize(self, db: Session, group: list[_Ticket]) -> list[_Ticket]:
        if not self.cfg.auth_writes:
            return group
        rows = find_tokens(db, {t.token for t in group})
        for row in rows.values():
            note_use(db, row)
        allowed = []
        for ticket in group:
            row = rows.get(ticket.token)
            if row is None:
                ticket.error = unauthorized()
            elif not has_scope(row, "jobs"):  # both of this intake's writes (a job, a confirmation)
                ticket.error = forbidden(row, "jobs")
            else:
                ticket.token_row = row
                allowed.append(ticket)
        # At most GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN queued or running per token (issue 37, row 7).
        for ticket, refusal in zip(list(allowed), over_cap(db, self.cfg, [t.token_row for t in allowed])):
            if refusal is not None:
                ticket.error = refusal
                allowed.remove(ticket)
        return allowed

    @staticmethod
    def _store_one_by_one(db: Session, group: list[_Ticket]) -> list[_Ticket]:
        stored = []
        for ticket in group:
            try:
                _store(db, [ticket])
                stored.append(ticket)
            except Exception as exc:  # this request's own fault (or a 404): it alone hears it
                db.rollback()
                ticket.job, ticket.error = None, exc
        return stored

    def _publish(self, db: Session, stored: list[_Ticket]) -> None:
        refused: Exception | None = None
        for ticket in stored:
            if refused is None:
                try:
                    enqueue_job(ticket.job.id, ticket.job.queue, self.cfg)
                    continue
                except Exception as exc:  # broker down: one wait for the group, not one per job
                    log.warning("could not publish job %s: %s", ticket.job.id, exc)
                    refused = exc
            intake_rules.fail_unpublished(ticket.job, refused)
        if refused is not None:
            db.commit()
        # Why a new job will wait (no live worker serves its queue, say), told in the answer
        # itself; one read of the fleet for the whole group.
        fleet = load_fleet(db, self.cfg) if refused is None and stored else None
        for ticket in stored:
            ticket.answer = _answer(ticket.job, fleet and fleet.waiting_reason(ticket.job))


def _store(db: Session, tickets: list[_Ticket]) -> None:
    # Stamped before publishing so the accepted path costs one commit; a failed publish then
    # marks the job failed, so no queued job claims a publish that did not happen.
    now = utcnow()
    for ticket in tickets:
        ticket.job = intake_rules.stamp(ticket.build(db, ticket.token_row), ticket.token_row, now)
        db.add(ticket.job)
    db.commit()


def _answer(job: Job, waiting: str | None = None) -> Response:
    if job.status == "failed":
        return JSONResponse(
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            content={"detail": f"broker unreachable: job {job.id} was stored as failed; retry later", "id": job.id},
        )
    # A new job has no results yet: answered from the row in hand, serialised here once.
    return Response(JobOut.from_row(job, with_results=False, waiting=waiting).model_dump_json(),
                    status_code=status.HTTP_202_ACCEPTED, media_type="application/json")


def _settle(group: list[_Ticket]) -> None:
    """Hand each request its answer on its own event loop: one wake-up per loop, not per job."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Ticket]] = defaultdict(list)
    for ticket in group:
        by_loop[ticket.loop].append(ticket)
    for loop, tickets in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, tickets)
        except RuntimeError:  # that loop has closed: its requests are gone
            pass


def _resolve(tickets: list[_Ticket]) -> None:
    for ticket in tickets:
        if ticket.future.done():  # the request went away meanwhile
            continue
        if ticket.error is not None:
            ticket.future.set_exception(ticket.error)
        else:
            ticket.future.set_result(ticket.answer)


def job_intake(app) -> JobIntake:
    return app.state.intake

