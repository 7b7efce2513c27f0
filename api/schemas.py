"""The wire contract (pydantic). Names follow DESIGN.md; extend, never rename."""

from datetime import datetime
from typing import Annotated, Any, Literal

import json

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from api.settings import settings
from api.source_guard import SourceRefused, check_source
from kernels.registry import VARIANTS
from kernels.tuning import configurations

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JobKind = Literal["bench", "autotune"]
# A confirm job is made by POST /api/jobs/{id}/confirm, never posted as a job of its own.
AnyJobKind = Literal["bench", "autotune", "confirm"]
TERMINAL_STATUSES = ("succeeded", "failed", "cancelled")

GpuModel = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,59}$")]
# What the database can hold: 32-bit integers and finite floats (JSON has no NaN or Infinity).
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class CommitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha: Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")] = Field(
        description="commit hash, 4 to 64 hex digits"
    )
    repo: Annotated[str, StringConstraints(max_length=200)] = ""
    branch: Annotated[str, StringConstraints(max_length=200)] | None = None
    message: Annotated[str, StringConstraints(max_length=10_000)] | None = None
    committed_at: datetime | None = None
    parents: list[Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")]] | None = Field(
        default=None, max_length=64,
        description="parent shas, first parent first (`git rev-parse HEAD^@`); history follows the first parent",
    )


Identifier = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]


class SourceIn(BaseModel):
    """A kernel the job brings with it, described as the registry describes the built-ins."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")] = Field(
        description="variant name (snake_case); a built-in's name means this commit's version of it"
    )
    source: str = Field(description="CUDA C++ source; self-contained (no #include)")
    entry: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_:]*(<[A-Za-z0-9_, ]*>)?$", max_length=200)] = (
        Field(description='kernel name, or a template name expression such as "sgemm<128, 8>"')
    )
    block: list[int] = Field(min_length=1, max_length=3, description="threads per block [x, y, z]")
    tile: list[int] = Field(min_length=2, max_length=2, description="[rows, cols] of C per block; the grid follows")
    defines: dict[Identifier, Int32] = Field(default_factory=dict, max_length=32, description="-D options")

    @field_validator("source")
    @classmethod
    def _source_is_safe(cls, text: str) -> str:
        if len(text.encode()) > settings.max_source_bytes:
            raise ValueError(f"source is {len(text.encode())} bytes; at most {settings.max_source_bytes}")
        try:
            check_source(text)  # layer 1 of 3 (api/source_guard.py); the compile is confined too
        except SourceRefused as refusal:
            raise ValueError(f"source refused at {refusal}") from None
        return text

    @field_validator("block")
    @classmethod
    def _block_fits(cls, block: list[int]) -> list[int]:
        block = block + [1] * (3 - len(block))
        if min(block) < 1 or block[0] * block[1] * block[2] > 1024:
            raise ValueError(f"block {block}: each dimension >= 1 and at most 1024 threads in all")
        return block

    @field_validator("tile")
    @classmethod
    def _tile_positive(cls, tile: list[int]) -> list[int]:
        if not all(1 <= t <= 4096 for t in tile):
            raise ValueError(f"tile {tile}: each of rows, cols must be in 1..4096")
        return tile


class JobCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"variants": ["naive", "smem_tiled"], "sizes": [[4096, 4096, 4096]], "gpu": "H100"}]
        },
    )

    sources: list[SourceIn] = Field(default_factory=list, max_length=32, description="the job's own kernels")
    variants: list[str] = Field(
        default_factory=list, description="names from GET /api/variants or from sources (default: all sources)"
    )
    sizes: list[list[int]] = Field(min_length=1, description="[[M, N, K], ...]")
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
        " otherwise the tuned configuration for the GPU and size, or the registry default",
    )

    @field_validator("variants")
    @classmethod
    def _known_variants(cls, names: list[str], info: ValidationInfo) -> list[str]:
        own = [s.name for s in info.data.get("sources", [])]
        unknown = [n for n in names if n not in VARIANTS and n not in own]
        if unknown:
            raise ValueError(
                f"unknown variant(s) {unknown}; known variants: {', '.join(VARIANTS)}"
                + (f"; the job's sources: {', '.join(own)}" if own else "")
            )
        if len(set(names)) != len(names):
            raise ValueError("each variant may be listed once")
        return names

    @field_validator("sizes")
    @classmethod
    def _sizes_in_range(cls, sizes: list[list[int]]) -> list[list[int]]:
        hi = settings.max_dim
        for i, size in enumerate(sizes):
            if len(size) != 3:
                raise ValueError(f"sizes[{i}] must be [M, N, K], got {size}")
            if not all(1 <= d <= hi for d in size):
                raise ValueError(f"sizes[{i}] = {size}: each of M, N, K must be in 1..{hi}")
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
        for name, params in self.tunables.items():
            if name not in self.variants:
                raise ValueError(f"tunables given for {name!r}, which is not among the job's variants")
            if name not in VARIANTS or name in {s.name for s in self.sources}:
                raise ValueError(f"{name!r} is the job's own kernel: set its values with the source's 'defines'")
            VARIANTS[name].check_params(params)  # ValueError names the allowed values
        if self.tunables and self.kind == "autotune":
            raise ValueError("an autotune job sweeps every tunable; leave 'tunables' out")
        return self

    @model_validator(mode="after")
    def _not_too_many_cases(self) -> "JobCreate":
        cases = self.case_count()
        limit = settings.max_autotune_cases if self.kind == "autotune" else settings.max_cases_per_job
        if cases > limit:
            raise ValueError(f"this {self.kind} job has {cases} cases; at most {limit} per {self.kind} job")
        return self

    def case_count(self) -> int:
        if self.kind == "bench":
            return len(self.variants) * len(self.sizes)
        own = {s.name for s in self.sources}
        return len(self.sizes) * sum(
            1 if v in own or v not in VARIANTS else len(configurations(VARIANTS[v])) for v in self.variants
        )


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


class ResultOut(BaseModel):
    id: int
    job_id: int
    variant: str
    m: int
    n: int
    k: int
    dtype: str
    mode: str
    compute_mode: str
    gpu: str | None
    commit: str | None
    median_ms: float | None
    gflops: float | None
    cublas_median_ms: float | None
    cublas_gflops: float | None
    pct_of_cublas: float | None
    tunables: dict[str, int]
    rel_error: float | None
    verified: bool
    n_samples: int
    mean_ms: float | None
    stddev_ms: float | None
    min_ms: float | None
    max_ms: float | None
    q1_ms: float | None
    q3_ms: float | None
    noise: float | None
    converged: bool = Field(description=CONVERGED)
    error: str | None
    env: dict[str, Any]
    created_at: datetime

    @classmethod
    def from_row(cls, r) -> "ResultOut":
        fields = {name: getattr(r, name) for name in cls.model_fields if name not in ("gpu", "commit")}
        return cls(**fields, gpu=r.gpu.name if r.gpu else None, commit=r.commit.sha if r.commit else None)


class ResultDetailOut(ResultOut):
    samples_ms: list[float] = Field(description="the variant's raw samples, in the order taken")

    @classmethod
    def from_row(cls, r) -> "ResultDetailOut":
        return cls(**ResultOut.from_row(r).model_dump(), samples_ms=r.samples_ms or [])


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
    tunables: list[dict[str, Any]]


class TunedConfigOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    gpu_model: str
    variant: str
    m: int
    n: int
    k: int
    tunables: dict[str, int]
    gflops: float
    job_id: int
    updated_at: datetime


class VerdictOut(BaseModel):
    result_id: int
    variant: str
    m: int
    n: int
    k: int
    gflops: float | None
    pct_of_cublas: float | None
    verified: bool
    status: Literal["regression", "ok", "faster", "no baseline", "unverified"]
    delta: float | None = Field(description="(gflops - baseline mean) / baseline mean")
    baseline_mean: float | None
    baseline_points: int
    reason: str
    resource_changes: list[str] = Field(default_factory=list,
                                        description="kernel resources vs the base commit's result, in words")


Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{4,64}$")]


class ConfirmIn(BaseModel):
    """Which of the head job's cases to confirm, against which base commit."""

    model_config = ConfigDict(extra="forbid")

    base: Sha | None = Field(default=None, description="base commit sha (or prefix); default: the head commit's"
                             " first parent, else the previous commit on its branch")
    variants: list[Annotated[str, StringConstraints(max_length=120)]] | None = Field(
        default=None, max_length=32, description="default: every verified variant of the head job")
    sizes: list[list[int]] | None = Field(default=None, max_length=64, description="[[M, N, K], ...]; default: all")


class ConfirmationOut(BaseModel):
    result_id: int
    variant: str
    m: int
    n: int
    k: int
    status: Literal["regression", "improvement", "no change", "undecided", "failed"]
    ratio: float | None = Field(description="median head/base time per pair: 1.03 = head 3 % slower")
    low: float | None = Field(description="lower end of the ratio's confidence interval")
    high: float | None
    pairs: int
    head_gflops: float | None
    base_gflops: float | None
    head_resources: dict[str, Any] | None
    base_resources: dict[str, Any] | None
    resource_changes: list[str]
    reason: str


def _numbers(value: Any):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


class GpuIn(BaseModel):
    uuid: Annotated[str, StringConstraints(min_length=1, max_length=80)]
    name: Annotated[str, StringConstraints(min_length=1, max_length=120)]
    model: GpuModel
    sm_count: Int32 | None = None
    compute_capability: Annotated[str, StringConstraints(max_length=10)] | None = None
    memory_mib: Int32 | None = None
    driver: Annotated[str, StringConstraints(max_length=40)] | None = None


class ResultIn(BaseModel):
    """One case measured by `gemmwatch run` on a machine of its own; names as in ResultOut."""

    variant: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")]
    m: int = Field(ge=1, le=1 << 20)
    n: int = Field(ge=1, le=1 << 20)
    k: int = Field(ge=1, le=1 << 20)
    dtype: Literal["float32"] = "float32"
    mode: Literal["cold", "hot"] = "cold"
    compute_mode: Literal["fp32", "tf32"] = "fp32"
    tunables: dict[Identifier, Int32] = Field(default_factory=dict, max_length=32)
    verified: bool
    rel_error: Finite | None = Field(default=None, ge=0)
    median_ms: Finite | None = Field(default=None, gt=0)
    mean_ms: Finite | None = None
    stddev_ms: Finite | None = None
    min_ms: Finite | None = None
    max_ms: Finite | None = None
    q1_ms: Finite | None = None
    q3_ms: Finite | None = None
    gflops: Finite | None = Field(default=None, ge=0)
    cublas_median_ms: Finite | None = None
    cublas_gflops: Finite | None = None
    pct_of_cublas: Finite | None = None
    n_samples: int = Field(default=0, ge=0, le=10_000_000)
    noise: Finite | None = None
    converged: bool = False
    error: Annotated[str, StringConstraints(max_length=100_000)] | None = None
    samples_ms: list[Finite] = Field(default_factory=list, max_length=100_000)
    env: dict[str, Any] = Field(default_factory=dict)

    @field_validator("env")
    @classmethod
    def _env_is_plain_json(cls, env: dict[str, Any]) -> dict[str, Any]:
        try:
            text = json.dumps(env, allow_nan=False)
        except ValueError as exc:
            raise ValueError(f"env must be plain JSON without NaN or Infinity ({exc})") from None
        if len(text) > 1_000_000:
            raise ValueError("env is larger than 1 MB")
        if any(isinstance(v, int) and abs(v) >= 2**63 for v in _numbers(env)):
            raise ValueError("env holds an integer beyond 64 bits")
        return env

    @model_validator(mode="after")
    def _no_speed_without_verification(self) -> "ResultIn":
        if not self.verified and self.gflops is not None:
            raise ValueError("an unverified result carries no gflops (a wrong kernel has no speed)")
        return self


class ResultBatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{8,100}$")] = Field(
        description="unique per measured run; posting the same run again adds nothing"
    )
    gpu: GpuIn
    commit: CommitIn | None = None
    results: list[ResultIn] = Field(min_length=1, max_length=1000)


class ResultBatchOut(BaseModel):
    job_id: int
    created: bool
    results: int
