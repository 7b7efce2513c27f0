"""What can be asked for (variants) and what has been seen (GPUs)."""

from fastapi import APIRouter
from sqlalchemy import select

from api.deps import SessionDep
from api.models import Gpu
from api.schemas import GpuOut, VariantOut
from kernels.registry import VARIANTS

router = APIRouter(prefix="/api", tags=["catalog"])


@router.get("/variants", response_model=list[VariantOut])
def list_variants():
    return [spec.describe() for spec in VARIANTS.values()]


@router.get("/gpus", response_model=list[GpuOut])
def list_gpus(db: SessionDep):
    return db.scalars(select(Gpu).order_by(Gpu.model, Gpu.name, Gpu.id)).all()
