"""Overview: per GPU, the latest ladder — each variant's newest result at one size and mode.

A ladder is drawn per GPU name (the SKU, e.g. "NVIDIA H100 80GB HBM3"), not per model:
an H100 SXM and an H100 PCIe share the model "H100" but not their SM count, so their
FP32 peaks differ.
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.records.models import Commit, Gpu, Result
from core.results.result_status import NOT_APPLICABLE
from dashboard.filters import Size
from core.description.form_keys import DEFAULT_KEY
from dashboard.queries import of_form, of_precision
from dashboard.roofs import Peak, gpu_roofs


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
                 precision: str = "fp32", form: str = DEFAULT_KEY) -> list[Ladder]:
    m, n, k = size
    # A case not run by design (another GPU target, sizes compiled in) is no rung: it has no speed and
    # failed nothing.
    where = [Result.m == m, Result.n == n, Result.k == k, Result.mode == mode, of_precision(precision), of_form(form),
             Result.status != NOT_APPLICABLE]
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
        ladders.append(Ladder(name, model, gpu_roofs(db, name, max(r.result_id for r in rungs), precision)[0], rungs))
    return ladders


COLUMNS = ["gpu", "variant", "form", "verified", "gflops", "cublas_gflops", "pct_of_cublas", "pct_of_fp32_peak",
           "fp32_peak_gflops", "noise", "error", "sha", "job_id", "result_id", "created_at"]


def export_rows(ladders: list[Ladder], form: str = DEFAULT_KEY) -> list[dict]:
    return [
        {"gpu": lad.gpu_name, "variant": r.variant, "form": form, "verified": r.verified, "gflops": r.gflops,
         "cublas_gflops": r.cublas_gflops, "pct_of_cublas": r.pct_of_cublas, "pct_of_fp32_peak": lad.pct_of_peak(r),
         "fp32_peak_gflops": lad.peak.gflops, "noise": r.noise, "error": r.error, "sha": r.sha,
         "job_id": r.job_id, "result_id": r.result_id, "created_at": r.created_at}
        for lad in ladders for r in lad.rungs
    ]
