"""The worker's Celery app: the shared configuration plus the task module.

Run one per GPU, concurrency 1, solo pool (the task itself spawns the GPU child process,
which a prefork pool's daemonic children may not do):
    celery -A worker.celery_app worker --pool solo --concurrency 1 -Q gpu.H100,gpu.any
`gemmwatch worker` builds that command for the GPU it is given.
"""

import logging
import warnings

from celery.exceptions import SecurityWarning
from celery.signals import celeryd_init, worker_ready, worker_shutdown

from core.jobs.broker import make_celery
from core.settings import settings
from worker import gpu_process
from worker.compile.compiler import probe
from worker.measure.cases import TimingPolicy
from worker.fleet import node_name, sign_off, start_heartbeat_thread
from worker.reaper import start_reaper_thread

app = make_celery(settings)  # the worker process's one Settings (core/settings.py)
app.conf.include = ["worker.tasks"]


class _EmbeddedBrokerHost(logging.Filter):
    """Kombu warns "No hostname was supplied. Reverting to default 'localhost'" each time it opens
    the embedded broker (a folder: no host to supply). Dropped there, and only there: a server
    broker's URL without a host still warns."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No hostname was supplied")


if settings.embedded_broker:
    logging.getLogger("kombu.connection").addFilter(_EmbeddedBrokerHost())


@celeryd_init.connect
def _quiet_start(instance, **_):
    """`celery --quiet` (what `gemmwatch up` runs): no banner (Celery's own), and not the many
    lines of its warning about running as root, which `up` on one's own machine as root meets.
    A worker started without --quiet (`gemmwatch worker`, compose) warns as before."""
    if getattr(instance, "quiet", False):
        warnings.filterwarnings("ignore", category=SecurityWarning)


@worker_ready.connect
def _warm_up_gpu(**_):
    """Connected first, so the worker joins the fleet (and takes jobs) once its GPU process is warm."""
    if settings.warm_up_gpu:
        gpu_process.start_warm(settings.runner, TimingPolicy.from_settings(settings), settings.warm_up_timeout_s)


@worker_ready.connect
def _start_reaper(**_):
    start_reaper_thread(settings)


@worker_ready.connect
def _join_fleet(sender, **_):
    """Register this worker (its GPU, queues, version) and beat while it lives (worker/fleet.py)."""
    queues = [q.name for q in sender.task_consumer.queues]
    start_heartbeat_thread(settings, sender.hostname, queues)


@worker_shutdown.connect
def _leave_fleet(**_):
    if node_name():
        try:
            sign_off(settings, node_name())
        except Exception:  # the database is away: the reaper marks us offline later instead
            pass


@worker_ready.connect
def _report_compile_confinement(**_):
    """Say at start-up whether a job's own sources can be compiled here (worker/compile/compiler.py)."""
    found = probe(settings)
    log = logging.getLogger("gemmwatch.worker")
    if found.available:  # all is well: said at INFO (`gemmwatch worker`'s level), not in `up`'s warnings-only log
        log.info("compiler confinement: %s (NVRTC %s)", found.detail, found.version)
    elif settings.unconfined_sources == "warn":
        log.warning("this worker cannot confine the compiler (%s): job sources are compiled UNCONFINED "
                    "(GEMMWATCH_UNCONFINED_SOURCES=warn)", found.detail)
    else:
        log.warning("this worker cannot confine the compiler (%s): job sources will be refused "
                    "(GEMMWATCH_UNCONFINED_SOURCES=refuse)", found.detail)
