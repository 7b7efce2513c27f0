"""A deployment's own request limits (GEMMWATCH_MAX_DIM, _MAX_CASES, _MAX_AUTOTUNE_CASES), checked
with the settings the app was built with: a 422 that names the field. _MAX_SOURCE_BYTES is checked
before the body is parsed (api/job_body.py)."""

from api.schemas import JobCreate
from core.errors import Unprocessable
from core.settings import Settings


def check_job_limits(body: JobCreate, cfg: Settings) -> None:
    for i, size in enumerate(body.sizes):
        m, n, k, batch = (*size, 1)[:4]
        # The bound is on memory, not on a side: no operand (times the batch) holds more elements than
        # a GEMMWATCH_MAX_DIM square, so a skinny shape a repository benchmarks (cute-gemm's
        # 81920 x 256 x 256) is taken while 16384^3's memory and work stay the most a case may ask.
        largest = batch * max(m * k, k * n, m * n)
        if largest > cfg.max_dim**2:
            raise Unprocessable("sizes", f"sizes[{i}] = {size}: {'batch x ' if batch > 1 else ''}its largest matrix "
                                         f"holds {largest} elements; at most {cfg.max_dim ** 2}, a {cfg.max_dim}^2 "
                                         "square's (GEMMWATCH_MAX_DIM)")
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
