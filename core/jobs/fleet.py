"""The fleet as readers see it: every worker's state, queue depths, and why a queued job waits.

Read by GET /api/workers and /api/queues, the job endpoints (the `waiting` reason), the
dashboard's /fleet page and /metrics. A worker's stored state is judged again against the clock
here, so a worker that died with nobody left to run the reaper still reads offline.
"""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.jobs.broker import ANY_GPU_QUEUE, queue_for
from core.records.models import Job, Worker, utcnow
from core.settings import Settings
from core.jobs.job_states import ENDED



@dataclass
class WorkerView:
    row: Worker
    state: str  # idle | running | offline | stopped
    since: datetime | None  # offline or stopped since
    job: Job | None = None  # the job it runs
    jobs_last_day: int = 0

    @property
    def live(self) -> bool:
        return self.state in ("idle", "running")


@dataclass
class Fleet:
    workers: list[WorkerView]
    queued: Counter = field(default_factory=Counter)  # queue -> jobs waiting in it

    def serving(self, queue: str) -> list[WorkerView]:
        return [w for w in self.workers if queue in (w.row.queues or [])]

    def waiting_reason(self, job: Job) -> str | None:
        """Why a queued job has not started, or None when a live worker is free for it."""
        if job.status != "queued":
            return None
        serving = self.serving(job.queue)
        live = [w for w in serving if w.live]
        if not live:
            seen = max((w.row.last_beat_at for w in serving), default=None)
            last = f"{seen:%Y-%m-%d %H:%M:%S} UTC" if seen else "never"
            said = f"waiting: no live worker serves {job.queue}; last seen {last}"
            models = self.models()
            if not serving and models:  # a model no worker ever had ("A100x"): name the ones there are
                said += f"; the GPU models workers have served: {', '.join(models)}"
            return said
        if all(w.state == "running" for w in live):
            return (f"waiting: all {len(live)} live worker(s) serving {job.queue} are busy; "
                    f"{self.queued[job.queue]} job(s) queued on it")
        return None

    def models(self) -> list[str]:
        """The GPU models of the fleet's workers, live or not, as a job's `gpu` names them."""
        prefix = queue_for("X")[:-1]
        return sorted({q[len(prefix):] for w in self.workers for q in w.row.queues or []
                       if q.startswith(prefix) and q != ANY_GPU_QUEUE})

    def queue_depths(self) -> list[dict]:
        """Per queue that has jobs waiting or a live worker: queued jobs, live and busy workers."""
        names = set(self.queued) | {q for w in self.workers if w.live for q in w.row.queues or []}
        rows = []
        for name in sorted(names):
            live = [w for w in self.serving(name) if w.live]
            rows.append({"queue": name, "queued": self.queued[name], "live_workers": len(live),
                         "busy_workers": sum(w.state == "running" for w in live)})
        return rows


def state_of(row: Worker, now: datetime, cfg: Settings) -> tuple[str, datetime | None]:
    if row.state == "online" and row.last_beat_at < now - timedelta(seconds=cfg.worker_offline_after_s):
        return "offline", row.last_beat_at
    if row.state != "online":
        return row.state, row.offline_since
    return "online", None


def load_fleet(db: Session, cfg: Settings, with_history: bool = False) -> Fleet:
    """Workers with the job each runs, and queue depths; with_history adds each worker's jobs ended in
    the last day (a scan of recent jobs: for the fleet views, not for every job read)."""
    now = utcnow()
    rows = db.scalars(select(Worker).order_by(Worker.model, Worker.host, Worker.name)).unique().all()
    running: dict[str, Job] = {}
    done: dict[str, int] = {}
    names = [r.name for r in rows]
    # Job.worker is nullable, but `IN names` never matches a NULL: the `is not None` tests only
    # tell the type checker so.
    if rows:
        running = {j.worker: j for j in db.scalars(
            select(Job).where(Job.status == "running", Job.worker.in_(names))).unique() if j.worker is not None}
    if with_history and rows:
        done = {worker: count for worker, count in db.execute(
            select(Job.worker, func.count()).where(Job.worker.in_(names), Job.status.in_(ENDED),
                                                   Job.finished_at >= now - timedelta(days=1))
            .group_by(Job.worker)) if worker is not None}
    views = []
    for row in rows:
        state, since = state_of(row, now, cfg)
        job = running.get(row.name) if state == "online" else None
        if state == "online":
            state = "running" if job is not None else "idle"
        views.append(WorkerView(row, state, since, job, done.get(row.name, 0)))
    queued = Counter(dict(db.execute(
        select(Job.queue, func.count()).where(Job.status == "queued").group_by(Job.queue)).all()))
    return Fleet(views, queued)
