"""Roofline: on one GPU, each variant's attained FLOP/s against its GEMM's arithmetic intensity,
under the GPU's compute roof for each precision and its memory roof (dashboard/roofs.py has the
formulas), with cuBLAS at each case beside them.

One GPU name (the SKU) per chart, since the roofs are the SKU's: the newest result's name for the
chosen model. Each point is the newest verified result for its variant, size and precision (the
rule of the other views); a commit narrows them to that commit's results, a size to that size.
"""

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.records.models import Commit, Gpu, Result
from core.results.env_reading import output_type_of, pct_of_peak_of
from dashboard.filters import Size
from core.description.form_keys import DEFAULT_KEY
from dashboard.queries import gpu_ids, of_form
from dashboard.roofs import Bandwidth, Peak, gpu_roofs, intensity
from core.verdicts.regression import AB_MODE


@dataclass(frozen=True)
class RooflineFilter:
    gpu: str | None = None  # GPU model
    mode: str | None = None
    sha: str | None = None  # None: the newest results
    size: Size | None = None  # None: every size
    form: str = DEFAULT_KEY  # GEMM form key (core/description/gemm_form.py): cuBLAS beside each point is timed in it


@dataclass(frozen=True)
class RoofPoint:
    variant: str
    size: Size
    precision: str  # compute mode
    intensity: float  # flop per byte
    gflops: float
    cublas_gflops: float | None
    pct_of_cublas: float | None
    pct_of_peak: float | None
    sha: str | None
    result_id: int


@dataclass
class Roofline:
    f: RooflineFilter
    gpu_name: str | None = None
    points: list[RoofPoint] = field(default_factory=list)
    peaks: dict[str, Peak] = field(default_factory=dict)  # per precision present
    memory: Bandwidth | None = None
    failed: list[str] = field(default_factory=list)  # cases whose newest result failed verification
    reason: str | None = None

    def cublas(self) -> list[RoofPoint]:
        """cuBLAS at each size and precision the points have: from the newest of their results."""
        best: dict[tuple, RoofPoint] = {}
        for p in self.points:
            key = (p.size, p.precision)
            if p.cublas_gflops and (key not in best or p.result_id > best[key].result_id):
                best[key] = p
        return [RoofPoint("cuBLAS", p.size, p.precision, p.intensity, p.cublas_gflops, p.cublas_gflops, 100.0,
                          100 * p.cublas_gflops / self.peaks[p.precision].gflops
                          if self.peaks.get(p.precision) and self.peaks[p.precision].gflops else None,
                          p.sha, p.result_id) for p in best.values()]


def load_roofline(db: Session, f: RooflineFilter, commit_ids: list[int] | None = None) -> Roofline:
    out = Roofline(f)
    if not (f.gpu and f.mode):
        on = (f" on {f.gpu}" if f.gpu else "") + (f" at {f.size[0]}×{f.size[1]}×{f.size[2]}" if f.size else "")
        out.reason = (f"No verified results{on} yet: run gemmwatch submit, or load the demo's measured figures with "
                      "gemmwatch demo. Its points then appear here under the GPU's roofs.")
        return out
    where = [Result.gpu_id.in_(gpu_ids(db, f.gpu)), Result.mode == f.mode, Result.mode != AB_MODE, of_form(f.form)]
    if commit_ids is not None:
        where.append(Result.commit_id.in_(commit_ids))
    if f.size:
        where += [Result.m == f.size[0], Result.n == f.size[1], Result.k == f.size[2]]
    name = db.scalar(select(Gpu.name).join(Result, Result.gpu_id == Gpu.id).where(*where)
                     .order_by(Result.id.desc()).limit(1))
    if name is None:
        at = f" at {f.sha}" if f.sha else ""
        size = f" at {f.size[0]}×{f.size[1]}×{f.size[2]}" if f.size else ""
        out.reason = f"No results on {f.gpu}{at}{size} in {f.mode} mode: nothing to place under its roofs."
        return out
    out.gpu_name = name
    where.append(Gpu.name == name)
    newest = (select(func.max(Result.id)).join(Gpu, Result.gpu_id == Gpu.id).where(*where)
              .group_by(Result.variant, Result.m, Result.n, Result.k, Result.compute_mode))
    rows = db.execute(
        select(Result.variant, Result.m, Result.n, Result.k, Result.compute_mode, Result.gflops, Result.cublas_gflops,
               Result.pct_of_cublas, Result.env, Commit.sha, Result.id, Result.verified)
        .outerjoin(Commit, Result.commit_id == Commit.id)
        .where(Result.id.in_(newest))
    ).all()
    # Ordered here: M*N*K overflows PostgreSQL's 32-bit integers from 1291^3 on.
    rows.sort(key=lambda r: (r.variant, r.m * r.n * r.k, r.compute_mode))
    for variant, m, n, k, cm, gflops, cublas, pct, env, sha, rid, verified in rows:
        if not (verified and gflops):  # a wrong kernel has no speed: its newest result is not drawn
            out.failed.append(f"{variant} {m}×{n}×{k}")
            continue
        if cm not in out.peaks:
            out.peaks[cm], out.memory = gpu_roofs(db, name, rid, cm)
        out.points.append(RoofPoint(variant, (m, n, k), cm, intensity(m, n, k, cm, output_type_of(env)), gflops,
                                    cublas, pct, pct_of_peak_of(env), sha, rid))
    if not out.points:
        out.reason = (f"The newest results on {name} here all failed verification ({', '.join(out.failed[:5])}"
                      f"{' …' if len(out.failed) > 5 else ''}): a wrong kernel has no speed to place.")
    return out


COLUMNS = ["gpu", "variant", "form", "m", "n", "k", "precision", "intensity_flop_per_byte", "gflops", "pct_of_peak",
           "pct_of_cublas", "peak_gflops", "memory_gbs", "sha", "result_id"]


def export_rows(r: Roofline) -> list[dict]:
    return [
        {"gpu": r.gpu_name, "variant": p.variant, "form": r.f.form, "m": p.size[0], "n": p.size[1], "k": p.size[2],
         "precision": p.precision, "intensity_flop_per_byte": p.intensity, "gflops": p.gflops,
         "pct_of_peak": p.pct_of_peak, "pct_of_cublas": p.pct_of_cublas,
         "peak_gflops": r.peaks[p.precision].gflops if p.precision in r.peaks else None,
         "memory_gbs": r.memory.gbs if r.memory else None, "sha": p.sha, "result_id": p.result_id}
        for p in [*r.points, *r.cublas()]
    ]
