from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query
from sqlalchemy import select

from api.deps import SessionDep
from api.models import Commit, Gpu, Result
from api.schemas import ResultDetailOut, ResultOut

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


@router.get("/{result_id}", response_model=ResultDetailOut)
def get_result(result_id: Annotated[int, Path(ge=1, le=2**31 - 1)], db: SessionDep):
    """One result with its raw samples (the cuBLAS samples are in env.cublas_samples_ms)."""
    row = db.get(Result, result_id)
    if row is None:
        raise HTTPException(status_code=404, detail=f"no result {result_id}")
    return ResultDetailOut.from_row(row)
