"""The Celery app both sides share: the API only publishes task names, the worker runs them.

With BROKER_URL unset (the embedded default) the broker is Kombu's filesystem transport in
the data folder (core/jobs/filesystem_broker.py: messages written whole before they show): no server
to run, and still a real Celery worker on the other end.
"""

from celery import Celery

from core.settings import Settings

RUN_JOB_TASK = "gemmwatch.run_job"
ANY_GPU_QUEUE = "gpu.any"


def queue_for(gpu_model: str | None) -> str:
    """Jobs that name a GPU model go to that model's queue; the rest to any GPU."""
    return f"gpu.{gpu_model}" if gpu_model else ANY_GPU_QUEUE


def make_celery(cfg: Settings) -> Celery:
    app = Celery("gemmwatch")
    if cfg.embedded_broker:
        folder = cfg.broker_folder
        folder.mkdir(parents=True, exist_ok=True)
        app.conf.broker_url = "filesystem://"
        app.conf.broker_transport = "core.jobs.filesystem_broker:Transport"  # wins over the URL's scheme
        app.conf.broker_transport_options = {
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.2,
        }
    else:
        app.conf.broker_url = cfg.broker_url
    app.conf.update(
        # The database holds every job's state; Celery keeps no results of its own.
        task_ignore_result=True,
        # Acknowledge after the job ran, and give it back if the worker dies mid-job.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=ANY_GPU_QUEUE,
        broker_connection_retry_on_startup=True,
        # Fail fast when publishing to a broker that is down: the API must answer, not hang.
        broker_connection_timeout=3,
        broker_connection_max_retries=2,
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5},
    )
    return app


# One publishing app per broker, so its connection pool is reused across requests.
_publishers: dict[tuple[str | None, str | None], Celery] = {}


def publisher(cfg: Settings) -> Celery:
    # broker_folder resolves a path (a filesystem call): only the embedded broker needs it.
    key = (cfg.broker_url, None if cfg.broker_url else str(cfg.broker_folder))
    if key not in _publishers:
        _publishers[key] = make_celery(cfg)
    return _publishers[key]


def enqueue_job(job_id: int, queue: str, cfg: Settings) -> None:
    # declare=[]: a direct queue is published to by name (Redis: a push onto its list), and the
    # worker declares the queues it consumes; declaring it again on every publish copied and
    # re-bound kombu's Queue each time, 60 % of the publish's CPU under load (py-spy).
    publisher(cfg).send_task(RUN_JOB_TASK, args=[job_id], queue=queue, declare=[])
