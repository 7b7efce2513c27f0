"""The wire contract (pydantic). Names follow docs/ARCHITECTURE.md ("Words"); extend, never rename."""

import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator, model_validator

from core.description.builtins import builtin_kernels, variant_names
from core.description.kernel_description import KernelDescription
from core.description.timing_modes import TimingMode
from core.results.result_env import ENV_SCHEMA_ID
from core.results.result_status import MEANING, ResultStatus
from api.wire_words import CommitIn, GpuModel, Identifier, Sha  # noqa: F401 (part of the wire contract)
from core.wire_types import Int32, Integer
from core.results.timing_stats import timing_fields
from core.verdicts.baselines import VerdictOut  # noqa: F401 (part of the wire contract)
from core.verdicts.confirm import MAX_SOURCES_PER_JOB, ConfirmationOut, ConfirmIn  # noqa: F401 (part of the wire contract)
from core.jobs.job_states import JobStatus  # noqa: F401 (part of the wire contract)

JobKind = Literal["bench", "autotune"]
# A confirm job is made by POST /api/jobs/{id}/confirm, never posted as a job of its own.
AnyJobKind = Literal["bench", "autotune", "confirm"]

# One of M, N, K as a job asks for it: an integer (64 or 64.0), never "64" or true.
Dim = Integer()


# The largest M, N or K the schema itself admits; a deployment's own limit (GEMMWATCH_MAX_DIM) is
# checked by the route with the app's settings (api/limits.py).
MAX_DIM = 1 << 20
MAX_BATCH = 65535  # CUDA's largest grid z




class LimitsOut(BaseModel):
    """What one job may hold on this deployment; a job past one is refused with a 422 naming it.
    `gemmwatch ci` reads them to split a commit's kernels into jobs that fit."""

    max_cases_per_job: int
    max_autotune_cases: int
    max_sources_per_job: int
    # Jobs one token may have queued or running at once (GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN).
    max_queued_jobs_per_token: int | None = None
    max_dim: int
    max_source_bytes: int
    # The bytes a job's request body may hold (GEMMWATCH_MAX_JOB_BYTES): each kernel's files as posted,
    # a header shared by several kernels once in each.
    max_job_bytes: int | None = None


class JobCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"variants": ["naive", "smem_tiled"], "sizes": [[1024, 1024, 1024]]}]
        },
    )

    sources: list[KernelDescription] = Field(
        default_factory=list, max_length=MAX_SOURCES_PER_JOB,
        description="the job's own kernels, each in the kernel description of docs/KERNELS.md "
                    "(JSON Schema: GET /api/kernels/schema)")
    variants: list[str] = Field(
        default_factory=list, description="names from GET /api/variants or from sources (default: all sources)"
    )
    sizes: list[list[Dim]] = Field(min_length=1, max_length=256,
                                   description="[[M, N, K], ...]; [M, N, K, batch] for a batch of GEMMs of that size "
                                               "in one call (a batched kernel, cuBLAS's strided batch)")
    commit: CommitIn | None = None
    gpu: GpuModel | None = Field(default=None, description="GPU model, e.g. H100; any GPU when omitted")
    kind: JobKind = Field(
        default="bench",
        description="bench: each variant once per size; autotune: every tunable combination per size,"
        " and the fastest verified one becomes the default for that GPU model and size",
    )
    tunables: dict[str, dict[str, Int32]] = Field(
        default_factory=dict,
        description='bench only: tunables per variant, e.g. {"warp_tile": {"BK": 16}};'
        " otherwise the tuned configuration for the GPU and size, or the kernel's defaults",
    )
    timing: TimingMode | None = Field(
        default=None,
        description="the timing mode of every case: cold (nvbench's cold samples: L2 flushed, each sample alone), "
                    "hot (do_bench's loop), burst (a few back-to-back launches after a pause: a repository's own "
                    "quick runner), sustained (a loop that has met the power cap); default: each kernel's own "
                    "`timing`, else the worker's GEMMWATCH_TIMING_MODE (README, \"Which timing mode\")",
    )

    def kernels(self) -> dict[str, KernelDescription]:
        """The kernels this job may name: the built-ins, with its own sources in their place."""
        return {**builtin_kernels(), **{s.name: s for s in self.sources}}

    @field_validator("variants")
    @classmethod
    def _known_variants(cls, names: list[str], info: ValidationInfo) -> list[str]:
        own = [s.name for s in info.data.get("sources", [])]
        known = variant_names()
        unknown = [n for n in names if n not in known and n not in own]
        if unknown:
            raise ValueError(
                f"unknown variant(s) {unknown}; known variants: {', '.join(known)}"
                + (f"; the job's sources: {', '.join(own)}" if own else "")
            )
        if len(set(names)) != len(names):
            raise ValueError("each variant may be listed once")
        return names

    @field_validator("sizes")
    @classmethod
    def _sizes_in_range(cls, sizes: list[list[int]]) -> list[list[int]]:
        for i, size in enumerate(sizes):
            if len(size) not in (3, 4):
                raise ValueError(f"sizes[{i}] must be [M, N, K] or [M, N, K, batch], got {size}")
            if min(size) < 1:
                named = "M, N, K and the batch" if len(size) == 4 else "M, N, K"
                raise ValueError(f"sizes[{i}] = {size}: each of {named} must be at least 1")
            if max(size[:3]) > MAX_DIM:
                raise ValueError(f"sizes[{i}] = {size}: each of M, N, K must be in 1..{MAX_DIM}")
            if len(size) == 4 and size[3] > MAX_BATCH:
                raise ValueError(f"sizes[{i}] = {size}: batch must be in 1..{MAX_BATCH} (a tile grid walks the "
                                 "batch along grid z)")
        return sizes

    @model_validator(mode="after")
    def _variants_or_sources(self) -> "JobCreate":
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError("each source needs its own name")
        if not self.variants:
            if not self.sources:
                raise ValueError("'variants' is empty: give at least one variant (GET /api/variants) or a source")
            self.variants = names
        return self

    @model_validator(mode="after")
    def _tunables_are_allowed(self) -> "JobCreate":
        kernels = self.kernels()
        for name, params in self.tunables.items():
            if name not in self.variants:
                raise ValueError(f"tunables given for {name!r}, which is not among the job's variants")
            if name not in kernels:
                raise ValueError(f"{name!r} is cuBLAS: it has no tunables")
            kernels[name].check_tunables(params)  # ValueError names the allowed values
        if self.tunables and self.kind == "autotune":
            raise ValueError("an autotune job sweeps every tunable; leave 'tunables' out")
        return self

    def case_count(self) -> int:
        if self.kind == "bench":
            return len(self.variants) * len(self.sizes)
        kernels = self.kernels()
        # Counted, not listed (issue 37, row 7): a description may have up to 4096 configurations.
        return len(self.sizes) * sum(math.prod(len(t.values) for t in kernels[v].tunables.values()) if v in kernels
                                     else 1 for v in self.variants)


CONVERGED = (
    "The stop rule held for the variant and its interleaved cuBLAS samples: at least GEMMWATCH_MIN_SAMPLES "
    "samples over at least GEMMWATCH_MIN_TIME_S of sampling; the median's distribution-free 95 % confidence "
    "interval within +-GEMMWATCH_MAX_NOISE of it; the medians of the first and second halves within "
    "GEMMWATCH_MAX_DRIFT of each other. False: the case's time cap ended it first (the figure is still the "
    "median of what was measured). Samples taken while NVML reported throttled clocks are dropped, unless "
    "throttled batches outnumber clean ones (env.throttled_samples_kept: the kernel's steady state under a "
    "power cap, judged on every sample).")


class Progress(BaseModel):
    done: int
    total: int


class CommitOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    sha: str
    repo: str
    branch: str | None
    message: str | None
    committed_at: datetime | None
    parents: list[str] | None = None


class GpuOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    model: str
    uuid: str
    sm_count: int | None
    compute_capability: str | None
    memory_mib: int | None
    driver: str | None
    last_seen: datetime


class _ResultFields(BaseModel):
    """ResultOut but its timing statistics, which core/results/timing_stats.py declares (below)."""

    id: int
    job_id: int
    variant: str
    m: int
    n: int
    k: int
    dtype: str
    mode: str
    compute_mode: str
    form: str = Field(description='the GEMM\'s form, its key (core/description/gemm_form.py): "rrr" is A, B, C row-major, '
                                  'C = alpha·A·B + beta·C, FP32 sums; "rcr+ab+acc16" B column-major, C = A·B, FP16 sums')
    gpu: str | None
    commit: str | None
    gflops: float | None
    cublas_gflops: float | None
    pct_of_cublas: float | None
    tunables: dict[str, int]
    rel_error: float | None
    verified: bool
    status: ResultStatus = Field(description=" / ".join(f"{k}: {v}" for k, v in MEANING.items()))
    n_samples: int
    converged: bool = Field(description=CONVERGED)
    error: str | None
    env: dict[str, Any]
    created_at: datetime

    @classmethod
    def from_row(cls, r, samples: bool = False) -> "ResultOut":
        """A result as lists carry it: without its raw samples (env.cublas_samples_ms, env.ab.base_ms;
        issue 37, row 8: a list of results with 100,000 samples each was 62 MB for every reader) nor
        a posted run's env.extra. GET /api/results/{id} has them (samples=True)."""
        fields = {name: getattr(r, name) for name in cls.model_fields if name not in ("gpu", "commit", "env")}
        env = dict(r.env or {})
        if not samples:
            env.pop("cublas_samples_ms", None)
            # A posted run's free-form env.extra (up to 64 KiB a result) only on the result's own page:
            # 490 results of it made one list 328 MB (issue 49, row 4).
            env.pop("extra", None)
            if isinstance(env.get("ab"), dict):
                env["ab"] = {key: value for key, value in env["ab"].items() if key != "base_ms"}
        return cls(**fields, env=env, gpu=r.gpu.name if r.gpu else None, commit=r.commit.sha if r.commit else None)


# Every field of a result row, its statistics (core/results/timing_stats.py RESULT_STATISTICS) last: each
# one said, null where the case has none.
ResultOut = create_model("ResultOut", __base__=_ResultFields, __doc__="One result: a case's verdict and its timing.",
                         **timing_fields(float, float, required=True))


class ResultDetailOut(ResultOut):
    samples_ms: list[float] = Field(description="the variant's raw samples, in the order taken")
    posted_by: str | None = Field(None, description="the token that posted this result's run (POST /api/results): "
                                                    "its figures are that token's word; null where a worker measured it")
    other_modes: dict[str, dict[str, float | int]] = Field(
        default_factory=dict, description="the same case on the same commit and GPU timed in another mode: its "
                                          "GFLOPS, this result's GFLOPS over it (ratio) and its result_id "
                                          "(README, \"Which timing mode\")")
    env_schema: str = Field(ENV_SCHEMA_ID, description="the versioned shape of env (docs/schemas/result-env-1.json)")

    @classmethod
    def from_row(cls, r, samples: bool = True, posted_by: str | None = None,
                 other_modes: dict | None = None) -> "ResultDetailOut":
        return cls(**ResultOut.from_row(r, samples=True).model_dump(), samples_ms=r.samples_ms or [],
                   posted_by=posted_by, other_modes=other_modes or {})


class JobOut(BaseModel):
    id: int
    kind: AnyJobKind
    status: JobStatus
    progress: Progress
    current_case: str | None
    error: str | None
    variants: list[str]
    sizes: list[list[int]]
    tunables: dict[str, dict[str, int]]
    timing: str | None = Field(None, description="the timing mode the job asked for (each result's `mode` is the "
                                                 "one it was timed in)")
    gpu: str | None = Field(description="the GPU model asked for")
    queue: str
    ran_on: str | None = Field(description="name of the GPU that ran the job")
    worker: str | None
    commit: CommitOut | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    waiting: str | None = Field(None, description="why a queued job has not started, e.g. no live worker serves its queue")
    results: list[ResultOut]

    @classmethod
    def from_row(cls, job, with_results: bool = True, waiting: str | None = None) -> "JobOut":
        return cls(
            id=job.id,
            kind=job.kind,
            status=job.status,
            progress=Progress(done=job.progress_done, total=job.progress_total),
            current_case=job.current_case,
            error=job.error,
            variants=job.variants,
            sizes=job.sizes,
            tunables=job.tunables or {},
            timing=job.timing,
            gpu=job.gpu_model,
            queue=job.queue,
            ran_on=job.gpu.name if job.gpu else None,
            worker=job.worker,
            commit=CommitOut.model_validate(job.commit) if job.commit else None,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            waiting=waiting,
            results=[ResultOut.from_row(r) for r in job.results] if with_results else [],
        )


class RunningJobOut(BaseModel):
    id: int
    progress: Progress
    current_case: str | None


class WorkerOut(BaseModel):
    name: str = Field(description="Celery node name, e.g. gpu0@node-a")
    host: str
    model: str = Field(description="GPU model it serves ('none': no GPU)")
    gpu: str | None = Field(description="the GPU's full name")
    gpu_uuid: str | None
    gpu_index: int | None = Field(description="the GPU's index on its host")
    queues: list[str]
    version: str
    state: Literal["idle", "running", "offline", "stopped"]
    job: RunningJobOut | None = Field(description="the job it runs now")
    since: datetime | None = Field(description="offline or stopped since")
    started_at: datetime
    last_beat_at: datetime
    jobs_last_day: int = Field(description="jobs it ended in the last 24 hours")

    @classmethod
    def from_view(cls, w) -> "WorkerOut":
        row, job = w.row, w.job
        return cls(
            name=row.name, host=row.host, model=row.model, gpu=row.gpu.name if row.gpu else None,
            gpu_uuid=row.gpu.uuid if row.gpu else None, gpu_index=row.gpu_index, queues=row.queues or [],
            version=row.version, state=w.state, since=w.since, started_at=row.started_at,
            last_beat_at=row.last_beat_at, jobs_last_day=w.jobs_last_day,
            job=RunningJobOut(id=job.id, progress=Progress(done=job.progress_done, total=job.progress_total),
                              current_case=job.current_case) if job else None,
        )


class QueueOut(BaseModel):
    queue: str
    queued: int = Field(description="jobs waiting in it")
    live_workers: int
    busy_workers: int


class VariantOut(BaseModel):
    name: str
    technique: str
    seed: str | None
    source_file: str | None
    entry: str
    compute_mode: str
    precision: str  # compute mode and output type: "bf16", "bf16->fp32", "fp32" ...
    form: str = Field("rrr", description="the GEMM's form key (core/description/gemm_form.py), as its results carry it")
    target: str | None
    tunables: list[dict[str, Any]]


class TunedConfigOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    gpu_model: str
    variant: str
    kernel_hash: str = Field(description="the kernel it was found for (its description's hash but its name): "
                                         "only that kernel inherits it")
    m: int
    n: int
    k: int
    tunables: dict[str, int]
    gflops: float
    job_id: int
    updated_at: datetime



class ProfileOut(BaseModel):
    """A confirmation result's profile diff (issue 39; docs/ARCHITECTURE.md, "Why it got slower")."""

    model_config = ConfigDict(from_attributes=True)

    result_id: int
    job_id: int
    status: Literal["profiled", "sass only", "failed"]
    reason: str | None = Field(description="why there is no Nsight Compute profile (or no diff at all), where none")
    summary: str = Field(description="one line per kernel: the effect (duration) and what moved most")
    data: dict[str, Any] = Field(description="kernels: each kernel's ranked rows, the main loop's SASS diff and "
                                             "instruction counts; the tools' versions; the profiler's wall time")
    started_at: datetime
    finished_at: datetime
