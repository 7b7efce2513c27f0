"""What can be asked for (variants, and how to describe a kernel of one's own), what has been
seen (GPUs) and learnt (tuned configurations)."""

from fastapi import APIRouter, HTTPException
from sqlalchemy import select

from core.web_deps import SessionDep, SettingsDep
from core.records.models import Gpu, TunedConfig
from api.schemas import MAX_SOURCES_PER_JOB, GpuOut, LimitsOut, TunedConfigOut, VariantOut
from core.description.builtins import CUBLAS_SUMMARIES, builtin_kernels
from core.description.kernel_description import KernelDescription

router = APIRouter(prefix="/api", tags=["catalog"])


@router.get("/variants", response_model=list[VariantOut])
def list_variants():
    return [*CUBLAS_SUMMARIES, *(d.summary() for d in builtin_kernels().values())]


@router.get("/kernels/schema")
def kernel_description_schema() -> dict:
    """The JSON Schema of a kernel description: one entry of a kernels folder's gemmwatch.json,
    and one item of a job's `sources` (docs/KERNELS.md explains each field)."""
    return KernelDescription.model_json_schema()


@router.get("/kernels/{name}", response_model=KernelDescription)
def builtin_kernel(name: str):
    """A built-in kernel's own description, files included: a kernels folder entry to start from."""
    found = builtin_kernels().get(name)
    if found is None:
        raise HTTPException(status_code=404, detail=f"no built-in kernel {name!r}; built-ins: {', '.join(builtin_kernels())}")
    return found


@router.get("/limits", response_model=LimitsOut)
def job_limits(cfg: SettingsDep):
    """What one job may hold here (GEMMWATCH_MAX_CASES, _MAX_AUTOTUNE_CASES, _MAX_DIM,
    _MAX_SOURCE_BYTES, _MAX_JOB_BYTES, and the sources a job may carry)."""
    return LimitsOut(max_cases_per_job=cfg.max_cases_per_job, max_autotune_cases=cfg.max_autotune_cases,
                     max_sources_per_job=MAX_SOURCES_PER_JOB, max_dim=cfg.max_dim, max_source_bytes=cfg.max_source_bytes,
                     max_queued_jobs_per_token=cfg.max_queued_jobs_per_token, max_job_bytes=cfg.max_job_bytes)


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
