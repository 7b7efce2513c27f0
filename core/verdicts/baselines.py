"""Verdicts for a job's results against their baseline: the history of the same series
(variant, size, GPU model, timing mode, precision and GEMM form) on the base commit or branch.
A TN result is another GEMM than an NN one of the same kernel name: never its baseline. Only
results the job's owner would trust are read (core/verdicts/trust.py): a worker's, or posted by the owner,
a token granted the repository or an admin."""

import re
from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy import and_, case, select
from sqlalchemy.orm import Session

from core.verdicts.ancestry import COMMIT_TIME as _COMMIT_TIME, chain, commit_time, first_parent
from core.verdicts.confirm import resource_changes
from core.records.models import ApiToken, Commit, Gpu, Job, Result
from core.verdicts.regression import Point, Thresholds, judge
from core.results.env_reading import resources_of
from core.results.toolchain import said_first, toolchain_changes
from core.verdicts.trust import trusted_results
from core.results.result_status import NOT_APPLICABLE

VerdictStatus = Literal["regression", "ok", "faster", "no baseline", "unverified", "not applicable"]


class VerdictOut(BaseModel):
    result_id: int
    variant: str
    m: int
    n: int
    k: int
    form: str = Field("rrr", description="the GEMM's form key (core/description/gemm_form.py); its baseline is of this form only")
    mode: str = Field("cold", description="how it was timed (core/description/timing_modes.py); its baseline was timed "
                                          "the same way")
    gflops: float | None
    pct_of_cublas: float | None
    verified: bool
    status: VerdictStatus
    delta: float | None = Field(description="(gflops - baseline mean) / baseline mean")
    baseline_mean: float | None
    baseline_points: int
    reason: str
    resource_changes: list[str] = Field(default_factory=list,
                                        description="kernel resources vs the base commit's result, in words")
    baseline_posted_by: list[str] = Field(default_factory=list,
                                          description="the tokens whose posted runs are in the baseline (the rest a "
                                                      "worker measured); only the job's owner, a token granted its "
                                                      "repository or an admin is ever among them (core/verdicts/trust.py)")


def result_anchor(job_id: int, variant: str, m: int, n: int, k: int, form: str = "rrr") -> str:
    """Where a job's result of a case sits on its commit's page (/commits/{sha}#...): the CI
    hook's summary links each row there, so both sides make it here. A form other than the
    default is part of it: one job may time a kernel alone and in a batch at one M, N, K."""
    case = f"{job_id}-{variant}-{m}x{n}x{k}" + (f"-{form}" if form != "rrr" else "")
    return "r-" + re.sub(r"[^A-Za-z0-9_.-]", "_", case)


def _baseline(db: Session, r: Result, gpu_model: str, job: Job, base_sha: str | None, base_branch: str | None,
              window: int, trusted) -> list[tuple]:
    """The series' trusted history, oldest first: per row gflops, noise, n_samples, q1, q3, median
    and the posting token's id (None for a worker's result)."""
    query = (
        select(Result.gflops, Result.noise, Result.n_samples, Result.q1_ms, Result.q3_ms, Result.median_ms,
               case((Job.run_id.is_not(None), Job.submitted_by_token_id), else_=None))
        .join(Commit, Result.commit_id == Commit.id)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .join(Job, Result.job_id == Job.id)
        .where(
            Result.variant == r.variant, Result.m == r.m, Result.n == r.n, Result.k == r.k,
            Result.mode == r.mode, Result.compute_mode == r.compute_mode, Result.form == r.form,
            Gpu.model == gpu_model, Result.verified.is_(True), Result.gflops.is_not(None),
            Result.job_id != job.id, trusted,
        )
    )
    if job.commit is not None:  # another repository's commits are no baseline, whatever their branch names
        query = query.where(Commit.repo == job.commit.repo)
    anchor = _ancestry_anchor(db, job, base_sha, base_branch)
    if anchor is not None:
        # First-parent ancestry: the anchor and its ancestors, nearest last, whatever their dates.
        position = {c.id: i for i, c in enumerate(chain(db, anchor, window))}
        found = db.execute(query.add_columns(Result.commit_id, Result.id).where(Result.commit_id.in_(list(position)))).all()
        ordered = sorted(found, key=lambda row: (-position[row[7]], row[8]))
        return [row[:7] for row in ordered[-window:]]
    if base_sha:
        base = _find(db, base_sha, job)
        if base is None:
            return []
        # The base commit's own results, and what came before it on its branch.
        base_time = base.committed_at or base.created_at
        on_branch = (Commit.branch == base.branch) & (_COMMIT_TIME <= base_time) if base.branch else False
        query = query.where((Commit.id == base.id) | on_branch)
    else:
        branch = base_branch or (job.commit.branch if job.commit else None)
        query = query.where(Commit.branch == branch, Result.created_at < job.created_at)
        if job.commit is not None:
            query = query.where(Commit.id != job.commit_id)
    rows = db.execute(query.order_by(_COMMIT_TIME.desc(), Result.id.desc()).limit(window)).all()
    return [tuple(row) for row in reversed(rows)]


def _point(gflops: float | None, noise: float | None, n_samples: int, q1: float | None, q3: float | None,
           median: float | None, _poster=None) -> Point:
    """A baseline row as a Point. Its gflops is never None: the query keeps only results with one,
    which the column's type cannot say."""
    assert gflops is not None
    return Point(gflops, robust_noise(noise, q1, q3, median), n_samples)


def _poster_names(db: Session, rows: list[tuple]) -> list[str]:
    """The names of the tokens whose posted runs are among the baseline's rows (their last column)."""
    ids = sorted({row[6] for row in rows if row[6] is not None})
    return [name for (name,) in db.execute(select(ApiToken.name).where(ApiToken.id.in_(ids)).order_by(ApiToken.name))] \
        if ids else []


def _ancestry_anchor(db: Session, job: Job, base_sha: str | None, base_branch: str | None) -> Commit | None:
    """Where the baseline's first-parent walk starts: the base commit, or the job commit's first
    parent; None where no parents were sent (then commit time orders the history)."""
    if base_sha:
        base = _find(db, base_sha, job)
        return base if base is not None and base.parents is not None else None
    c = job.commit
    if c is None or not c.parents or (base_branch and base_branch != c.branch):
        return None
    return first_parent(db, c)


def _find(db: Session, sha_prefix: str, job: Job) -> Commit | None:
    """The newest commit of the job's repository whose sha starts so (a commit of another
    repository with the same sha, a fork's, is not this job's base)."""
    query = select(Commit).where(Commit.sha.startswith(sha_prefix, autoescape=True))
    if job.commit is not None:
        query = query.where(Commit.repo == job.commit.repo)
    return db.scalar(query.order_by(Commit.id.desc()))


IQR_PER_SIGMA = 1.349  # a normal distribution's interquartile range, in standard deviations


def robust_noise(noise: float | None, q1: float | None, q3: float | None, median: float | None) -> float | None:
    """Relative spread from the interquartile range (IQR / 1.349 estimates a normal sigma).

    One outlier sample (a first launch, a clock dip) inflates stddev/mean, which would make the
    verdict blind to real changes; the quartiles barely move."""
    if q1 is None or q3 is None or not median:
        return noise
    return (q3 - q1) / IQR_PER_SIGMA / median


def robust_noise_column():
    """robust_noise as SQL over a result's columns, for a query that averages it (the dashboard's
    history): the history chart and the CI's verdicts judge one history with one noise."""
    spread = and_(Result.q1_ms.is_not(None), Result.q3_ms.is_not(None), Result.median_ms > 0)
    return case((spread, (Result.q3_ms - Result.q1_ms) / IQR_PER_SIGMA / Result.median_ms), else_=Result.noise)


def verdicts(db: Session, job: Job, base_sha: str | None, base_branch: str | None, th: Thresholds) -> list[VerdictOut]:
    base_sha = base_sha.lower() if base_sha else base_sha  # a sha is one identity whatever its case
    trusted = trusted_results(db, job)  # what the job's owner would trust (core/verdicts/trust.py)
    out = []
    for r in job.results:
        if r.status == NOT_APPLICABLE:  # not run by design (another GPU target, sizes compiled in): no failure
            out.append(_verdict(r, status="not applicable", delta=None, baseline_mean=None, baseline_points=0,
                                reason=r.error or "not applicable", resource_changes=[]))
            continue
        if not r.verified or r.gflops is None or r.gpu is None:
            out.append(_verdict(r, status="unverified", delta=None, baseline_mean=None, baseline_points=0,
                                reason=r.error or "not verified", resource_changes=[]))
            continue
        rows = _baseline(db, r, r.gpu.model, job, base_sha, base_branch, th.window, trusted)
        history = [_point(*row) for row in rows]
        v = judge(history, Point(r.gflops, robust_noise(r.noise, r.q1_ms, r.q3_ms, r.median_ms), r.n_samples), th)
        status: VerdictStatus
        if v.delta is None:
            status = "no baseline"
        elif v.regression:
            status = "regression"
        elif v.faster:
            status = "faster"
        else:
            status = "ok"
        posters = _poster_names(db, rows)
        reason = v.reason + (f"; the baseline holds runs posted by {', '.join(posters)}" if posters else "")
        base_env = _base_env(db, r, job, base_sha, base_branch, trusted)
        out.append(_verdict(r, status=status, delta=v.delta, baseline_mean=v.baseline_mean,
                            baseline_points=len(history), reason=said_first(toolchain_changes(base_env, r.env), reason),
                            resource_changes=resource_changes(resources_of(base_env), resources_of(r.env)),
                            baseline_posted_by=posters))
    return out


def _verdict(r: Result, *, status: VerdictStatus, delta: float | None, baseline_mean: float | None,
             baseline_points: int, reason: str, resource_changes: list[str],
             baseline_posted_by: list[str] | None = None) -> VerdictOut:
    """A result's verdict: its own fields, and the judgement's."""
    return VerdictOut(result_id=r.id, variant=r.variant, m=r.m, n=r.n, k=r.k, form=r.form, mode=r.mode, gflops=r.gflops,
                      pct_of_cublas=r.pct_of_cublas, verified=r.verified, status=status, delta=delta,
                      baseline_mean=baseline_mean, baseline_points=baseline_points, reason=reason,
                      resource_changes=resource_changes, baseline_posted_by=baseline_posted_by or [])


def _base_env(db: Session, r: Result, job: Job, base_sha: str | None, base_branch: str | None, trusted):
    """The env of the head result's counterpart: the newest result of the same series on the base
    commit (or the head's first parent); where neither was measured, on the newest earlier commit
    of the branch that has one, as the history verdict falls back to (a CI that measures some
    commits only). Its resources and toolchain are what the head's are compared with; None: none."""
    series = select(Result.env).join(Job, Result.job_id == Job.id).where(
        Result.variant == r.variant, Result.m == r.m, Result.n == r.n, Result.k == r.k, Result.mode == r.mode,
        Result.compute_mode == r.compute_mode, Result.form == r.form, Result.verified.is_(True), trusted)
    base = _ancestry_anchor(db, job, base_sha, base_branch) or (_find(db, base_sha, job) if base_sha else None)
    if base is not None:
        env = db.scalar(series.where(Result.commit_id == base.id).order_by(Result.id.desc()).limit(1))
    elif base_sha is None and job.commit is not None and (base_branch or job.commit.branch):
        c = job.commit
        env = db.scalar(series.join(Commit, Result.commit_id == Commit.id).where(
            Commit.repo == c.repo, Commit.branch == (base_branch or c.branch), Commit.id != c.id,
            _COMMIT_TIME <= commit_time(c)).order_by(_COMMIT_TIME.desc(), Result.id.desc()).limit(1))
    else:
        return None
    return env
