"""Dashboard routes: server-rendered pages that read the database directly."""

from pathlib import Path
from typing import Annotated

import plotly
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from api.deps import SessionDep
from api.models import Job
from dashboard import figures, queries

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
router = APIRouter(tags=["dashboard"], include_in_schema=False)

# plotly.js ships inside the plotly package; the GPU nodes may have no internet, so no CDN.
PLOTLY_JS_DIR = Path(plotly.__file__).parent / "package_data"

Dim = Annotated[int | None, Query(ge=1, le=1 << 20)]


@router.get("/", response_class=HTMLResponse)
def jobs_page(request: Request, db: SessionDep):
    return templates.TemplateResponse(request, "jobs.html", {"jobs": queries.recent_jobs(db)})


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, db: SessionDep, job_id: int):
    job = db.get(Job, job_id) if 1 <= job_id < 2**31 else None
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    return templates.TemplateResponse(request, "job.html", {"job": job})


@router.get("/history", response_class=HTMLResponse)
def history_page(
    request: Request,
    db: SessionDep,
    gpu: str | None = None,
    m: Dim = None,
    n: Dim = None,
    k: Dim = None,
    mode: str | None = None,
):
    f = queries.default_history_filter(db, queries.HistoryFilter(gpu or None, m, n, k, mode or None))
    fig = figures.history_figure(queries.history_points(db, f), f)
    chart = fig if isinstance(fig, str) else fig.to_html(full_html=False, include_plotlyjs=False, div_id="history-chart")
    return templates.TemplateResponse(
        request,
        "history.html",
        {"f": f, "choices": queries.history_choices(db), "chart": chart, "has_chart": not isinstance(fig, str)},
    )


def mount_dashboard(app: FastAPI) -> None:
    app.mount("/static/plotly", StaticFiles(directory=PLOTLY_JS_DIR), name="plotly")
    app.include_router(router)
