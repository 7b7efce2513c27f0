"""This worker's place in the fleet: it registers at start, beats while it lives, signs off at exit.

The row (core/records/models.py Worker) is keyed by the Celery node name (gpu0@host), so a restarted
worker takes its old row back. The GPU is named through the runner's registration_identity()
(NVML only: the worker process never makes a CUDA context; its GPU child does). A worker whose
beats stop is marked offline by the reaper (worker/reaper.py), and readers judge staleness
themselves too (core/jobs/fleet.py), so a fleet with no live worker left still reads right.
"""

import logging
import os
import socket
import threading
import tomllib
from importlib.metadata import PackageNotFoundError, version

from pathlib import Path

from sqlalchemy import select, update

from core.records.db import session_factory
from core.records.models import Worker, utcnow
from core.settings import Settings
from core.records.store import upsert_gpu
from worker.child import load_runner

log = logging.getLogger(__name__)

NO_GPU_MODEL = "none"
_node_name: str | None = None  # set when the worker is ready, before its first job can be claimed
_heartbeat: threading.Thread | None = None  # this process's beat loop, stopped at sign-off


def node_name() -> str | None:
    """This worker's Celery node name; jobs it claims carry it (Job.worker)."""
    return _node_name


def gemmwatch_version() -> str:
    try:
        return version("gemmwatch")
    except PackageNotFoundError:  # run from a checkout that was never installed: its pyproject says
        try:
            project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
            return f"{project['project']['version']} (checkout)"
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def gpu_identity(cfg: Settings) -> dict | None:
    ask = getattr(load_runner(cfg.runner), "registration_identity", None)
    return ask() if ask else None


def register(cfg: Settings, name: str, queues: list[str]) -> None:
    ident = gpu_identity(cfg)
    now = utcnow()
    with session_factory(cfg)() as db:
        gpu_id = upsert_gpu(db, ident).id if ident else None
        row = db.scalar(select(Worker).where(Worker.name == name))
        if row is None:
            row = Worker(name=name)
            db.add(row)
        row.host = name.partition("@")[2] or socket.gethostname()
        row.gpu_id = gpu_id
        row.gpu_index = ident.get("index") if ident else None
        row.model = ident["model"] if ident else NO_GPU_MODEL
        row.queues = sorted(queues)
        row.version = gemmwatch_version()
        row.pid = os.getpid()
        row.state, row.started_at, row.last_beat_at, row.offline_since = "online", now, now, None
        db.commit()
    log.info("registered as %s (%s) on queues %s", name, row.model, ", ".join(queues))


def beat(cfg: Settings, name: str) -> bool:
    """One heartbeat; False when the row is gone (then the caller registers again)."""
    with session_factory(cfg)() as db:
        found = db.execute(update(Worker).where(Worker.name == name)
                           .values(last_beat_at=utcnow(), state="online", offline_since=None)).rowcount
        db.commit()
    return bool(found)


def sign_off(cfg: Settings, name: str) -> None:
    """A clean exit says so at once, instead of going silent until the reaper notices. The beats
    stop first: one landing after the sign-off would mark the row online again (it did, on a
    loaded machine, with beats 0.3 s apart), and the worker would then read offline, not stopped."""
    stop_heartbeat(cfg)
    with session_factory(cfg)() as db:
        db.execute(update(Worker).where(Worker.name == name).values(state="stopped", offline_since=utcnow()))
        db.commit()


def stop_heartbeat(cfg: Settings) -> None:
    """Stop the beat loop and wait for a beat in flight to land."""
    if _heartbeat is not None:
        _heartbeat.stop.set()  # type: ignore[attr-defined]
        _heartbeat.join(timeout=cfg.worker_beat_s + 10)


def start_heartbeat_thread(cfg: Settings, name: str, queues: list[str]) -> threading.Thread:
    global _node_name, _heartbeat
    _node_name = name  # a job claimed before the first registration lands still names this worker
    stop = threading.Event()

    def loop():
        registered = False
        while True:
            try:
                if registered:
                    registered = beat(cfg, name)  # False: the row is gone; register again next time
                else:
                    register(cfg, name, queues)
                    registered = True
            except Exception:  # database away, or a GPU NVML cannot read: try again next beat
                log.exception("worker %s: %s failed", name, "heartbeat" if registered else "registration")
                registered = False
            if stop.wait(cfg.worker_beat_s):
                return

    thread = threading.Thread(target=loop, name="gemmwatch-heartbeat", daemon=True)
    thread.stop = stop  # type: ignore[attr-defined]
    thread.start()
    _heartbeat = thread
    return thread
