"""Sweep: GFLOPS against size for chosen variants and GPU models.

Each point is the newest result for its (GPU model, variant, size), optionally at one
commit; a newest result that failed verification is shown as a failure, not a speed.
"""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.models import Commit, Gpu, Result
from dashboard.filters import Size
from dashboard.queries import FP32_ONLY


@dataclass(frozen=True)
class SweepFilter:
    gpus: tuple[str, ...] = ()  # GPU models; empty: all
    variants: tuple[str, ...] = ()  # empty: all
    mode: str | None = None
    sha: str | None = None  # a commit, or a prefix of one; None: newest results whatever the commit


@dataclass(frozen=True)
class SweepPoint:
    gpu: str
    variant: str
    size: Size
    verified: bool
    gflops: float | None
    cublas_gflops: float | None
    noise: float | None
    error: str | None
    sha: str | None
    result_id: int


def load_sweep(db: Session, f: SweepFilter) -> list[SweepPoint]:
    where = [Result.mode == f.mode, FP32_ONLY]
    if f.gpus:
        where.append(Gpu.model.in_(f.gpus))
    if f.variants:
        where.append(Result.variant.in_(f.variants))
    newest = select(func.max(Result.id)).join(Gpu, Result.gpu_id == Gpu.id)
    if f.sha:
        newest = newest.join(Commit, Result.commit_id == Commit.id)
        where.append(Commit.sha.startswith(f.sha, autoescape=True))
    newest = newest.where(*where).group_by(Gpu.model, Result.variant, Result.m, Result.n, Result.k)
    rows = db.execute(
        select(Gpu.model, Result.variant, Result.m, Result.n, Result.k, Result.verified, Result.gflops,
               Result.cublas_gflops, Result.noise, Result.error, Commit.sha, Result.id)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
    ).all()
    points = [
        SweepPoint(g, v, (m, n, k), ok, gf if ok else None, cb, noise, err, sha, rid)
        for g, v, m, n, k, ok, gf, cb, noise, err, sha, rid in rows
    ]
    # Sorted here, not in SQL: M*N*K overflows a 32-bit integer product in PostgreSQL.
    return sorted(points, key=lambda p: (p.gpu, p.variant, p.size[0] * p.size[1] * p.size[2], p.size))


COLUMNS = ["gpu", "variant", "m", "n", "k", "verified", "gflops", "cublas_gflops", "noise", "error", "sha", "result_id"]


def export_rows(points: list[SweepPoint]) -> list[dict]:
    return [
        {"gpu": p.gpu, "variant": p.variant, "m": p.size[0], "n": p.size[1], "k": p.size[2], "verified": p.verified,
         "gflops": p.gflops, "cublas_gflops": p.cublas_gflops, "noise": p.noise, "error": p.error, "sha": p.sha,
         "result_id": p.result_id}
        for p in points
    ]
