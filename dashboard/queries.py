"""SQL reads shared by the pages: what the filters can be set to, the job list.

Aggregation happens in the database (GROUP BY); Python only ever sees summary rows.
"""

from dataclasses import dataclass

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from core.description.form_keys import DEFAULT_KEY
from core.verdicts.regression import AB_MODE  # a confirmation's results belong on its job page only
from core.records.models import Commit, Gpu, Job, Result
from dashboard.filters import Size, by_flops


@dataclass(frozen=True)
class Catalog:
    """What the filter menus offer."""

    gpus: list[str]  # GPU models
    modes: list[str]
    sizes: list[Size]  # sizes measured in the chosen mode and form
    variants: list[str]
    forms: list[str]  # GEMM form keys measured in the chosen mode (all modes where none is chosen)


def of_precision(precision: str):
    """A chart shows one precision (compute mode): each result is measured against cuBLAS in its
    own, so FP32, TF32, FP16 and BF16 figures are never mixed in one chart."""
    return Result.compute_mode == precision


def of_form(form: str):
    """A chart shows one GEMM form (core/description/gemm_form.py): a TN figure and an NN one of the same
    kernel name are different GEMMs, so they never share a line, a ladder or a comparison."""
    return Result.form == form


def distinct(db: Session, cols: list, where=(), cap: int = 1000) -> list[tuple]:
    """Distinct values of an index's leading columns: a loose index scan, in one statement.

    Each step of a recursive CTE asks the index for the first row after the last one found (one
    probe per column), so a few dozen sizes or variants cost a few dozen probes: a GROUP BY would
    read every result, and PostgreSQL has no skip scan before version 18. One statement, not a
    query per value: the menus of every page read this, and a round trip each (through the ORM)
    cost more than the probes themselves.
    """
    names = [col.key for col in cols]

    def first_after(found=None) -> list:
        """The first index entry (as one labelled scalar subquery per column) after `found`'s row."""
        after = list(where)
        if found is not None:
            last = [found.c[name] for name in names]
            after.append(tuple_(*cols) > tuple_(*last) if len(cols) > 1 else cols[0] > last[0])
        return [select(col).where(*after).order_by(*cols).limit(1).scalar_subquery().label(name)
                for col, name in zip(cols, names)]

    found = select(*first_after()).cte("found", recursive=True)
    found = found.union_all(select(*first_after(found)).where(found.c[names[0]].is_not(None)))
    rows = db.execute(select(*(found.c[name] for name in names)).where(found.c[names[0]].is_not(None)).limit(cap))
    return [tuple(row) for row in rows]


def catalog(db: Session, mode: str | None = None, form: str = DEFAULT_KEY) -> Catalog:
    # GPU models from the GPU table (a row per card a worker has used); the rest from results,
    # through ix_result_dashboard (mode, form, m, n, k, ...) and ix_result_history (variant, ...).
    gpus = list(db.scalars(select(Gpu.model).distinct().order_by(Gpu.model)))
    modes = [m for (m,) in distinct(db, [Result.mode]) if m != AB_MODE]
    sizes = distinct(db, [Result.m, Result.n, Result.k], [Result.mode == mode, of_form(form)]) if mode else []
    variants = [v for (v,) in distinct(db, [Result.variant])]
    if mode:
        forms = [f for (f,) in distinct(db, [Result.form], [Result.mode == mode])]
    else:
        forms = sorted({f for m, f in distinct(db, [Result.mode, Result.form]) if m != AB_MODE})
    return Catalog(gpus, modes, sorted(sizes, key=by_flops), variants, forms)


@dataclass(frozen=True)
class Newest:
    gpu: str
    size: Size
    mode: str


def newest(db: Session, gpu: str | None = None, size: Size | None = None, mode: str | None = None,
           verified: bool = True, precision: str | None = None, form: str | None = None) -> Newest | None:
    """The GPU model, size and mode of the newest result matching what the URL gave: the view
    a page opens on when the URL leaves filters out."""
    where = _given(db, gpu, size, mode, precision, form)
    if verified:
        where.append(Result.verified.is_(True))
    row = db.execute(
        select(Gpu.model, Result.m, Result.n, Result.k, Result.mode)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(Result.id == select(func.max(Result.id)).where(*where).scalar_subquery())
    ).first()
    return Newest(row[0], (row[1], row[2], row[3]), row[4]) if row else None


def newest_kind(db: Session, gpu: str | None = None) -> tuple[str, str] | None:
    """The precision and form of the newest verified result (on that GPU): what a page opens on when
    its URL names neither and nothing is in the default ones (FP32, "rrr"), say an install whose
    only results are an imported FP16 run."""
    where = _given(db, gpu, None, None, None, None) + [Result.verified.is_(True)]
    row = db.execute(select(Result.compute_mode, Result.form)
                     .where(Result.id == select(func.max(Result.id)).where(*where).scalar_subquery())).first()
    return (row[0], row[1]) if row else None


# How far back /history looks for the series to open on: the newest results only, so the choice
# costs one range of the primary key however many results are kept.
RECENT_RESULTS = 5000


def longest_recent(db: Session, gpu: str | None = None, size: Size | None = None, mode: str | None = None,
                   precision: str | None = None, form: str | None = None) -> Newest | None:
    """The GPU model, size and mode, among the newest RECENT_RESULTS verified results matching what
    the URL gave, whose series spans the most commits (the newest of equals): what /history opens
    on, so its first chart is a history, not the one commit the newest result may stand alone in."""
    where = [*_given(db, gpu, size, mode, precision, form), Result.verified.is_(True), Result.commit_id.is_not(None),
             Result.id > select(func.max(Result.id)).scalar_subquery() - RECENT_RESULTS]
    row = db.execute(
        select(Gpu.model, Result.m, Result.n, Result.k, Result.mode)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(*where)
        .group_by(Gpu.model, Result.m, Result.n, Result.k, Result.mode)
        .order_by(func.count(func.distinct(Result.commit_id)).desc(), func.max(Result.id).desc())
        .limit(1)
    ).first()
    return Newest(row[0], (row[1], row[2], row[3]), row[4]) if row else None


def _given(db: Session, gpu: str | None, size: Size | None, mode: str | None, precision: str | None,
           form: str | None) -> list:
    """The conditions on results of what a URL gave (A/B confirmations are never a page's series)."""
    where = [Result.mode != AB_MODE]
    if gpu:
        where.append(Result.gpu_id.in_(gpu_ids(db, gpu)))
    if size:
        where += [Result.m == size[0], Result.n == size[1], Result.k == size[2]]
    if mode:
        where.append(Result.mode == mode)
    if precision:
        where.append(of_precision(precision))
    if form:
        where.append(of_form(form))
    return where


def gpu_ids(db: Session, model: str) -> list[int]:
    """Physical GPUs of a model. Resolved first (a tiny table) so result scans filter on an id."""
    return list(db.scalars(select(Gpu.id).where(Gpu.model == model)))


def commit_ids(db: Session, sha: str) -> tuple[list[int], str | None]:
    """Commit ids for a sha or a unique prefix of one, or the reason it names no single commit."""
    rows = db.execute(select(Commit.id, Commit.sha).where(Commit.sha == sha)).all() or db.execute(
        select(Commit.id, Commit.sha).where(Commit.sha.startswith(sha, autoescape=True)).limit(50)
    ).all()
    shas = {s for _, s in rows}
    if not shas:
        return [], f"no commit {sha!r} is known"
    if len(shas) > 1:
        return [], f"{sha!r} is the start of {len(shas)} commits' shas: give more of it"
    return [i for i, _ in rows], None


def recent_jobs(db: Session, limit: int = 50, status: str | None = None) -> list[Job]:
    query = select(Job).order_by(Job.id.desc()).limit(limit)
    if status:
        query = query.where(Job.status == status)
    return list(db.scalars(query).unique())


JOB_COLUMNS = ["id", "status", "kind", "progress_done", "progress_total", "current_case", "variants", "sizes",
               "gpu", "commit", "created_at", "finished_at", "error"]


def job_row(j: Job) -> dict:
    return {
        "id": j.id, "status": j.status, "kind": j.kind, "progress_done": j.progress_done,
        "progress_total": j.progress_total, "current_case": j.current_case, "variants": j.variants,
        "sizes": j.sizes, "gpu": j.gpu.name if j.gpu else j.gpu_model, "commit": j.commit.sha if j.commit else None,
        "created_at": j.created_at, "finished_at": j.finished_at, "error": j.error,
    }


WORKER_COLUMNS = ["name", "host", "model", "gpu", "gpu_index", "state", "since", "job", "progress", "current_case",
                  "jobs_last_day", "queues", "version", "last_beat_at"]


def worker_row(w) -> dict:
    """One core.jobs.fleet.WorkerView as a flat export row: GET /api/workers' fields, the job spread out."""
    row, job = w.row, w.job
    return {"name": row.name, "host": row.host, "model": row.model, "gpu": row.gpu.name if row.gpu else None,
            "gpu_index": row.gpu_index, "state": w.state, "since": w.since, "job": job.id if job else None,
            "progress": f"{job.progress_done}/{job.progress_total}" if job else None,
            "current_case": job.current_case if job else None, "jobs_last_day": w.jobs_last_day,
            "queues": ",".join(row.queues or []), "version": row.version, "last_beat_at": row.last_beat_at}


RESULT_COLUMNS = ["id", "case_index", "variant", "m", "n", "k", "mode", "form", "tunables", "verified", "rel_error",
                  "median_ms", "gflops", "cublas_gflops", "pct_of_cublas", "n_samples", "noise", "converged", "error"]


def result_row(r: Result) -> dict:
    row = {c: getattr(r, c) for c in RESULT_COLUMNS}
    if not r.verified:  # a wrong kernel has no speed, in exports as on the page
        row.update(median_ms=None, gflops=None, pct_of_cublas=None)
    return row
