"""Dashboard routes: server-rendered pages that read the database directly.

Every page takes its filters from the URL (a permalink) and `format=csv|json` for the rows
behind the view. A chart with too little data is replaced by the reason.
"""

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated
from urllib.parse import urlencode

import plotly
import plotly.io
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path as PathParam, Query, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from core.web_deps import SessionDep, SettingsDep
from core.jobs.fleet import load_fleet
from core.records.models import Job
from core.verdicts.confirm import confirmation, profiles_of
from core.verdicts import commit_view
from core.verdicts.regression import PairedThresholds, Thresholds
from dashboard import (compare, export, figures, history, job_cancel, job_profile, login, overview, queries, roofline,
                       sweep)
from dashboard.roofline_figure import roofline_figure
from dashboard.filters import (PRECISIONS, Dim, Format, Name, Names, PrecisionParam, Size, clean, form_options,
                               form_param, size_label, size_param)
from dashboard.templating import templates

router = APIRouter(tags=["dashboard"], include_in_schema=False)

# plotly.js ships inside the plotly package; the GPU nodes may have no internet, so no CDN.
PLOTLY_JS_DIR = Path(plotly.__file__).parent / "package_data"

SizeDep = Annotated[Size | None, Depends(size_param)]
FormDep = Annotated[str, Depends(form_param)]  # one GEMM form a view: "rrr" unless the URL asks for another
Sha = Annotated[str | None, Query(max_length=64, pattern=r"^[0-9a-fA-F]*$")]


@dataclass
class Chart:
    """A figure for a page, or the reason there is none (the template shows one or the other).
    The figure is turned into JSON only when a template reads it: a CSV or JSON export of the
    same page needs the reason, never the figure's text."""

    id: str
    figure: figures.Figure | None = None
    reason: str | None = None

    @functools.cached_property
    def figure_json(self) -> str | None:
        """{"data", "layout", "config"}, safe inside <script type="application/json">."""
        if self.figure is None:
            return None
        text = plotly.io.to_json({**self.figure.to_plotly_json(), "config": {"displaylogo": False, "responsive": True}},
                                 validate=False)
        return text.translate(_SCRIPT_SAFE)


# Inside a <script> element only "</script" or "<!--" could end or bend it: with every <, > and &
# written as a JSON escape, the block holds neither, whatever the figure's text.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def chart(div_id: str, fig: figures.Figure | str) -> Chart:
    return Chart(div_id, reason=fig) if isinstance(fig, str) else Chart(div_id, figure=fig)


def render(request: Request, fmt: str, view: str, template: str, context: dict, *, filters: dict,
           columns: list[str], rows: list[dict], reason: str | None = None, **json_extra):
    if fmt == "csv":
        return export.csv_response(view, columns, rows)
    if fmt == "json":
        return export.json_response(view, filters, rows, reason, **json_extra)
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "format"]
    exports = {f: f"{request.url.path}?{urlencode(kept + [('format', f)])}" for f in ("csv", "json")}
    return templates.TemplateResponse(request, template, {**context, "view": view, "exports": exports})


def _reasons(charts: list[Chart]) -> str | None:
    return "; ".join(c.reason for c in charts if c.reason) or None


# -- overview ------------------------------------------------------------------------------

@router.get("/", response_class=HTMLResponse)
def overview_page(request: Request, db: SessionDep, size: SizeDep, form: FormDep, gpu: Name = None, mode: Name = None,
                  precision: PrecisionParam = "fp32", format: Format = "html"):
    if not (size and mode):  # open on the newest result's size and mode
        newest = (queries.newest(db, gpu, size, mode, precision=precision, form=form)
                  or queries.newest(db, gpu, size, mode, verified=False, precision=precision, form=form))
        kind = None if newest or {"precision", "form"} & set(request.query_params) else queries.newest_kind(db, gpu)
        if kind:  # nothing in FP32 "rrr" and the URL chose neither: the newest result's precision and form
            precision, form = kind
            newest = queries.newest(db, gpu, size, mode, precision=precision, form=form)
        size, mode = size or (newest.size if newest else None), mode or (newest.mode if newest else None)
    cat = queries.catalog(db, mode, form)
    ladders = overview.load_ladders(db, size, mode, gpu, precision, form) if size and mode else []
    charts = [chart(f"ladder-{i}", figures.ladder_figure(lad, size, mode, precision, form))
              for i, lad in enumerate(ladders)]
    if not cat.modes:
        reason = ("No results yet: run gemmwatch submit (e.g. gemmwatch submit --variants naive,smem_tiled --size 4096) "
                  "on a server with a GPU worker, or load the demo's measured figures with gemmwatch demo. Each GPU's "
                  "ladder then appears here.")
    elif not ladders:
        reason = (f"No {figures.what(precision, form)} yet{figures.scope(gpu, size, mode)}: choose another GPU, size, "
                  f"mode, precision or form. To add results, {figures.GET_RESULTS}.")
    else:
        reason = None
    filters = {"gpu": gpu, "size": size_label(size) if size else None, "mode": mode, "precision": precision,
               "form": form}
    return render(request, format, "overview", "overview.html",
                  {"cat": cat, "gpu": gpu, "size": size, "mode": mode, "precision": precision,
                   "precisions": PRECISIONS, "form": form, "forms": form_options(cat.forms, form),
                   "ladders": list(zip(ladders, charts)), "reason": reason},
                  filters=filters, columns=overview.COLUMNS, rows=overview.export_rows(ladders, form),
                  reason=reason or _reasons(charts))


# -- history -------------------------------------------------------------------------------

@router.get("/history", response_class=HTMLResponse)
def history_page(request: Request, db: SessionDep, cfg: SettingsDep, size: SizeDep, form: FormDep, gpu: Name = None,
                 mode: Name = None, last: Annotated[int, Query(ge=1, le=history.MAX_LAST)] = history.DEFAULT_LAST,
                 precision: PrecisionParam = "fp32", format: Format = "html"):
    # What the URL left out: the recent series of the most commits, else the newest result's (one
    # posted without a commit), so the page opens on a history.
    opened = None if (gpu and size and mode) else (
        queries.longest_recent(db, gpu, size, mode, precision=precision, form=form)
        or queries.newest(db, gpu, size, mode, precision=precision, form=form))
    if opened:
        gpu, size, mode = gpu or opened.gpu, size or opened.size, mode or opened.mode
    cat = queries.catalog(db, mode, form)
    f = history.HistoryFilter(gpu, size, mode, last, precision, form)
    h = history.load_history(db, f, Thresholds.from_settings(cfg))
    c = chart("history-chart", figures.history_figure(h))
    filters = {"gpu": gpu, "size": size_label(size) if size else None, "mode": mode, "last": last,
               "precision": precision, "form": form}
    return render(request, format, "history", "history.html",
                  {"cat": cat, "f": f, "h": h, "chart": c, "precisions": PRECISIONS,
                   "forms": form_options(cat.forms, form)},
                  filters=filters, columns=history.COLUMNS, rows=history.export_rows(h), reason=c.reason)


# -- sweep ---------------------------------------------------------------------------------

@router.get("/sweep", response_class=HTMLResponse)
def sweep_page(request: Request, db: SessionDep, form: FormDep, gpu: Names = [], variant: Names = [],
               mode: Name = None, sha: Sha = None, vary: sweep.Vary = "volume", m: Dim = None, n: Dim = None,
               k: Dim = None,
               precision: PrecisionParam = "fp32", format: Format = "html"):
    if not mode:
        newest = (queries.newest(db, precision=precision, form=form)
                  or queries.newest(db, verified=False, precision=precision, form=form))
        mode = newest.mode if newest else None
    cat = queries.catalog(db, mode, form)
    f = sweep.settle(sweep.SweepFilter(clean(gpu), clean(variant), mode, sha or None, vary, m, n, k, precision, form),
                     cat.sizes)
    points = sweep.load_sweep(db, f) if f.mode else []
    c = chart("sweep-chart", figures.sweep_figure(points, f))
    filters = {**asdict(f), "gpus": list(f.gpus), "variants": list(f.variants)}
    return render(request, format, "sweep", "sweep.html",
                  {"cat": cat, "f": f, "chart": c, "held": sweep.held_menus(f, cat.sizes), "precisions": PRECISIONS,
                   "pairs": sweep.held_pairs(f, cat.sizes), "forms": form_options(cat.forms, form)},
                  filters=filters, columns=sweep.COLUMNS, rows=sweep.export_rows(points, form), reason=c.reason)


# -- compare -------------------------------------------------------------------------------

@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request, db: SessionDep, cfg: SettingsDep, form: FormDep, by: compare.By = "commit",
                 a: Name = None, b: Name = None, gpu: Name = None, sha: Sha = None, mode: Name = None,
                 precision: PrecisionParam = "fp32", format: Format = "html"):
    # The newest result names the GPU and the mode a comparison holds fixed, where the URL does not.
    known = (gpu if by == "mode" else mode and (gpu or by == "gpu"))
    newest = None if known else queries.newest(db, gpu if by != "gpu" else None, None, mode if by != "mode" else None,
                                               precision=precision, form=form)
    mode = mode or (newest.mode if newest else None)
    cat = queries.catalog(db, mode, form)
    if by != "gpu":
        gpu = gpu or (newest.gpu if newest else None)
    options = {"commit": lambda: compare.commit_choices(db, gpu), "gpu": lambda: cat.gpus,
               "mode": lambda: cat.modes}[by]()
    # Default to the two newest commits (B the newer), or the first two GPU models or modes.
    if not (a or b) and len(options) >= 2:
        a, b = (options[1], options[0]) if by == "commit" else (options[0], options[1])
    f = compare.CompareFilter(by, a or None, b or None, gpu, sha or None, mode, precision, form)
    comp = compare.load_comparison(db, f, cfg.confirm_min_change)
    if not (f.a and f.b) and len(options) < 2:  # nothing to choose from yet: say so, and how to get some
        there = "is only one" if options else "are none"
        comp.reason = (f"A comparison needs two {compare.WHAT[by]} with results, and there {there} yet: "
                       f"{figures.GET_RESULTS}.")
    c = chart("compare-chart", figures.compare_figure(comp))
    return render(request, format, "compare", "compare.html",
                  {"cat": cat, "f": f, "comp": comp, "options": options, "chart": c, "precisions": PRECISIONS,
                   "forms": form_options(cat.forms, form)},
                  filters=asdict(f), columns=compare.COLUMNS, rows=compare.export_rows(comp), reason=c.reason)


# -- roofline ------------------------------------------------------------------------------

@router.get("/roofline", response_class=HTMLResponse)
def roofline_page(request: Request, db: SessionDep, size: SizeDep, form: FormDep, gpu: Name = None, mode: Name = None,
                  sha: Sha = None, format: Format = "html"):
    if not (gpu and mode):
        newest = queries.newest(db, gpu, size, mode, form=form)
        gpu, mode = gpu or (newest.gpu if newest else None), mode or (newest.mode if newest else None)
    f = roofline.RooflineFilter(gpu, mode, sha or None, size, form)
    ids, why = queries.commit_ids(db, sha) if sha else (None, None)
    r = roofline.Roofline(f, reason=f"commit: {why}.") if why else roofline.load_roofline(db, f, ids)
    c = chart("roofline-chart", roofline_figure(r))
    filters = {**asdict(f), "size": size_label(size) if size else None}
    cat = queries.catalog(db, mode, form)
    return render(request, format, "roofline", "roofline.html",
                  {"cat": cat, "f": f, "r": r, "chart": c, "forms": form_options(cat.forms, form)},
                  filters=filters, columns=roofline.COLUMNS, rows=roofline.export_rows(r), reason=c.reason)


# -- one commit ----------------------------------------------------------------------------

@router.get("/commits/{sha}", response_class=HTMLResponse)
def commit_page(request: Request, db: SessionDep, cfg: SettingsDep,
                sha: Annotated[str, PathParam(min_length=1, max_length=64, pattern=r"^[0-9a-fA-F]+$")],
                format: Format = "html"):
    view = commit_view.load_commit(db, sha, Thresholds.from_settings(cfg), PairedThresholds.from_settings(cfg))
    # Each confirmed row's Profile button, for a visitor whose session may submit jobs (anyone
    # else presses it on the confirmation's job page, where a token can be typed in).
    can_profile = not job_profile.form_state(request, db, None)["needs_token"]
    return render(request, format, "commit", "commit.html", {"c": view, "can_profile": can_profile},
                  filters={"sha": view.sha}, columns=commit_view.COLUMNS, rows=commit_view.export_rows(view),
                  reason=view.reason)


# -- jobs ----------------------------------------------------------------------------------

@router.get("/jobs", response_class=HTMLResponse)
def jobs_page(request: Request, db: SessionDep, status: Name = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 50, format: Format = "html"):
    jobs = queries.recent_jobs(db, limit, status or None)
    return render(request, format, "jobs", "jobs.html", {"jobs": jobs, "status": status},
                  filters={"status": status, "limit": limit}, columns=queries.JOB_COLUMNS,
                  rows=[queries.job_row(j) for j in jobs], reason=None if jobs else "no jobs")


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, db: SessionDep, cfg: SettingsDep, job_id: int, format: Format = "html"):
    job = db.get(Job, job_id) if 1 <= job_id < 2**31 else None
    if job is None:
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    c = chart("job-chart", figures.job_figure(job.results, job.status))
    profiles = profiles_of(db, job.id) if job.kind == "confirm" else {}
    confirmed = confirmation(job, PairedThresholds.from_settings(cfg), profiles) if job.kind == "confirm" else None
    waiting = load_fleet(db, cfg).waiting_reason(job) if job.status == "queued" else None
    return render(request, format, "job", "job.html", {"job": job, "chart": c, "confirmation": confirmed,
                                                       "profiles": sorted(profiles.values(), key=lambda p: p.result_id),
                                                       "results_by_id": {r.id: r for r in job.results},
                                                       "waiting": waiting,
                                                       "cancel": job_cancel.form_state(request, db, job),
                                                       "profile_form": job_profile.form_state(request, db, job)},
                  filters={"id": job_id}, columns=queries.RESULT_COLUMNS,
                  rows=[queries.result_row(r) for r in job.results], reason=c.reason,
                  job={**queries.job_row(job), "waiting": waiting})


# -- fleet ---------------------------------------------------------------------------------

@router.get("/fleet", response_class=HTMLResponse)
def fleet_page(request: Request, db: SessionDep, cfg: SettingsDep, format: Format = "html"):
    fleet = load_fleet(db, cfg, with_history=True)
    rows = [queries.worker_row(w) for w in fleet.workers]
    queues = fleet.queue_depths()
    return render(request, format, "fleet", "fleet.html", {"workers": fleet.workers, "queues": queues},
                  filters={}, columns=queries.WORKER_COLUMNS, rows=rows,
                  reason=None if rows else "no worker has registered yet", queues=queues)


DASHBOARD_JS_DIR = Path(__file__).parent / "static"


def mount_dashboard(app: FastAPI) -> None:
    app.mount("/static/plotly", StaticFiles(directory=PLOTLY_JS_DIR), name="plotly")
    app.mount("/static/dashboard", StaticFiles(directory=DASHBOARD_JS_DIR), name="dashboard-js")
    app.include_router(login.router)
    # Pages and their CSV/JSON exports: behind the login when GEMMWATCH_AUTH_READS is on.
    app.include_router(router, dependencies=[Depends(login.require_dashboard_reader)])
    app.include_router(job_cancel.router, dependencies=[Depends(login.require_dashboard_reader)])
    app.include_router(job_profile.router, dependencies=[Depends(login.require_dashboard_reader)])
