"""What can be asked for (variants), what has been seen (GPUs) and learnt (tuned configurations)."""

from fastapi import APIRouter
from sqlalchemy import select

from api.deps import SessionDep
from api.models import Gpu, TunedConfig
from api.schemas import GpuOut, TunedConfigOut, VariantOut
from kernels.registry import VARIANTS

router = APIRouter(prefix="/api", tags=["catalog"])


@router.get("/variants", response_model=list[VariantOut])
def list_variants():
    return [spec.describe() for spec in VARIANTS.values()]


@router.get("/gpus", response_model=list[GpuOut])
def list_gpus(db: SessionDep):
    return db.scalars(select(Gpu).order_by(Gpu.model, Gpu.name, Gpu.id)).all()


@router.get("/tuned", response_model=list[TunedConfigOut])
def list_tuned(db: SessionDep, gpu: str | None = None, variant: str | None = None):
    """Best configurations found by autotune jobs; bench jobs use them by default."""
    query = select(TunedConfig).order_by(TunedConfig.gpu_model, TunedConfig.variant, TunedConfig.m)
    if gpu:
        query = query.where(TunedConfig.gpu_model == gpu)
    if variant:
        query = query.where(TunedConfig.variant == variant)
    return db.scalars(query).all()
