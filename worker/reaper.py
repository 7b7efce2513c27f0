"""Finds jobs that lost their worker or their broker message, and queues them again.

- running, heartbeat older than heartbeat_stale_s and its worker's last beat too: the worker died
  without a trace (kill -9, node lost). Back to queued and published again; the next worker resumes it and skips the
  cases already stored (result rows are unique per job and case).
- queued for longer than requeue_after_s while the broker holds no message in its queue: the
  broker lost it (Redis restarted; it keeps nothing on disk). Published again. A job that is
  merely waiting behind others still has messages ahead of it in the queue, so it is left alone.
- a worker silent for worker_offline_after_s: marked offline, since its last beat (worker/fleet.py).
Duplicate messages are harmless: a worker claims a job with one atomic UPDATE (worker/execute.py).
Every worker runs this in a background thread; `gemmwatch reap` runs it once.
"""

import logging
import threading
from datetime import timedelta

from sqlalchemy import select, update

from core.jobs.broker import enqueue_job, make_celery
from core.records.db import session_factory
from core.records.models import Job, Worker, utcnow
from core.settings import Settings

log = logging.getLogger(__name__)


def _waiting_messages(cfg: Settings, queue: str) -> int:
    app = make_celery(cfg)
    with app.connection_for_write() as conn:
        try:
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
        except Exception:  # the queue does not exist (any more): nothing waits in it
            return 0


def reap(cfg: Settings) -> list[int]:
    """One pass; returns the ids of the jobs published again."""
    now = utcnow()
    republish: list[tuple[int, str]] = []
    with session_factory(cfg)() as db:
        mark_silent_workers_offline(db, cfg, now)
        stale = now - timedelta(seconds=cfg.heartbeat_stale_s)
        # Gone means silent twice: the job's heartbeat and its worker's beat (worker/fleet.py) both
        # stale. On a loaded machine a job's heartbeat fell 11 s behind while its worker, alive and
        # beating, ran it, and the reaper queued it again under that worker (issue 38's load runs).
        worker_alive = select(Worker.id).where(Worker.name == Job.worker, Worker.last_beat_at >= stale).exists()
        for job in db.scalars(select(Job).where(Job.status == "running", Job.heartbeat_at < stale, ~worker_alive)).all():
            # Conditional, as the cancel (core/jobs/cancel.py) is: a job cancelled since the SELECT stays cancelled.
            if db.execute(update(Job).where(Job.id == job.id, Job.status == "running", Job.heartbeat_at < stale)
                          .values(status="queued", current_case=None)).rowcount:
                log.warning("job %s: worker %s silent since %s; queueing it again", job.id, job.worker, job.heartbeat_at)
                republish.append((job.id, job.queue))
        old = now - timedelta(seconds=cfg.requeue_after_s)
        waiting = db.scalars(
            select(Job).where(Job.status == "queued", Job.run_id.is_(None),
                              (Job.enqueued_at < old) | Job.enqueued_at.is_(None), Job.created_at < old)
        ).all()
        empty_queues = {q for q in {j.queue for j in waiting} if _waiting_messages(cfg, q) == 0}
        for job in waiting:
            if job.queue in empty_queues:
                log.warning("job %s: queued since %s but its queue %s is empty; publishing again",
                            job.id, job.enqueued_at, job.queue)
                republish.append((job.id, job.queue))
        for job_id, _ in republish:
            db.get(Job, job_id).enqueued_at = now
        db.commit()
    for job_id, queue in republish:
        enqueue_job(job_id, queue, cfg)
    return [job_id for job_id, _ in republish]


def mark_silent_workers_offline(db, cfg: Settings, now) -> int:
    silent = now - timedelta(seconds=cfg.worker_offline_after_s)
    gone = db.execute(update(Worker).where(Worker.state == "online", Worker.last_beat_at < silent)
                      .values(state="offline", offline_since=Worker.last_beat_at)).rowcount
    if gone:
        log.warning("%d worker(s) silent for %g s: marked offline", gone, cfg.worker_offline_after_s)
    return gone


def start_reaper_thread(cfg: Settings) -> threading.Thread:
    stop = threading.Event()

    def loop():
        while not stop.wait(cfg.reaper_interval_s):
            try:
                reap(cfg)
            except Exception:  # broker or database away: try again next round
                log.exception("reaper pass failed")

    thread = threading.Thread(target=loop, name="gemmwatch-reaper", daemon=True)
    thread.stop = stop  # type: ignore[attr-defined]
    thread.start()
    return thread
