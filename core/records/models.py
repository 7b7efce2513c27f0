"""SQLAlchemy models: the database is the source of truth for jobs and results."""

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class UtcDateTime(TypeDecorator):
    """Timestamps are UTC everywhere; SQLite forgets the zone, so it is put back on read."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, datetime: UtcDateTime}


class Gpu(Base):
    """A physical GPU as the worker found it (one row per UUID)."""

    __tablename__ = "gpu"

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(80), unique=True)
    name: Mapped[str] = mapped_column(String(120))
    model: Mapped[str] = mapped_column(String(60), index=True)
    sm_count: Mapped[int | None]
    compute_capability: Mapped[str | None] = mapped_column(String(10))
    memory_mib: Mapped[int | None]
    driver: Mapped[str | None] = mapped_column(String(40))
    first_seen: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # The token whose post first named this GPU; only it (or an admin) may change the record.
    # NULL: a worker registered it (the fleet owns it) or it predates tokens owning GPUs.
    owner_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_token.id"))


class Commit(Base):
    __tablename__ = "commit"
    __table_args__ = (UniqueConstraint("repo", "sha", name="uq_commit_repo_sha"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sha: Mapped[str] = mapped_column(String(64), index=True)
    repo: Mapped[str] = mapped_column(String(200), default="")
    branch: Mapped[str | None] = mapped_column(String(200))
    message: Mapped[str | None] = mapped_column(Text)
    committed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Parent shas as `git rev-parse HEAD^@` gives them (first parent first); history follows the
    # first-parent chain, and falls back to commit time where no parents were sent.
    parents: Mapped[list[Any] | None] = mapped_column(JSON)
    # First time gemmwatch saw this commit: orders history when no commit date was sent.
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # The token whose write first recorded it: its identity (branch, parents, message, date) is
    # changed only by that token, a token granted its repository, or an admin (core/records/commit_records.py).
    # NULL: recorded with writes open, or before commits had owners.
    owner_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_token.id"))


class Job(Base):
    __tablename__ = "job"
    __table_args__ = (
        # A posted run_id is its token's own (issue 37, row 10): another token posting the same
        # id makes a run of its own, never takes this one's place. Without a token (writes open),
        # one namespace for all.
        UniqueConstraint("submitted_by_token_id", "run_id", name="uq_job_token_run_id"),
        Index("uq_job_run_id_without_token", "run_id", unique=True,
              sqlite_where=text("submitted_by_token_id IS NULL"), postgresql_where=text("submitted_by_token_id IS NULL")),
        Index("ix_job_worker_finished", "worker", "finished_at"),  # the fleet's jobs per worker in the last day
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    # "bench": each variant once per size; "autotune": every tunable combination per size.
    kind: Mapped[str] = mapped_column(String(16), default="bench", server_default="bench")
    variants: Mapped[list[Any]]
    sizes: Mapped[list[Any]]
    # Explicit tunables per variant ({"warp_tile": {"BK": 16}}); others use the tuned or default values.
    tunables: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    # Kernels the job brought: [{name, source, entry, block, tile, defines}, ...].
    sources: Mapped[list[Any]] = mapped_column(default=list, server_default="[]")
    # The cases as planned once the GPU was known, so a re-run after a worker death repeats them.
    plan: Mapped[list[Any] | None] = mapped_column(JSON)
    gpu_model: Mapped[str | None] = mapped_column(String(60))
    queue: Mapped[str] = mapped_column(String(80))
    commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id"))
    gpu_id: Mapped[int | None] = mapped_column(ForeignKey("gpu.id"))
    progress_done: Mapped[int] = mapped_column(Integer, default=0)
    progress_total: Mapped[int] = mapped_column(Integer, default=0)
    current_case: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Last time the job was published to the broker (first by the API, again by the reaper).
    enqueued_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Set on results measured elsewhere and posted (POST /api/results): re-posting a run adds nothing.
    run_id: Mapped[str | None] = mapped_column(String(100))
    # kind "confirm": {"base_job", "head_job", "base_sha", "head_sha"}, the two jobs whose kernels it times.
    confirm: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The timing mode the job asked for (cold, hot, burst, sustained), over each kernel's own and the
    # worker's GEMMWATCH_TIMING_MODE; NULL: not asked.
    timing: Mapped[str | None] = mapped_column(String(16))
    # The token that submitted it (a `jobs` token may cancel only its own); NULL without write auth.
    submitted_by_token_id: Mapped[int | None] = mapped_column(ForeignKey("api_token.id"))

    commit: Mapped[Commit | None] = relationship(lazy="joined")
    gpu: Mapped[Gpu | None] = relationship(lazy="joined")
    results: Mapped[list["Result"]] = relationship(
        back_populates="job", order_by="Result.case_index", cascade="all, delete-orphan"
    )


class Result(Base):
    """One measured case: a variant at one size, timed beside cuBLAS in the same job."""

    __tablename__ = "result"
    __table_args__ = (
        # Writing the same case twice (a retried task) updates, never duplicates.
        UniqueConstraint("job_id", "case_index", name="uq_result_job_case"),
        # Serves the history query: one series per variant, GPU and size, across commits.
        Index("ix_result_history", "variant", "gpu_id", "m", "n", "k", "commit_id"),
        # Serves the dashboard (docs/BENCHMARKS.md): its filters (mode, form, size, GPU) lead; every
        # view holds one mode and one form, so the sizes menu is a loose scan under both; commit_id
        # next lets the history fetch only its newest commits' rows; the rest makes the commit
        # list, the overview's newest results and the menus' distinct values index-only reads.
        Index("ix_result_dashboard", "mode", "form", "m", "n", "k", "gpu_id", "commit_id", "verified", "variant", "id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"))
    case_index: Mapped[int]
    variant: Mapped[str] = mapped_column(String(120))
    m: Mapped[int]
    n: Mapped[int]
    k: Mapped[int]
    dtype: Mapped[str] = mapped_column(String(16), default="float32")
    mode: Mapped[str] = mapped_column(String(16), default="cold")
    compute_mode: Mapped[str] = mapped_column(String(16), default="fp32")
    # The GEMM's form, its key (core/description/gemm_form.py): "rrr", "rcr+ab+acc16", ... A TN figure and an
    # NN one are different GEMMs: every history, baseline and chart holds one form.
    form: Mapped[str] = mapped_column(String(40), default="rrr", server_default="rrr")
    gpu_id: Mapped[int | None] = mapped_column(ForeignKey("gpu.id"))
    commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id"))
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    # passed / incorrect / not applicable / failed / cancelled (core/results/result_status.py)
    status: Mapped[str] = mapped_column(String(16), default="failed", server_default="failed")
    rel_error: Mapped[float | None] = mapped_column(Float)
    median_ms: Mapped[float | None] = mapped_column(Float)
    gflops: Mapped[float | None] = mapped_column(Float)
    cublas_median_ms: Mapped[float | None] = mapped_column(Float)
    cublas_gflops: Mapped[float | None] = mapped_column(Float)
    pct_of_cublas: Mapped[float | None] = mapped_column(Float)
    tunables: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    # median_ms, cublas_median_ms (above) and these: core/results/timing_stats.py RESULT_STATISTICS
    mean_ms: Mapped[float | None] = mapped_column(Float)
    stddev_ms: Mapped[float | None] = mapped_column(Float)
    min_ms: Mapped[float | None] = mapped_column(Float)
    max_ms: Mapped[float | None] = mapped_column(Float)
    q1_ms: Mapped[float | None] = mapped_column(Float)
    q3_ms: Mapped[float | None] = mapped_column(Float)
    noise: Mapped[float | None] = mapped_column(Float)
    converged: Mapped[bool] = mapped_column(Boolean, default=False)
    case_s: Mapped[float | None] = mapped_column(Float)  # the case's wall time in the GPU process
    error: Mapped[str | None] = mapped_column(Text)
    # Launch configuration, clocks/temperatures before and after, software versions.
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    samples_ms: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

    job: Mapped[Job] = relationship(back_populates="results")
    gpu: Mapped[Gpu | None] = relationship(lazy="joined")
    commit: Mapped[Commit | None] = relationship(lazy="joined")


class TunedConfig(Base):
    """The fastest verified tunables found by an autotune job, per GPU model, kernel and size.

    Kept under the kernel's hash (core/records/kernel_store.py kernel_hash: its files, defines, tunables,
    entry, ...; not its name): only the same kernel inherits it, so a job's own kernel that shares a
    built-in's name neither picks up nor overwrites the built-in's (issue 37, row 6)."""

    __tablename__ = "tuned_config"
    __table_args__ = (UniqueConstraint("gpu_model", "variant", "kernel_hash", "m", "n", "k", name="uq_tuned_config"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_model: Mapped[str] = mapped_column(String(60))
    variant: Mapped[str] = mapped_column(String(120))
    kernel_hash: Mapped[str] = mapped_column(String(64))
    m: Mapped[int]
    n: Mapped[int]
    k: Mapped[int]
    tunables: Mapped[dict[str, Any]]
    gflops: Mapped[float] = mapped_column(Float)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"))
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class KernelSource(Base):
    """Every kernel source a job ran, by its SHA-256: a built-in variant's code changes with the
    deployment, so the source as it was is kept for a later re-measurement."""

    __tablename__ = "kernel_source"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ApiToken(Base):
    """A bearer token for writes. Only its SHA-256 is stored; the token is shown once, at creation."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # What it may do, space-separated (core/records/tokens.py SCOPES); tokens made before scopes: "jobs results".
    scopes: Mapped[str] = mapped_column(String(200), default="jobs results", server_default="jobs results")
    # Repositories whose commits it may correct though another token recorded them (issue 37, row 4).
    repos: Mapped[list[Any] | None] = mapped_column(JSON)


class DashboardSession(Base):
    """A dashboard login: the signed cookie names a row here, so logging out ends it on the server.
    Only the SHA-256 of the session's random id is stored."""

    __tablename__ = "dashboard_session"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_token.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class Worker(Base):
    """One Celery worker, which owns one GPU. It registers at start (worker/fleet.py), beats every
    few seconds while it lives, and is marked offline by the reaper when the beats stop."""

    __tablename__ = "worker"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)  # Celery node name, e.g. gpu0@node-a
    host: Mapped[str] = mapped_column(String(200))
    gpu_id: Mapped[int | None] = mapped_column(ForeignKey("gpu.id"))
    gpu_index: Mapped[int | None] = mapped_column(Integer)  # NVML index on its host
    model: Mapped[str] = mapped_column(String(60), index=True)
    queues: Mapped[list[Any]] = mapped_column(default=list)
    version: Mapped[str] = mapped_column(String(40))
    pid: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="online")  # online | offline | stopped
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_beat_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    offline_since: Mapped[datetime | None] = mapped_column(UtcDateTime)

    gpu: Mapped[Gpu | None] = relationship(lazy="joined")



class Profile(Base):
    """The profile diff of one confirmation result (issue 39): its base and head kernels profiled
    with Nsight Compute in the job that timed them, after its timed samples, and their SASS
    compared (worker/profile/profile_step.py makes it, core/profile/profile_diff.py ranks it). One per result: a
    profile asked again replaces it."""

    __tablename__ = "profile"
    id: Mapped[int] = mapped_column(primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"), unique=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), index=True)
    # "profiled": Nsight Compute and the SASS; "sass only": the SASS, `reason` says why no profile;
    # "failed": neither, `reason` says why.
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text, default="")  # one line per kernel: what moved most
    # Each kernel's ProfileDiff.to_json(), the tools' versions and the profile's wall time.
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
