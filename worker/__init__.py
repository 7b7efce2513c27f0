"""GPU worker: Celery app, thin task, job execution, and the runner that makes the numbers."""
