"""History: GFLOPS per variant across commits for one GPU model, size, timing mode, precision and
GEMM form (a TN figure and an NN one are different GEMMs: never one line).

Commits are ordered by git ancestry where the CI hook sent their parents (each commit after
its parents, core/verdicts/ancestry.py), so a rebased commit with an old date still follows the commit it
was rebased onto; commit time (the date the CI hook sent, else when gemmwatch first saw the
commit) orders what ancestry does not.
Only the newest `last` commits are drawn, plus `window` older ones fetched only to give the
first drawn points a baseline for regression detection.
"""

import statistics
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.verdicts.ancestry import ordered
from core.verdicts.baselines import robust_noise_column
from core.records.models import Commit, Result
from core.verdicts.regression import Point, Thresholds, Verdict, judge
from dashboard.filters import Size
from core.description.form_keys import DEFAULT_KEY
from dashboard.queries import gpu_ids, of_form, of_precision

DEFAULT_LAST = 100
MAX_LAST = 2000


@dataclass(frozen=True)
class HistoryFilter:
    gpu: str | None = None  # GPU model, e.g. H100
    size: Size | None = None
    mode: str | None = None
    last: int = DEFAULT_LAST  # newest commits drawn
    precision: str = "fp32"  # compute mode (dashboard/filters.py PRECISIONS)
    form: str = DEFAULT_KEY  # GEMM form key (core/description/gemm_form.py)


@dataclass(frozen=True)
class HistoryPoint:
    variant: str
    sha: str
    message: str | None
    commit_time: datetime
    gflops: float
    cublas_gflops: float | None
    pct_of_cublas: float | None
    noise: float | None
    n_samples: int
    n_results: int
    verdict: Verdict | None = None


@dataclass
class History:
    f: HistoryFilter
    points: list[HistoryPoint] = field(default_factory=list)  # drawn points, oldest commit first
    commits: list[str] = field(default_factory=list)  # drawn commits' shas, oldest first
    n_unverified: int = 0  # results matching the filter that failed verification

    @property
    def regressions(self) -> list[HistoryPoint]:
        return [p for p in self.points if p.verdict and p.verdict.regression]


def _matching(ids: list[int], f: HistoryFilter):
    m, n, k = f.size
    return (Result.gpu_id.in_(ids), Result.m == m, Result.n == n, Result.k == k, Result.mode == f.mode,
            of_precision(f.precision), of_form(f.form))


def load_history(db: Session, f: HistoryFilter, th: Thresholds) -> History:
    out = History(f)
    ids = gpu_ids(db, f.gpu) if f.gpu else []
    if not ids or f.size is None or f.mode is None:
        return out
    where = (*_matching(ids, f), Result.verified.is_(True))
    commit_time = func.coalesce(Commit.committed_at, Commit.created_at)

    # The newest commits with a verified result for this series, decided in SQL; only columns of
    # ix_result_dashboard are read from result, so PostgreSQL answers from the index alone.
    recent = dict(db.execute(
        select(Result.commit_id, func.min(commit_time))
        .join(Commit, Result.commit_id == Commit.id)
        .where(*where)
        .group_by(Result.commit_id)
        .order_by(func.min(commit_time).desc(), Result.commit_id.desc())
        .limit(f.last + th.window)
    ).all())
    if not recent:
        out.n_unverified = db.scalar(
            select(func.count(Result.id)).where(*_matching(ids, f), Result.verified.is_(False))
        ) or 0
        return out
    # A literal id list (not a join) lets the index filter on commit_id before any row is read.
    rows = db.execute(
        select(
            Result.variant, Commit.sha, Commit.message, Commit.id,
            func.avg(Result.gflops), func.avg(Result.cublas_gflops), func.avg(Result.pct_of_cublas),
            func.avg(robust_noise_column()), func.sum(Result.n_samples), func.count(Result.id),
        )
        .join(Commit, Result.commit_id == Commit.id)
        .where(*where, Result.commit_id.in_(list(recent)), Result.gflops.is_not(None))
        .group_by(Result.variant, Commit.id, Commit.sha, Commit.message)
    ).all()
    rank = _ancestry_rank(db, recent)
    rows.sort(key=lambda r: rank[r[3]])  # oldest commit first

    order: dict[str, None] = {}  # commits' shas, oldest first
    series: dict[str, list[HistoryPoint]] = {}
    for variant, sha, msg, commit_id, g, cb, pct, noise, n_samples, n in rows:
        t = recent[commit_id]
        order.setdefault(sha)
        series.setdefault(variant, []).append(HistoryPoint(variant, sha, msg, t, g, cb, pct, noise, int(n_samples or 0), n))
    drawn = set(list(order)[-f.last:])
    out.commits = [s for s in order if s in drawn]
    for points in series.values():
        verdicts = flag_drawn([Point(p.gflops, p.noise, p.n_samples) for p in points],
                              [p.sha in drawn for p in points], th)
        out.points += [_with(p, v) for p, v in zip(points, verdicts) if p.sha in drawn]
    return out


def _ancestry_rank(db: Session, recent: dict[int, datetime]) -> dict[int, int]:
    commits = db.execute(select(Commit.id, Commit.sha, Commit.parents).where(Commit.id.in_(list(recent)))).all()
    return {cid: i for i, cid in enumerate(ordered((cid, sha, parents, recent[cid]) for cid, sha, parents in commits))}


def flag_drawn(points: list[Point], drawn: list[bool], th: Thresholds) -> list[Verdict | None]:
    """api/regression.flag_series for the drawn points: each judged against the points before it.

    judge() takes its standard deviation exactly (the statistics module works in fractions),
    about half a millisecond over a 64-point window: too slow for the thousands of points a
    page can hold. A point is a regression only if it is at least min_drop below its
    baseline's mean, and that mean is the same statistics.fmean judge() takes; so points
    short of that floor cannot be regressions and are not judged in full. The verdicts on
    regressions are judge()'s own.
    """
    out: list[Verdict | None] = []
    for i, (p, shown) in enumerate(zip(points, drawn)):
        baseline = [q.value for q in points[max(0, i - th.window):i]]
        if not shown:
            out.append(None)
            continue
        if len(baseline) >= th.min_points:
            mean = statistics.fmean(baseline)
            delta = (p.value - mean) / mean
            if -delta < th.min_drop:
                out.append(Verdict(False, delta, None, mean, f"{100 * delta:+.1f} % against the mean of {len(baseline)} "
                                   f"earlier results: not below the {100 * th.min_drop:g} % floor"))
                continue
        out.append(judge(points[:i], p, th))
    return out


def _with(p: HistoryPoint, v: Verdict) -> HistoryPoint:
    return HistoryPoint(**{**p.__dict__, "verdict": v})


COLUMNS = ["variant", "form", "sha", "message", "commit_time", "gflops", "cublas_gflops", "pct_of_cublas", "noise",
           "n_samples", "n_results", "regression", "regression_reason"]


def export_rows(h: History) -> list[dict]:
    return [
        {"variant": p.variant, "form": h.f.form, "sha": p.sha, "message": p.message, "commit_time": p.commit_time,
         "gflops": p.gflops, "cublas_gflops": p.cublas_gflops, "pct_of_cublas": p.pct_of_cublas,
         "noise": p.noise, "n_samples": p.n_samples, "n_results": p.n_results,
         "regression": bool(p.verdict and p.verdict.regression), "regression_reason": p.verdict.reason if p.verdict else None}
        for p in h.points
    ]
