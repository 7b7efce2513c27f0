from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from api.deps import SessionDep
from api.models import Commit, Gpu, Result
from api.schemas import ResultOut

router = APIRouter(prefix="/api/results", tags=["results"])

Dim = Annotated[int | None, Query(ge=1, le=1 << 20)]


@router.get("", response_model=list[ResultOut])
def list_results(
    db: SessionDep,
    variant: str | None = None,
    gpu: Annotated[str | None, Query(description="GPU model (H100) or full name")] = None,
    sha: Annotated[str | None, Query(description="commit sha or a prefix of it")] = None,
    m: Dim = None,
    n: Dim = None,
    k: Dim = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 100,
):
    query = select(Result).order_by(Result.id.desc()).limit(limit)
    if variant:
        query = query.where(Result.variant == variant)
    if gpu:
        query = query.join(Gpu, Result.gpu_id == Gpu.id).where((Gpu.model == gpu) | (Gpu.name == gpu))
    if sha:
        query = query.join(Commit, Result.commit_id == Commit.id).where(Commit.sha.startswith(sha, autoescape=True))
    for column, value in ((Result.m, m), (Result.n, n), (Result.k, k)):
        if value is not None:
            query = query.where(column == value)
    return [ResultOut.from_row(r) for r in db.scalars(query).unique()]
