"""Thin Celery tasks: take an id, hand it to the plain-Python executor."""

from core.jobs.broker import RUN_JOB_TASK
from core.settings import settings
from worker.celery_app import app
from worker.execute import execute_job


@app.task(name=RUN_JOB_TASK)
def run_job(job_id: int) -> str | None:
    return execute_job(job_id, settings)  # the worker process's one Settings, made as it started
