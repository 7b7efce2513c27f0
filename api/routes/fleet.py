"""The fleet: every GPU worker and its state, and the depth of each queue (core/jobs/fleet.py)."""

from fastapi import APIRouter

from core.web_deps import SessionDep, SettingsDep
from core.jobs.fleet import load_fleet
from api.schemas import QueueOut, WorkerOut

router = APIRouter(prefix="/api", tags=["fleet"])


@router.get("/workers", response_model=list[WorkerOut])
def list_workers(db: SessionDep, cfg: SettingsDep):
    """Every worker that ever registered: idle, running a job (with its progress), offline or stopped since when."""
    return [WorkerOut.from_view(w) for w in load_fleet(db, cfg, with_history=True).workers]


@router.get("/queues", response_model=list[QueueOut])
def list_queues(db: SessionDep, cfg: SettingsDep):
    """Queued jobs per queue, beside the live and busy workers that serve it."""
    return load_fleet(db, cfg).queue_depths()
