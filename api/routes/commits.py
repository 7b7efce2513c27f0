"""A commit's results and verdicts for other tools: `GET /api/commits/{sha}/export`, in gemmwatch's
versioned schema (core/exchange/commit_export.py, docs/schemas/commit-export-1.json) or in the
Bencher Metric Format (core/exchange/bmf.py)."""

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query
from fastapi.responses import JSONResponse

from core.exchange.bmf import to_bmf
from core.exchange.commit_export import commit_export
from core.records.models import utcnow
from core.verdicts.commit_view import load_commit
from core.verdicts.regression import PairedThresholds, Thresholds
from core.web_deps import SessionDep, SettingsDep

router = APIRouter(prefix="/api/commits", tags=["commits"])


@router.get("/{sha}/export", responses={404: {"description": "no commit of that sha (or prefix) was measured"}})
def export_commit(
    sha: Annotated[str, Path(pattern=r"^[0-9a-fA-F]{4,64}$", description="the commit's sha, or a prefix of 7 digits or more")],
    db: SessionDep,
    cfg: SettingsDep,
    format: Annotated[Literal["gemmwatch", "bmf"], Query(
        description="gemmwatch: schema gemmwatch.commit-export, version 1 (docs/schemas/commit-export-1.json); "
                    "bmf: the Bencher Metric Format, passed results only")] = "gemmwatch",
) -> JSONResponse:
    """Every result of the commit, on every GPU, with the verdict its commit page gives it (a
    confirmation's where one re-measured the case, else its history's against its base by ancestry)."""
    view = load_commit(db, sha, Thresholds.from_settings(cfg), PairedThresholds.from_settings(cfg))
    if not view.commits:
        raise HTTPException(status_code=404, detail=view.reason)
    export = commit_export(view, utcnow())
    body = to_bmf(export) if format == "bmf" else export.model_dump(mode="json", by_alias=True)
    return JSONResponse(body)
