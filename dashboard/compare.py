"""Compare: two commits on one GPU model, or two GPU models at one commit, side by side.

Each cell is the newest result for its side, variant and size (the same rule as the
overview and the sweep), so a re-run replaces an earlier number instead of averaging with it.
"""

from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.models import Commit, Gpu, Job, Result
from core.result_env import resources_of
from dashboard.filters import Size, size_text
from dashboard.queries import gpu_ids, of_precision

By = Literal["commit", "gpu"]


@dataclass(frozen=True)
class CompareFilter:
    by: By = "commit"
    a: str | None = None  # commit sha (or prefix), or GPU model
    b: str | None = None
    gpu: str | None = None  # the GPU model when comparing commits
    sha: str | None = None  # the commit when comparing GPU models; None: newest results
    mode: str | None = None
    precision: str = "fp32"  # compute mode (dashboard/filters.py PRECISIONS)


@dataclass(frozen=True)
class Cell:
    verified: bool
    gflops: float | None
    noise: float | None
    error: str | None
    sha: str | None
    result_id: int
    resources: dict | None = None  # registers, shared memory, occupancy (worker/resources.py)


@dataclass(frozen=True)
class CompareRow:
    variant: str
    size: Size
    a: Cell | None
    b: Cell | None

    @property
    def label(self) -> str:
        return f"{self.variant} {size_text(self.size)}"

    @property
    def delta_pct(self) -> float | None:
        """How much faster B is than A, in percent; only when both sides have a verified speed."""
        if self.a and self.b and self.a.gflops and self.b.gflops is not None:
            return 100 * (self.b.gflops - self.a.gflops) / self.a.gflops
        return None


@dataclass
class Comparison:
    f: CompareFilter
    rows: list[CompareRow] = field(default_factory=list)
    reason: str | None = None  # why there is nothing to compare


def commit_choices(db: Session, gpu_model: str | None, limit: int = 100) -> list[str]:
    """The newest commits that jobs ran on this GPU model (jobs, a far smaller table than results)."""
    commit_time = func.coalesce(Commit.committed_at, Commit.created_at)
    query = select(Commit.sha).join(Job, Job.commit_id == Commit.id)
    if gpu_model:
        query = query.where(Job.gpu_id.in_(gpu_ids(db, gpu_model)))
    query = query.group_by(Commit.sha).order_by(func.max(commit_time).desc()).limit(limit)
    return list(db.scalars(query))


def _commit_ids(db: Session, sha: str) -> tuple[list[int], str | None]:
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


def load_comparison(db: Session, f: CompareFilter) -> Comparison:
    out = Comparison(f)
    if not (f.a and f.b):
        out.reason = f"A comparison needs two {'commits' if f.by == 'commit' else 'GPU models'} with results; pick A and B."
        return out
    if f.a == f.b:
        out.reason = f"A and B are the same {f.by} ({f.a}): pick two different ones."
        return out
    where = [Result.mode == f.mode, of_precision(f.precision)]
    if f.by == "commit":
        sides = {}
        for key in ("a", "b"):
            ids, why = _commit_ids(db, getattr(f, key))
            if why:
                out.reason = f"{key.upper()}: {why}."
                return out
            sides.update({i: key for i in ids})
        side_col = Result.commit_id
        where += [Result.commit_id.in_(sides), Result.gpu_id.in_(gpu_ids(db, f.gpu or ""))]
    else:
        sides = {f.a: "a", f.b: "b"}
        side_col = Gpu.model
        where.append(Gpu.model.in_(sides))
        if f.sha:
            ids, why = _commit_ids(db, f.sha)
            if why:
                out.reason = f"commit: {why}."
                return out
            where.append(Result.commit_id.in_(ids))

    newest = (
        select(func.max(Result.id))
        .join(Gpu, Result.gpu_id == Gpu.id)
        .where(*where)
        .group_by(side_col, Result.variant, Result.m, Result.n, Result.k)
    )
    rows = db.execute(
        select(side_col, Result.variant, Result.m, Result.n, Result.k, Result.verified, Result.gflops,
               Result.noise, Result.error, Commit.sha, Result.id, Result.env)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
    ).all()
    cells: dict[tuple, dict[str, Cell]] = {}
    for side, variant, m, n, k, ok, gf, noise, err, sha, rid, env in rows:
        cells.setdefault((variant, (m, n, k)), {})[sides[side]] = Cell(ok, gf if ok else None, noise, err, sha, rid,
                                                                       resources_of(env))
    out.rows = [CompareRow(v, s, c.get("a"), c.get("b"))
                for (v, s), c in sorted(cells.items(), key=lambda kv: (kv[0][1][0] * kv[0][1][1] * kv[0][1][2], kv[0]))]
    if not out.rows:
        where_txt = f"on {f.gpu}" if f.by == "commit" else (f"at commit {f.sha}" if f.sha else "")
        out.reason = f"No results for {f.a} or {f.b} {where_txt} in {f.mode} mode.".replace("  ", " ")
    elif not any(r.delta_pct is not None for r in out.rows):
        out.reason = (f"No variant and size has a verified speed on both {f.a} and {f.b}: "
                      "the table lists what each side has.")
    return out


COLUMNS = ["variant", "m", "n", "k", "a", "a_verified", "a_gflops", "a_noise", "b", "b_verified", "b_gflops",
           "b_noise", "delta_pct"]


def export_rows(c: Comparison) -> list[dict]:
    def side(cell: Cell | None, key: str) -> dict:
        return {f"{key}_verified": cell.verified if cell else None, f"{key}_gflops": cell.gflops if cell else None,
                f"{key}_noise": cell.noise if cell else None}

    return [
        {"variant": r.variant, "m": r.size[0], "n": r.size[1], "k": r.size[2], "a": c.f.a, **side(r.a, "a"),
         "b": c.f.b, **side(r.b, "b"), "delta_pct": r.delta_pct}
        for r in c.rows
    ]
