"""Tell someone when a confirmation job confirms a regression on a watched branch.

The POST runs in a daemon thread after the job is marked finished, retried with exponential
backoff (tenacity); a receiver that is down costs log lines, never the job or the worker's next one.
"""

import logging
import threading

from tenacity import retry, stop_after_attempt, wait_exponential

from core.verdicts.confirm import confirmation
from core.records.db import session_factory
from core.records.models import Job
from core.verdicts.regression import PairedThresholds
from core.settings import Settings

log = logging.getLogger(__name__)


def message(db, job: Job, cfg: Settings) -> dict | None:
    """The JSON to send for a finished confirmation job, or None when there is nothing to say."""
    if job.kind != "confirm" or not job.confirm:
        return None
    head = db.get(Job, job.confirm["head_job"])
    branch = head.commit.branch if head is not None and head.commit is not None else None
    watched = {b.strip() for b in cfg.webhook_branches.split(",") if b.strip()}
    if "*" not in watched and branch not in watched:
        return None
    regressions = [c.model_dump() for c in confirmation(job, PairedThresholds.from_settings(cfg))
                   if c.status == "regression"]
    if not regressions:
        return None
    return {"event": "confirmed_regression", "job": job.id, "head_job": job.confirm["head_job"],
            "head_sha": job.confirm["head_sha"], "base_sha": job.confirm["base_sha"], "branch": branch,
            "gpu": job.gpu.name if job.gpu else None, "regressions": regressions}


def notify(cfg: Settings, job_id: int) -> threading.Thread | None:
    if not cfg.webhook_url:
        return None
    try:
        with session_factory(cfg)() as db:
            body = message(db, db.get(Job, job_id), cfg)
    except Exception:  # a notification must never fail a job
        log.exception("webhook: could not build the message for job %s", job_id)
        return None
    if body is None:
        return None
    thread = threading.Thread(target=_deliver, args=(cfg.webhook_url, body, cfg.webhook_attempts),
                              name=f"webhook-{job_id}", daemon=True)
    thread.start()
    return thread


def _deliver(url: str, body: dict, attempts: int) -> None:
    @retry(wait=wait_exponential(multiplier=0.5, max=30), stop=stop_after_attempt(attempts), reraise=True)
    def post() -> None:
        import httpx  # here, not at the top: only a worker that sends a webhook needs it

        httpx.post(url, json=body, timeout=10).raise_for_status()

    try:
        post()
    except Exception as exc:
        log.warning("webhook: gave up on %s after %d attempts: %s", url, attempts, exc)
