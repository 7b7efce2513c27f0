"""How far a result's timing mode reads from the others, where the same case was measured in them
(issue 48): the same kernel, size, form and precision, on the same commit and the same GPU, timed
cold, burst, hot or sustained. A kernel at the power cap reads 12-15 % apart between cold and
burst (docs/BENCHMARKS.md): a reader comparing with a runner of their own sees which mode it is."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.records.models import Result


def other_modes(db: Session, r: Result) -> dict[str, dict]:
    """{mode: {"gflops": the newest such result's, "ratio": this result's GFLOPS over it, "result_id"}}
    for every other mode the case was measured in; {} where none was (or this result has no figure)."""
    if not r.gflops or r.commit_id is None:
        return {}
    rows = db.execute(
        select(Result.mode, Result.gflops, Result.id).where(
            Result.variant == r.variant, Result.m == r.m, Result.n == r.n, Result.k == r.k, Result.form == r.form,
            Result.compute_mode == r.compute_mode, Result.commit_id == r.commit_id, Result.gpu_id == r.gpu_id,
            Result.mode != r.mode, Result.verified.is_(True), Result.gflops.is_not(None))
        .order_by(Result.id.desc())).all()
    out: dict[str, dict] = {}
    for mode, gflops, rid in rows:
        if mode not in out and gflops:  # the query keeps only results with a figure; the column may not say so
            out[mode] = {"gflops": gflops, "ratio": r.gflops / gflops, "result_id": rid}
    return out
