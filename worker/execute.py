"""Runs one job: plans its cases, drives the GPU child process, writes results as they land.

Called by the Celery task with a job id; also callable directly (no Celery needed).
"""

import logging
import os
import socket
import time
from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from core.verdicts.confirm import KIND as CONFIRM
from core.records.db import session_factory
from core.records.kernel_store import identity_of, kernel_hash, kernels_of_job
from core.records.models import Job, Result, TunedConfig, utcnow
from core.settings import Settings
from core.records.store import upsert_gpu
from worker.measure.cases import Case, CaseOutcome, TunedLookup, cases_from_plan, freeze_plan, plan
from worker import fleet, gpu_process, webhook
from worker.profile import profile_step
from worker.job_end import end_job, is_cancelled

log = logging.getLogger(__name__)

# A database that blinks (restart, failover) costs a few retries, not a lost result.
db_retry = retry(
    retry=retry_if_exception_type(OperationalError),
    wait=wait_exponential(multiplier=0.5, max=10),
    stop=stop_after_attempt(8),
    reraise=True,
)


class JobRun:
    def __init__(self, job_id: int, cfg: Settings):
        self.job_id = job_id
        self.cfg = cfg
        self.Session = session_factory(cfg)
        self.problems: list[str] = []
        self.identity: dict | None = None
        self.cancelled = False
        self.case_started: dict[int, float] = {}  # case index -> monotonic time the child began it

    # -- database writes (each its own short transaction) ---------------------------
    @db_retry
    def start(self) -> bool:
        """Claim the job: one atomic UPDATE, so a duplicate delivery (a re-queue racing the
        original, or a redelivery after a worker loss) never runs a job twice at once."""
        stale = utcnow() - timedelta(seconds=self.cfg.heartbeat_stale_s)
        with self.Session() as db:
            claimed = db.execute(
                update(Job)
                .where(Job.id == self.job_id)
                .where((Job.status == "queued") | ((Job.status == "running") & (Job.heartbeat_at < stale)))
                .values(status="running", worker=fleet.node_name() or f"{socket.gethostname()}:{os.getpid()}",
                        heartbeat_at=utcnow(),
                        started_at=func.coalesce(Job.started_at, utcnow()))
            ).rowcount
            db.commit()
            if not claimed:
                job = db.get(Job, self.job_id)
                if job is not None and job.status == "cancelled":
                    log.info("job %s skipped: cancelled before it ran", self.job_id)
                else:
                    log.info("job %s not claimed: %s", self.job_id, "missing" if job is None else job.status)
            return bool(claimed)

    @db_retry
    def plan_for(self, gpu_model: str) -> list[Case]:
        """Plan once, when the GPU model is known; a re-run after a worker death reuses the plan
        and skips the cases whose results are already stored."""
        with self.Session() as db:
            job = db.get(Job, self.job_id)
            own = {src["name"] for src in job.sources or []}
            kernels = kernels_of_job(job.sources or [])
            if job.plan is None:
                tuned = self._tuned(db, job, gpu_model, kernels)
                job.plan = freeze_plan(db, plan(job.kind, job.variants, job.sizes, job.tunables or {}, tuned, kernels,
                                                job.timing), kernels, own)
            cases = cases_from_plan(job.plan, job.id, kernels, own, job.timing)
            done = set(db.scalars(select(Result.case_index).where(Result.job_id == job.id)))
            job.progress_total, job.progress_done = len(cases), len(done)
            db.commit()
            return [c for c in cases if c.index not in done]

    @staticmethod
    def _tuned(db: Session, job: Job, gpu_model: str, kernels: dict) -> TunedLookup:
        """The tuned configurations of this job's kernels: by name and the kernel's hash, so a
        job's own kernel named like a built-in gets only its own (issue 37, row 6)."""
        hashes = {name: kernel_hash(kernels[name]) for name in job.variants if name in kernels}
        if not hashes:
            return {}
        rows = db.scalars(select(TunedConfig).where(
            TunedConfig.gpu_model == gpu_model, TunedConfig.variant.in_(list(hashes)),
            TunedConfig.kernel_hash.in_(set(hashes.values()))))
        return {(r.variant, r.m, r.n, r.k): r.tunables for r in rows if hashes.get(r.variant) == r.kernel_hash}

    @db_retry
    def record_tuned(self) -> None:
        """After an autotune job: the fastest verified configuration per variant and size."""
        with self.Session() as db:
            job = db.get(Job, self.job_id)
            model = job.gpu.model
            # Each case's kernel as planned (files by digest): its hash is what the best is kept
            # under, so it is the built-in's only where the built-in ran (issue 37, row 6).
            hashes = {}
            for index, entry in enumerate(job.plan or []):
                kernel = entry.get("kernel") if isinstance(entry, dict) else None
                if isinstance(kernel, dict) and isinstance(kernel.get("description"), dict):
                    hashes[index] = identity_of(kernel["description"])
            best: dict[tuple, Result] = {}
            for r in job.results:
                if r.case_index not in hashes:  # cuBLAS, or a plan without kernels: nothing to tune
                    continue
                key = (r.variant, hashes[r.case_index], r.m, r.n, r.k)
                if r.verified and r.gflops and (key not in best or r.gflops > best[key].gflops):
                    best[key] = r
            for (variant, digest, m, n, k), r in best.items():
                row = db.scalar(select(TunedConfig).where(
                    TunedConfig.gpu_model == model, TunedConfig.variant == variant, TunedConfig.kernel_hash == digest,
                    TunedConfig.m == m, TunedConfig.n == n, TunedConfig.k == k))
                if row is None:
                    row = TunedConfig(gpu_model=model, variant=variant, kernel_hash=digest, m=m, n=n, k=k)
                    db.add(row)
                row.tunables, row.gflops, row.job_id = r.tunables, r.gflops, job.id
            db.commit()

    @db_retry
    def update(self, **fields) -> None:
        with self.Session() as db:
            job = db.get(Job, self.job_id)
            for name, value in fields.items():
                setattr(job, name, value)
            job.heartbeat_at = utcnow()
            db.commit()

    @db_retry
    def record_gpu(self, ident: dict) -> None:
        with self.Session() as db:
            job = db.get(Job, self.job_id)
            job.gpu_id = upsert_gpu(db, ident).id
            db.commit()
        self.identity = ident

    @db_retry
    def store(self, case: Case, outcome: CaseOutcome) -> None:
        with self.Session() as db:
            job = db.get(Job, self.job_id)
            row = db.scalar(select(Result).where(Result.job_id == job.id, Result.case_index == case.index))
            if row is None:
                row = Result(job_id=job.id, case_index=case.index)
                db.add(row)
            values = outcome.as_row()
            values["env"] = {**values["env"], "gpu": self.identity}
            for name, value in values.items():
                setattr(row, name, value)
            row.variant, row.m, row.n, row.k = case.variant, case.m, case.n, case.k
            row.tunables = case.tunables
            if case.index in self.case_started:  # wall time in the GPU process: compile, verify, time
                row.case_s = time.monotonic() - self.case_started[case.index]
            row.gpu_id, row.commit_id = job.gpu_id, job.commit_id
            db.flush()
            job.progress_done = _count_results(db, job.id)
            job.heartbeat_at = utcnow()
            db.commit()

    def started(self, case: Case) -> None:
        self.case_started[case.index] = time.monotonic()
        self.update(current_case=case.label)

    @db_retry
    def cancel_requested(self) -> bool:
        with self.Session() as db:
            self.cancelled = is_cancelled(db, self.job_id)
        return self.cancelled

    @db_retry
    def _end(self) -> str:
        with self.Session() as db:
            return end_job(db, self.job_id, self.problems)

    def finish(self, kind: str) -> str:
        # A cancelled autotune saw only some configurations: its best is no one's best.
        if kind == "autotune" and self.identity is not None and not self.cancel_requested():
            self.record_tuned()  # a failed configuration does not spoil the others
        status = self._end()
        webhook.notify(self.cfg, self.job_id)  # a confirmed regression, told in the background
        return status

    # -- the child process --------------------------------------------------------
    def run(self) -> str | None:
        if not self.start():
            return None
        self._drive_child()
        with self.Session() as db:
            kind = db.get(Job, self.job_id).kind
        if kind == CONFIRM and not self.cancel_requested():
            self.profile()
        return self.finish(kind)

    def profile(self) -> None:
        """A confirmation's profiles, after its last timed sample (worker/profile/profile_step.py); a
        profile that fails is said in its row and never fails the job."""
        self.update(current_case="profiling base and head")
        try:
            profile_step.profile_job(self.job_id, self.cfg, self.Session)
        except Exception:  # the verdicts stand without a profile; the log says what broke
            log.exception("job %s: profiling failed", self.job_id)

    def _drive_child(self) -> None:
        def on_identity(ident: dict) -> list[Case]:
            self.record_gpu(ident)
            try:
                return self.plan_for(ident["model"])
            except ValueError as exc:  # a stored kernel that no longer passes its checks: the job fails, saying why
                self.problems.append(f"the job cannot be planned:\n{exc}")
                return []

        self.problems += gpu_process.converse(
            self.cfg,
            on_identity=on_identity,
            on_started=self.started,
            on_result=self.store,
            on_idle=self.update,  # heartbeat while a long case runs
            should_stop=self.cancel_requested,
            spent_before=self.spent_before,  # the job's budget counts a re-run's earlier cases
            on_new_process=self.record_gpu,  # after a case took its GPU process down: the results say which made them
        )

    @db_retry
    def spent_before(self) -> float:
        """GPU-process seconds of this job's cases already stored (a re-run after a worker death)."""
        with self.Session() as db:
            return float(db.scalar(select(func.coalesce(func.sum(Result.case_s), 0.0))
                                   .where(Result.job_id == self.job_id)) or 0.0)


def _count_results(db: Session, job_id: int) -> int:
    """The cases done: a case stopped by its job's cancel has a result saying so, and is not done."""
    return db.scalar(select(func.count()).select_from(Result)
                     .where(Result.job_id == job_id, Result.status != "cancelled"))


def execute_job(job_id: int, cfg: Settings) -> str | None:
    """Run a job to its end; returns the final status, or None if there was nothing to do."""
    return JobRun(job_id, cfg).run()
