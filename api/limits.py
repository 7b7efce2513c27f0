"""A deployment's own request limits (GEMMWATCH_MAX_DIM, _MAX_CASES, _MAX_AUTOTUNE_CASES), checked
with the settings the app was built with: a 422 that names the field. _MAX_SOURCE_BYTES is checked
before the body is parsed (api/job_body.py)."""

from api.schemas import JobCreate
from core.errors import Unprocessable
from core.settings import Settings


def check_job_limits(body: JobCreate, cfg: Settings) -> None:
    for i, size in enumerate(body.sizes):
        m, n, k, batch = (*size, 1)[:4]
        if max(m, n, k) > cfg.max_dim:
            raise Unprocessable("sizes", f"sizes[{i}] = {size}: each of M, N, K must be in 1..{cfg.max_dim}")
        # A batch holds batch matrices of each operand: no more elements than the largest matrix
        # one unbatched case may have here, so a batch cannot take more memory than a case can.
        if batch * max(m * k, k * n, m * n) > cfg.max_dim**2:
            raise Unprocessable("sizes", f"sizes[{i}] = {size}: batch x the largest matrix is "
                                         f"{batch * max(m * k, k * n, m * n)} elements; at most {cfg.max_dim ** 2} "
                                         f"({cfg.max_dim}^2, GEMMWATCH_MAX_DIM)")
    # An autotune job's variants x sizes are held to a bench job's bound as well: 256 sizes of a
    # kernel with one configuration were 256 "autotune" cases, a bench job four times the bench
    # bound (issue 37, row 7). Its configurations then to GEMMWATCH_MAX_AUTOTUNE_CASES.
    pairs = len(body.variants) * len(body.sizes)
    if body.kind == "autotune" and pairs > cfg.max_cases_per_job:
        raise Unprocessable("sizes", f"this autotune job has {len(body.variants)} variants x {len(body.sizes)} sizes = "
                                     f"{pairs}; at most {cfg.max_cases_per_job} (GEMMWATCH_MAX_CASES), each then "
                                     "swept over its configurations")
    cases = body.case_count()
    limit = cfg.max_autotune_cases if body.kind == "autotune" else cfg.max_cases_per_job
    if cases > limit:
        setting = "GEMMWATCH_MAX_AUTOTUNE_CASES" if body.kind == "autotune" else "GEMMWATCH_MAX_CASES"
        raise Unprocessable("sizes", f"this {body.kind} job has {cases} cases; at most {limit} per {body.kind} job "
                                     f"({setting})")
    # GEMMWATCH_MAX_SOURCE_BYTES is checked on the raw body before the model reads it (api/job_body.py),
    # so the source guard never scans past it: not again here.
