"""A commit's results and verdicts in a documented, versioned shape, for other tools to read.

The verdicts are the commit page's (core/verdicts/commit_view.py): each result's history verdict
against its base by ancestry, replaced by a same-job confirmation's where one measured it. The
schema is this module's pydantic models; `docs/schemas/commit-export-1.json` is their JSON Schema,
kept equal to them by a test. A change that a reader of version 1 could misread (a field renamed,
removed or given another meaning or unit) makes version 2; a new optional field does not.
"""

from datetime import datetime
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field
from core.results.result_status import ResultStatus
from core.verdicts.commit_view import CommitView

SCHEMA: Literal["gemmwatch.commit-export"] = "gemmwatch.commit-export"
VERSION: Literal[1] = 1


class Timing(BaseModel):
    """How the result's own samples lie, in milliseconds: the figure a verdict reads is the median."""

    model_config = ConfigDict(extra="forbid")
    median_ms: float | None
    q1_ms: float | None = Field(description="the samples' first quartile")
    q3_ms: float | None = Field(description="the samples' third quartile")
    min_ms: float | None
    max_ms: float | None
    n_samples: int = Field(ge=0)
    noise: float | None = Field(description="the samples' relative spread (a robust sigma over the median)")
    mode: str = Field(description="how the samples were taken: cold, hot, burst or sustained (README, 'Which timing mode'); "
                                  "results of two modes are never compared")


class ExportedResult(BaseModel):
    """One result of the commit on one GPU, and the word gemmwatch gives it."""

    model_config = ConfigDict(extra="forbid")
    result_id: int
    job_id: int
    variant: str
    gpu: str = Field(description="the GPU's model, as a verdict groups results (H100, H200)")
    gpu_name: str | None = Field(description="the GPU's full name, as the driver gives it")
    m: int
    n: int
    k: int
    form: str = Field(description="the GEMM's form key: layouts, epilogue, sums, batch (docs/KERNELS.md, 'Forms')")
    compute_mode: str = Field(description="the precision it was verified and timed in: fp32, tf32, fp16, bf16, fp8")
    status: ResultStatus = Field(
        description="the result's own status: passed is verified against cuBLAS")
    gflops: float | None
    pct_of_cublas: float | None = Field(description="its speed as a percentage of cuBLAS's in the same form and precision")
    timing: Timing
    verdict: str = Field(description="regression, faster, ok, undecided, no baseline, unverified, not applicable or confirmation failed: "
                                     "a confirmation's word where one re-measured the case, else its history's")
    delta: float | None = Field(description="(gflops - baseline mean) / baseline mean, from its history")
    confirmed: str | None = Field(description="the same-job A/B confirmation's status, where one measured this case")
    ratio: float | None = Field(description="the confirmation's head/base time, with its interval [ratio_low, ratio_high]")
    ratio_low: float | None
    ratio_high: float | None
    reason: str = Field(description="why, in words, the environment's changes first")
    resource_changes: list[str] = Field(description="the kernel's resources against the base's, in words")


class ExportedCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha: str
    repo: str
    branch: str | None


class CommitExport(BaseModel):
    """`GET /api/commits/{sha}/export`, `gemmwatch export SHA`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: Literal["gemmwatch.commit-export"] = Field(SCHEMA, alias="schema")
    version: Literal[1] = VERSION
    exported_at: datetime
    commit: ExportedCommit
    results: list[ExportedResult] = Field(description="regressions first, as the commit's page orders them")


def commit_export(view: CommitView, now: datetime) -> CommitExport:
    """The commit view (core/verdicts/commit_view.load_commit) with each row's own result beside it."""
    head = view.commits[0]
    exported = []
    for row in view.rows:
        r = row.result
        if r is None:  # load_commit sets it on every row
            continue
        exported.append(ExportedResult(
            result_id=r.id, job_id=row.job_id, variant=row.variant, gpu=row.gpu, gpu_name=r.gpu.name if r.gpu else None,
            m=row.m, n=row.n, k=row.k, form=row.form, compute_mode=row.compute_mode, status=cast(ResultStatus, r.status),
            gflops=row.gflops, pct_of_cublas=row.pct_of_cublas,
            timing=Timing(median_ms=r.median_ms, q1_ms=r.q1_ms, q3_ms=r.q3_ms, min_ms=r.min_ms, max_ms=r.max_ms,
                          n_samples=r.n_samples, noise=r.noise, mode=r.mode),
            verdict=row.status, delta=row.delta, confirmed=row.confirmed, ratio=row.ratio, ratio_low=row.low,
            ratio_high=row.high, reason=row.reason, resource_changes=list(row.resource_changes)))
    return CommitExport(schema=SCHEMA, version=VERSION, exported_at=now, commit=ExportedCommit(sha=head.sha, repo=head.repo, branch=head.branch),
                        results=exported)


def json_schema() -> dict:
    """The JSON Schema of version 1, as docs/schemas/commit-export-1.json holds it."""
    schema = CommitExport.model_json_schema(by_alias=True, mode="serialization")  # every field is written
    schema["required"] = ["schema", "version", *schema["required"]]  # a reader tells the shape by them
    schema["$id"] = f"{SCHEMA}/{VERSION}"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
