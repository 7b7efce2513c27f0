"""Sweep: GFLOPS against size for chosen variants and GPU models.

Each point is the newest result for its (GPU model, variant, size), optionally at one
commit; a newest result that failed verification is shown as a failure, not a speed.

Two ways to walk the sizes: every size measured, ordered by flop count (`vary=volume`, the
default), or one dimension with the other two held (`vary=m&n=4096&k=4096`: GFLOPS against M
for the skinny GEMMs of inference). A dimension held but not given in the URL is filled from
the sizes measured, choosing the longest line.
"""

from collections import Counter
from dataclasses import dataclass, replace
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.records.models import Commit, Gpu, Result
from dashboard.filters import Size, by_flops
from core.description.form_keys import DEFAULT_KEY
from dashboard.queries import of_form, of_precision

DIMS = ("m", "n", "k")
Vary = Literal["volume", "m", "n", "k"]


@dataclass(frozen=True)
class SweepFilter:
    gpus: tuple[str, ...] = ()  # GPU models; empty: all
    variants: tuple[str, ...] = ()  # empty: all
    mode: str | None = None
    sha: str | None = None  # a commit, or a prefix of one; None: newest results whatever the commit
    vary: Vary = "volume"  # volume: every size by flop count; m, n or k: that dimension, the others held
    m: int | None = None  # the held dimensions' values (the varied one, and all under volume, stay None)
    n: int | None = None
    k: int | None = None
    precision: str = "fp32"  # compute mode (dashboard/filters.py PRECISIONS)
    form: str = DEFAULT_KEY  # GEMM form key (core/description/gemm_form.py): one form a chart

    @property
    def axis(self) -> int | None:
        """Index of the varied dimension in (M, N, K), or None when every size is shown."""
        return DIMS.index(self.vary) if self.vary in DIMS else None

    def held(self) -> dict[str, int | None]:
        """The held dimensions and their values, in M, N, K order."""
        if self.axis is None:
            return {}
        return {d: getattr(self, d) for d in DIMS if d != self.vary}


def settle(f: SweepFilter, sizes: list[Size]) -> SweepFilter:
    """The filter with each held dimension the URL left out filled from the measured sizes.

    Of the held pairs that agree with what the URL gave, the one with the most sizes (so the
    longest line) wins; ties go to the larger values. Values the URL gave are kept even when
    nothing was measured there: the page then says so rather than silently moving.
    """
    if f.axis is None:
        return replace(f, m=None, n=None, k=None)
    others = [i for i in range(3) if i != f.axis]
    given = [getattr(f, DIMS[i]) for i in others]
    lines = Counter(tuple(s[i] for i in others) for s in sizes
                    if all(g is None or s[i] == g for i, g in zip(others, given)))
    best = max(lines, key=lambda pair: (lines[pair], pair)) if lines else (None, None)
    chosen = {DIMS[i]: g if g is not None else b for i, g, b in zip(others, given, best)}
    return replace(f, **{f.vary: None}, **chosen)


@dataclass(frozen=True)
class HeldMenu:
    """A <select> for one held dimension: the values measured there, and the one chosen."""

    dim: str
    values: list[int]
    current: int | None


def held_menus(f: SweepFilter, sizes: list[Size]) -> list[HeldMenu]:
    # A value from the URL that nothing was measured at stays in its menu: the menu shows what
    # the chart is of, and the chart says there is nothing there.
    return [HeldMenu(d, sorted({s[DIMS.index(d)] for s in sizes} | ({v} if v else set())), v)
            for d, v in f.held().items()]


def held_pairs(f: SweepFilter, sizes: list[Size]) -> list[tuple[dict[str, int], int]]:
    """The combinations of the held dimensions that were measured at two values or more of the
    varied one (the lines there are to draw), with that count: the page lists them, so that an
    empty choice shows where the data is."""
    if f.axis is None:
        return []
    others = [i for i in range(3) if i != f.axis]
    counts = Counter(tuple(s[i] for i in others) for s in sizes)
    return [({DIMS[i]: v for i, v in zip(others, pair)}, n) for pair, n in sorted(counts.items()) if n >= 2]


@dataclass(frozen=True)
class SweepPoint:
    gpu: str
    variant: str
    size: Size
    verified: bool
    gflops: float | None
    cublas_gflops: float | None
    noise: float | None
    error: str | None
    sha: str | None
    result_id: int


def load_sweep(db: Session, f: SweepFilter) -> list[SweepPoint]:
    where = [Result.mode == f.mode, of_precision(f.precision), of_form(f.form)]
    if f.gpus:
        where.append(Gpu.model.in_(f.gpus))
    if f.variants:
        where.append(Result.variant.in_(f.variants))
    for dim, value in f.held().items():
        if value is None:  # nothing measured to hold it at
            return []
        where.append(getattr(Result, dim) == value)
    newest = select(func.max(Result.id)).join(Gpu, Result.gpu_id == Gpu.id)
    if f.sha:
        newest = newest.join(Commit, Result.commit_id == Commit.id)
        where.append(Commit.sha.startswith(f.sha, autoescape=True))
    newest = newest.where(*where).group_by(Gpu.model, Result.variant, Result.m, Result.n, Result.k)
    rows = db.execute(
        select(Gpu.model, Result.variant, Result.m, Result.n, Result.k, Result.verified, Result.gflops,
               Result.cublas_gflops, Result.noise, Result.error, Commit.sha, Result.id)
        .join(Gpu, Result.gpu_id == Gpu.id)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
    ).all()
    points = [
        SweepPoint(g, v, (m, n, k), ok, gf if ok else None, cb, noise, err, sha, rid)
        for g, v, m, n, k, ok, gf, cb, noise, err, sha, rid in rows
    ]
    return sorted(points, key=lambda p: (p.gpu, p.variant, by_flops(p.size)))


COLUMNS = ["gpu", "variant", "form", "m", "n", "k", "verified", "gflops", "cublas_gflops", "noise", "error", "sha",
           "result_id"]


def export_rows(points: list[SweepPoint], form: str = DEFAULT_KEY) -> list[dict]:
    return [
        {"gpu": p.gpu, "variant": p.variant, "form": form, "m": p.size[0], "n": p.size[1], "k": p.size[2],
         "verified": p.verified,
         "gflops": p.gflops, "cublas_gflops": p.cublas_gflops, "noise": p.noise, "error": p.error, "sha": p.sha,
         "result_id": p.result_id}
        for p in points
    ]
