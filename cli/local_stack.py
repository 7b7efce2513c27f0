"""What `gemmwatch up` and `gemmwatch worker` start on this machine: the embedded install's write token,
one Celery worker process per visible GPU (its command line, its queues, its name in the fleet), each
tied to the life of the process that started it."""

import ctypes  # imported at the top, not in die_with_parent: that runs between fork and exec
import signal
import socket
import sys
import time

from cli.server import local_token_path


def ensure_local_token() -> None:
    """Give the embedded install a write token once, readable only by its owner."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.records.tokens import create_token
    from core.records.db import session_factory
    from core.settings import settings

    path = local_token_path()
    if path.exists():
        return
    with session_factory(settings)() as db:
        # The machine's owner: every scope (docs/SECURITY.md), as before scopes existed.
        token = create_token(db, f"local-{socket.gethostname()}-{int(time.time())}", scopes=("admin",))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(token + "\n")


def worker_command(queues: list[str], name: str, loglevel: str = "INFO", host: str = "%h",
                   quiet: bool = False) -> list[str]:
    """The node name name@host is the worker's identity in the fleet (worker/fleet.py); %h is Celery's host name.
    quiet: no banner and no root warning (worker/celery_app.py), for `up`, which says what matters itself."""
    return [
        sys.executable, "-m", "celery", "-A", "worker.celery_app", *(["--quiet"] if quiet else []), "worker",
        "--pool", "solo", "--concurrency", "1",  # one job at a time owns the GPU
        # Celery's own worker-to-worker chatter serves nothing here (the fleet beats through the
        # database, and no task is revoked): mingle held each worker's start on Redis for a 1 s
        # reply window, gossip sent events to every other worker. Heartbeats stay, for Flower.
        "--without-mingle", "--without-gossip",
        "-Q", ",".join(queues), "-n", f"{name}@{host}", "--loglevel", loglevel,
    ]


def gpu_worker_plan() -> list[tuple[dict[str, str], list[str], str]]:
    """(extra env, queues, name) per worker: one per visible GPU, or one that answers 'no CUDA device'."""
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.jobs.broker import ANY_GPU_QUEUE, queue_for
    from worker.gpu.gpu_identity import visible_gpus

    gpus = visible_gpus()
    if not gpus:  # nothing to warm up (worker/measure/warm_up.py): `up` says "no GPU visible" itself
        return [({"GEMMWATCH_WARM_UP": "0"}, [ANY_GPU_QUEUE], "nogpu")]
    return [
        ({"CUDA_VISIBLE_DEVICES": g.uuid}, [queue_for(g.model), ANY_GPU_QUEUE], f"gpu{g.index}")
        for g in gpus
    ]


def die_with_parent() -> None:
    """In a worker started by `up`: end when `up` ends, however it ends. uvicorn re-raises the
    SIGTERM it handled once it has shut down, so `up`'s own clean-up may never run."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def exit_on_sigterm(signum, _frame) -> None:
    raise SystemExit(128 + signum)
