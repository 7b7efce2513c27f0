"""Compare: two commits on one GPU model, two GPU models at one commit, or two timing modes,
as B's speed over A's per variant and size, with an interval, sorted by the size of the change
(Perfherder's compare view is the model).

Each cell is the newest result for its side, variant and size (the same rule as the
overview and the sweep), so a re-run replaces an earlier number instead of averaging with it.
The interval comes from each side's stored samples (core/results/sample_stats.py speed_ratio).
"""

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.description.timing_modes import mode_words
from core.records.models import Commit, Gpu, Job, Result
from core.results.env_reading import pct_of_peak_of, resources_of
from core.results.sample_stats import SpeedRatio, speed_ratio
from dashboard.filters import Size, size_text
from core.description.form_keys import DEFAULT_KEY
from dashboard.queries import commit_ids, gpu_ids, of_form, of_precision

By = Literal["commit", "gpu", "mode"]
WHAT = {"commit": "commits", "gpu": "GPU models", "mode": "timing modes"}


@dataclass(frozen=True)
class CompareFilter:
    by: By = "commit"
    a: str | None = None  # commit sha (or prefix), GPU model, or timing mode
    b: str | None = None
    gpu: str | None = None  # the GPU model when comparing commits or modes
    sha: str | None = None  # the commit when comparing GPU models or modes; None: newest results
    mode: str | None = None  # the timing mode when comparing commits or GPU models
    precision: str = "fp32"  # compute mode (dashboard/filters.py PRECISIONS)
    form: str = DEFAULT_KEY  # GEMM form key (core/description/gemm_form.py): both sides of one form


@dataclass(frozen=True)
class Cell:
    verified: bool
    gflops: float | None
    noise: float | None
    error: str | None
    sha: str | None
    result_id: int
    resources: dict | None = None  # registers, shared memory, occupancy (worker/gpu/resources.py)
    median_ms: float | None = None
    samples_ms: tuple[float, ...] = ()
    pct_of_cublas: float | None = None
    pct_of_peak: float | None = None  # of the GPU's peak for the precision (env.peak)


@dataclass(frozen=True)
class CompareRow:
    variant: str
    size: Size
    a: Cell | None
    b: Cell | None
    band: float = 0.0  # a change smaller than this reads as no change (GEMMWATCH_CONFIRM_MIN_CHANGE)

    @property
    def label(self) -> str:
        return f"{self.variant} {size_text(self.size)}"

    @cached_property  # sorting, the chart, the table and the export all read it
    def change(self) -> SpeedRatio | None:
        """B's speed over A's with its interval; only when both sides have a verified speed."""
        if not (self.a and self.b and self.a.gflops and self.b.gflops):
            return None
        return speed_ratio(self.a.median_ms, self.b.median_ms, list(self.a.samples_ms), list(self.b.samples_ms),
                           self.band)

    @property
    def delta_pct(self) -> float | None:
        """How much faster B is than A, in percent."""
        c = self.change
        return 100 * (c.ratio - 1) if c else None


def by_change(rows: list["CompareRow"]) -> list["CompareRow"]:
    """The biggest change first, either way (its log, so 0.5 and 2 weigh the same); rows with
    nothing to compare after, by size."""
    def key(r: CompareRow):
        c = r.change
        return (0, -abs(math.log(c.ratio)), r.label) if c else (1, r.size[0] * r.size[1] * r.size[2], r.variant)
    return sorted(rows, key=key)


@dataclass
class Comparison:
    f: CompareFilter
    rows: list[CompareRow] = field(default_factory=list)
    reason: str | None = None  # why there is nothing to compare
    band: float = 0.0

    @property
    def where(self) -> str:
        """What both sides share: the GPU, the commit, the timing mode that is not compared."""
        f = self.f
        held = [f"on {f.gpu}" if f.by != "gpu" and f.gpu else "", f"at {f.sha}" if f.by != "commit" and f.sha else "",
                mode_words(f.mode) if f.by != "mode" and f.mode else ""]
        return ", ".join(h for h in held if h)


def commit_choices(db: Session, gpu_model: str | None, limit: int = 100) -> list[str]:
    """The newest commits that jobs ran on this GPU model (jobs, a far smaller table than results)."""
    commit_time = func.coalesce(Commit.committed_at, Commit.created_at)
    query = select(Commit.sha).join(Job, Job.commit_id == Commit.id)
    if gpu_model:
        query = query.where(Job.gpu_id.in_(gpu_ids(db, gpu_model)))
    query = query.group_by(Commit.sha).order_by(func.max(commit_time).desc()).limit(limit)
    return list(db.scalars(query))


def load_comparison(db: Session, f: CompareFilter, band: float = 0.0) -> Comparison:
    out = Comparison(f, band=band)
    if not (f.a and f.b):
        out.reason = f"A comparison needs two {WHAT[f.by]} with results; pick A and B."
        return out
    if f.a == f.b:
        out.reason = f"A and B are the same {f.by} ({f.a}): pick two different ones."
        return out
    where = [of_precision(f.precision), of_form(f.form)]
    if f.by != "mode":
        where.append(Result.mode == f.mode)
    if f.by != "gpu":
        where.append(Result.gpu_id.in_(gpu_ids(db, f.gpu or "")))
    if f.by != "commit" and f.sha:
        ids, why = commit_ids(db, f.sha)
        if why:
            out.reason = f"commit: {why}."
            return out
        where.append(Result.commit_id.in_(ids))
    if f.by == "commit":
        sides = {}
        for key in ("a", "b"):
            ids, why = commit_ids(db, getattr(f, key))
            if why:
                out.reason = f"{key.upper()}: {why}."
                return out
            sides.update({i: key for i in ids})
        side_col = Result.commit_id
        where.append(Result.commit_id.in_(sides))
    else:
        sides = {f.a: "a", f.b: "b"}
        side_col = Gpu.model if f.by == "gpu" else Result.mode
        where.append(side_col.in_(sides))

    newest = (
        select(func.max(Result.id))
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(*where)
        .group_by(side_col, Result.variant, Result.m, Result.n, Result.k)
    )
    rows = db.execute(
        select(side_col, Result.variant, Result.m, Result.n, Result.k, Result.verified, Result.gflops,
               Result.noise, Result.error, Commit.sha, Result.id, Result.env, Result.median_ms, Result.samples_ms,
               Result.pct_of_cublas)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
    ).all()
    cells: dict[tuple, dict[str, Cell]] = {}
    for side, variant, m, n, k, ok, gf, noise, err, sha, rid, env, median_ms, samples, pct in rows:
        samples = tuple(x for x in samples if isinstance(x, (int, float))) if isinstance(samples, list) else ()
        cells.setdefault((variant, (m, n, k)), {})[sides[side]] = Cell(
            ok, gf if ok else None, noise, err, sha, rid, resources_of(env), median_ms if ok else None, samples,
            pct if ok else None, pct_of_peak_of(env) if ok else None)
    out.rows = by_change([CompareRow(v, s, c.get("a"), c.get("b"), band) for (v, s), c in cells.items()])
    if not out.rows:
        # Only what is known is named: a GPU or mode the database has none of is left out, never "None".
        held = [f"on {f.gpu}" if f.by != "gpu" and f.gpu else "", f"at commit {f.sha}" if f.by != "commit" and f.sha else "",
                f"in {f.mode} mode" if f.by != "mode" and f.mode else ""]
        kind = "results" if f.precision == "fp32" else f"{f.precision.upper()} results"
        out.reason = " ".join([f"No {kind} for {f.a} or {f.b}"] + [h for h in held if h]) + ": choose other sides or filters."
    elif not any(r.change for r in out.rows):
        out.reason = (f"No variant and size has a verified speed on both {f.a} and {f.b}: "
                      "the table lists what each side has.")
    return out


COLUMNS = ["variant", "form", "m", "n", "k", "a", "a_verified", "a_gflops", "a_noise", "a_pct_of_cublas",
           "a_pct_of_peak",
           "b", "b_verified", "b_gflops", "b_noise", "b_pct_of_cublas", "b_pct_of_peak", "ratio", "low", "high",
           "confidence", "direction", "delta_pct"]


def export_rows(c: Comparison) -> list[dict]:
    def side(cell: Cell | None, key: str) -> dict:
        return {f"{key}_{name}": getattr(cell, name) if cell else None
                for name in ("verified", "gflops", "noise", "pct_of_cublas", "pct_of_peak")}

    def change(r: CompareRow) -> dict:
        ch = r.change
        return {"ratio": ch.ratio if ch else None, "low": ch.low if ch else None, "high": ch.high if ch else None,
                "confidence": ch.confidence if ch else None, "direction": ch.direction if ch else None,
                "delta_pct": r.delta_pct}

    return [
        {"variant": r.variant, "form": c.f.form, "m": r.size[0], "n": r.size[1], "k": r.size[2], "a": c.f.a,
         **side(r.a, "a"),
         "b": c.f.b, **side(r.b, "b"), **change(r)}
        for r in c.rows
    ]
