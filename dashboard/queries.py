"""SQL reads for the pages. Aggregation happens in the database, not in Python."""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.models import Commit, Gpu, Job, Result


@dataclass(frozen=True)
class HistoryFilter:
    gpu: str | None = None  # GPU model, e.g. H100
    m: int | None = None
    n: int | None = None
    k: int | None = None
    mode: str | None = None


@dataclass(frozen=True)
class HistoryPoint:
    variant: str
    sha: str
    commit_time: object
    gflops: float
    cublas_gflops: float | None
    pct_of_cublas: float | None
    noise: float | None
    n_results: int


def recent_jobs(db: Session, limit: int = 50) -> list[Job]:
    return list(db.scalars(select(Job).order_by(Job.id.desc()).limit(limit)).unique())


def history_choices(db: Session) -> dict[str, list]:
    """What the history filters can be set to: only values that have verified results."""
    verified = Result.verified.is_(True)
    gpus = db.scalars(
        select(Gpu.model).join(Result, Result.gpu_id == Gpu.id).where(verified).distinct().order_by(Gpu.model)
    ).all()
    sizes = db.execute(
        select(Result.m, Result.n, Result.k).where(verified).distinct().order_by(Result.m, Result.n, Result.k)
    ).all()
    modes = db.scalars(select(Result.mode).where(verified).distinct().order_by(Result.mode)).all()
    return {"gpus": list(gpus), "sizes": [tuple(s) for s in sizes], "modes": list(modes)}


def default_history_filter(db: Session, f: HistoryFilter) -> HistoryFilter:
    """Fill what the URL left out from the newest verified result, so the page opens on data."""
    if f.gpu and f.m and f.n and f.k and f.mode:
        return f
    newest = db.execute(
        select(Gpu.model, Result.m, Result.n, Result.k, Result.mode)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(Result.verified.is_(True))
        .order_by(Result.id.desc())
        .limit(1)
    ).first()
    if newest is None:
        return f
    gpu, m, n, k, mode = newest
    if f.m and f.n and f.k:
        m, n, k = f.m, f.n, f.k
    return HistoryFilter(gpu=f.gpu or gpu, m=m, n=n, k=k, mode=f.mode or mode)


def history_points(db: Session, f: HistoryFilter) -> list[HistoryPoint]:
    """Verified results per (commit, variant), averaged in SQL, oldest commit first.

    Unverified results are excluded: a wrong kernel has no speed.
    """
    commit_time = func.coalesce(Commit.committed_at, Commit.created_at)
    query = (
        select(
            Result.variant,
            Commit.sha,
            func.min(commit_time).label("commit_time"),
            func.avg(Result.gflops),
            func.avg(Result.cublas_gflops),
            func.avg(Result.pct_of_cublas),
            func.avg(Result.noise),
            func.count(Result.id),
        )
        .join(Commit, Result.commit_id == Commit.id)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(Result.verified.is_(True), Result.gflops.is_not(None))
        .group_by(Result.variant, Commit.id, Commit.sha)
        .order_by(func.min(commit_time), Commit.id)
    )
    if f.gpu:
        query = query.where(Gpu.model == f.gpu)
    for column, value in ((Result.m, f.m), (Result.n, f.n), (Result.k, f.k), (Result.mode, f.mode)):
        if value is not None:
            query = query.where(column == value)
    return [HistoryPoint(*row) for row in db.execute(query).all()]
