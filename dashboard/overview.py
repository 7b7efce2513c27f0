"""Overview: per GPU, the latest ladder — each variant's newest result at one size and mode.

A ladder is drawn per GPU name (the SKU, e.g. "NVIDIA H100 80GB HBM3"), not per model:
an H100 SXM and an H100 PCIe share the model "H100" but not their SM count, so their
FP32 peaks differ.
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.models import Commit, Gpu, Result
from core.precision import flops_per_sm_per_clock
from core.result_env import max_sm_clock_of
from dashboard.filters import Size
from dashboard.queries import of_precision


@dataclass(frozen=True)
class Peak:
    gflops: float | None
    how: str  # the arithmetic, or why there is no number


def peak(sm_count: int | None, compute_capability: str | None, max_sm_clock_mhz: float | None,
         precision: str = "fp32") -> Peak:
    """SMs x the precision's dense flops per SM per clock (core/precision.py: FP32 lanes x 2, an
    FMA being two flops; tensor cores per compute capability) x the maximum SM clock, as NVML
    reports it."""
    label = precision.upper()
    per_clock = flops_per_sm_per_clock(compute_capability, precision)
    if not sm_count:
        return Peak(None, f"{label} peak unknown: the GPU's SM count was not recorded")
    if not max_sm_clock_mhz:
        return Peak(None, f"{label} peak unknown: no maximum SM clock recorded for this GPU (env.gpu.max_sm_clock_mhz)")
    if per_clock is None:
        return Peak(None, f"{label} peak unknown: no {label} rate known for compute capability {compute_capability}")
    gflops = sm_count * per_clock * max_sm_clock_mhz / 1e3
    rate = f"{per_clock // 2} lanes × 2" if precision == "fp32" else f"{per_clock} flops per clock"
    return Peak(gflops, f"{label} peak {gflops / 1e3:,.1f} TFLOPS = {sm_count} SMs × {rate} × {max_sm_clock_mhz:g} MHz")


@dataclass(frozen=True)
class Rung:
    variant: str
    verified: bool
    gflops: float | None
    cublas_gflops: float | None
    pct_of_cublas: float | None
    noise: float | None
    error: str | None
    sha: str | None
    job_id: int
    result_id: int
    created_at: datetime


@dataclass
class Ladder:
    gpu_name: str
    gpu_model: str
    peak: Peak
    rungs: list[Rung]  # verified ones ascending by GFLOPS, failures first

    def pct_of_peak(self, r: Rung) -> float | None:
        if r.gflops is None or not self.peak.gflops:
            return None
        return 100 * r.gflops / self.peak.gflops


def load_ladders(db: Session, size: Size, mode: str, gpu_model: str | None = None,
                 precision: str = "fp32") -> list[Ladder]:
    m, n, k = size
    where = [Result.m == m, Result.n == n, Result.k == k, Result.mode == mode, of_precision(precision)]
    if gpu_model:
        where.append(Gpu.model == gpu_model)
    newest = (
        select(func.max(Result.id))
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(*where)
        .group_by(Gpu.name, Result.variant)
    )
    rows = db.execute(
        select(Gpu.name, Gpu.model, Result.variant, Result.verified, Result.gflops, Result.cublas_gflops,
               Result.pct_of_cublas, Result.noise, Result.error, Commit.sha, Result.job_id, Result.id,
               Result.created_at)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
        .order_by(Gpu.name)
    ).all()
    by_gpu: dict[tuple[str, str], list[Rung]] = {}
    for name, model, *rest in rows:
        r = Rung(*rest)
        if not r.verified:  # a wrong kernel has no speed
            r = Rung(**{**r.__dict__, "gflops": None, "pct_of_cublas": None})
        by_gpu.setdefault((name, model), []).append(r)
    ladders = []
    for (name, model), rungs in by_gpu.items():
        rungs.sort(key=lambda r: (r.verified, r.gflops or 0.0, r.variant))
        ladders.append(Ladder(name, model, _peak_of(db, name, max(r.result_id for r in rungs), precision), rungs))
    return ladders


def _peak_of(db: Session, gpu_name: str, result_id: int, precision: str) -> Peak:
    """SM count and compute capability are on the GPU row; the clock only in results' env."""
    sm_count, cc = db.execute(
        select(func.max(Gpu.sm_count), func.max(Gpu.compute_capability)).where(Gpu.name == gpu_name)
    ).one()
    clock = max_sm_clock_of(db.scalar(select(Result.env).where(Result.id == result_id)))
    return peak(sm_count, cc, clock, precision)


COLUMNS = ["gpu", "variant", "verified", "gflops", "cublas_gflops", "pct_of_cublas", "pct_of_fp32_peak",
           "fp32_peak_gflops", "noise", "error", "sha", "job_id", "result_id", "created_at"]


def export_rows(ladders: list[Ladder]) -> list[dict]:
    return [
        {"gpu": lad.gpu_name, "variant": r.variant, "verified": r.verified, "gflops": r.gflops,
         "cublas_gflops": r.cublas_gflops, "pct_of_cublas": r.pct_of_cublas, "pct_of_fp32_peak": lad.pct_of_peak(r),
         "fp32_peak_gflops": lad.peak.gflops, "noise": r.noise, "error": r.error, "sha": r.sha,
         "job_id": r.job_id, "result_id": r.result_id, "created_at": r.created_at}
        for lad in ladders for r in lad.rungs
    ]
