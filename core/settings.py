"""One env-driven settings object for the API, the worker, the dashboard and the CLI.

One way to them per kind of process, each Settings made once as the process starts:
  - the API (and the dashboard it serves): the Settings given to `create_app` (api/app.py), kept
    as the app's state and reached only through core/web_deps.py (`cfg: SettingsDep` in an
    endpoint, `settings_of(request)` where only the request is at hand);
  - a Celery worker: `settings` below, made as the worker process imports this module, passed
    down from its task (worker/tasks.py) as `cfg`; its GPU process makes its own as it starts
    (worker/measure/runner.py CupyRunner: its environment is the worker's), and a launcher case's confined
    process the defaults (worker/measure/launcher_hook.py: the worker's environment does not reach it);
  - the CLI: `settings` below, passed to what a command calls.
Every setting is read from the environment here, and nowhere else.
"""

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.description.timing_modes import TimingMode


class Settings(BaseSettings):
    # The environment only: no `.env` file. Read from the working directory, it made any checked-out
    # tree a source of settings: in CI, a pull request's committed `.env` chose where `gemmwatch ci`
    # sent its token and which libnvrtc the compile loaded (issue 37, row 9; docs/SECURITY.md).
    model_config = SettingsConfigDict(extra="ignore")

    # Where state lives when nothing else is configured: the embedded default.
    data_dir: Path = Field(default=Path(".gemmwatch"), validation_alias="GEMMWATCH_DATA_DIR")

    database_url: str | None = Field(default=None, validation_alias="DATABASE_URL")
    broker_url: str | None = Field(default=None, validation_alias="BROKER_URL")

    # Request limits (the API answers 422 beyond them).
    # No operand may hold more elements than a max_dim x max_dim square (a side may be longer).
    max_dim: int = Field(default=16384, validation_alias="GEMMWATCH_MAX_DIM")
    max_cases_per_job: int = Field(default=64, validation_alias="GEMMWATCH_MAX_CASES")
    # A job's distinct file texts (a runner and headers its kernels share counted once: core/description/source_size.py),
    # checked before the source guard reads any of them (api/job_body.py): the guard's worst case is
    # about 7 us a byte on a 2-core machine (docs/SECURITY.md), so this bounds what one post costs.
    # 2 MB: a repository's GEMM with the header library it carries (ThunderKittens' Hopper GEMM and its
    # 122 headers: 1.5 MB), checked in a process of its own past 64 KB (api/validation_pool.py).
    max_source_bytes: int = Field(default=2_000_000, validation_alias="GEMMWATCH_MAX_SOURCE_BYTES")
    # An autotune job's cases (every configuration of each variant at each size; its variants x
    # sizes count against GEMMWATCH_MAX_CASES too, as a bench job's do): 256 sizes of a kernel with
    # one configuration were accepted, about 4 h of a worker (issue 37, row 7).
    max_autotune_cases: int = Field(default=128, validation_alias="GEMMWATCH_MAX_AUTOTUNE_CASES")
    # Requests a second per client without a token, and writes a second per token (api/rate_limit.py),
    # with a burst of GEMMWATCH_RATE_LIMIT_BURST; 0: no limit (the default).
    rate_limit_anon_per_s: float = Field(default=0.0, ge=0, validation_alias="GEMMWATCH_RATE_LIMIT_ANON_PER_S")
    rate_limit_writes_per_s: float = Field(default=0.0, ge=0, validation_alias="GEMMWATCH_RATE_LIMIT_WRITES_PER_S")
    rate_limit_burst: int = Field(default=50, ge=1, validation_alias="GEMMWATCH_RATE_LIMIT_BURST")
    # Jobs one token may have queued or running at once; one more is a 429 (api/queue_cap.py).
    max_queued_jobs_per_token: int = Field(default=20, ge=1, validation_alias="GEMMWATCH_MAX_QUEUED_JOBS_PER_TOKEN")
    # The most bytes a request body may hold, per route (api/request_gate.py answers 413 beyond,
    # from Content-Length or while the body streams): a job carries its sources (64 of
    # GEMMWATCH_MAX_SOURCE_BYTES at most, with JSON's escapes); a batch of results its samples.
    max_job_bytes: int = Field(default=16 << 20, ge=1 << 16, validation_alias="GEMMWATCH_MAX_JOB_BYTES")
    max_results_bytes: int = Field(default=32 << 20, ge=1 << 16, validation_alias="GEMMWATCH_MAX_RESULTS_BYTES")
    # Issue 37, row 8: the samples one post of results may carry in all (each result's samples_ms,
    # env.cublas_samples_ms and env.ab.base_ms), a 422 beyond; list views never carry samples.
    max_posted_samples: int = Field(default=1_000_000, ge=1000, validation_alias="GEMMWATCH_MAX_POSTED_SAMPLES")

    # Measurement (see worker/measure/timing.py for how they are used).
    warmup_ms: float = Field(default=25.0, validation_alias="GEMMWATCH_WARMUP_MS")
    min_samples: int = Field(default=10, validation_alias="GEMMWATCH_MIN_SAMPLES")
    max_noise: float = Field(default=0.005, validation_alias="GEMMWATCH_MAX_NOISE")
    # Time spent sampling before the stop rule may end a case (worker/measure/cases.py TimingPolicy.satisfied).
    min_time_s: float = Field(default=0.1, validation_alias="GEMMWATCH_MIN_TIME_S")
    # Drop samples taken while NVML reports the clocks held down (power cap, thermal, HW slowdown).
    discard_throttled: bool = Field(default=True, validation_alias="GEMMWATCH_DISCARD_THROTTLED")
    case_time_cap_s: float = Field(default=3.0, validation_alias="GEMMWATCH_CASE_TIME_CAP_S")
    # The call a kernel is timed beside: "best", the fastest of cuBLAS's default and cuBLASLt's
    # heuristic candidates for the case (worker/measure/cublas_best.py; chosen once per GPU, library
    # version, shape, precision and mode, cached), or "default", cuBLAS's own first choice.
    cublas_baseline: Literal["best", "default"] = Field(default="best", validation_alias="GEMMWATCH_CUBLAS_BASELINE")
    max_rel_error: float = Field(default=1e-4, validation_alias="GEMMWATCH_MAX_REL_ERROR")
    # TF32 keeps 10 mantissa bits: its products land near 3e-4 from FP32, so it gets its own bound.
    max_rel_error_tf32: float = Field(default=2e-3, validation_alias="GEMMWATCH_MAX_REL_ERROR_TF32")
    # cold: each sample on its own after an L2 flush; hot: no flush; sustained: cold samples back to
    # back after sustained_warmup_s of them, the clock a tensor-core GEMM settles at under a power
    # cap (worker/measure/cases.py TimingPolicy says why the two cold readings differ there).
    # burst: hot samples in short batches, the card left idle burst_rest_ms before each, so it runs
    # at the clock a repository's own quick runner sees (a few launches after a pause) and never
    # reaches its power cap; a batch NVML saw capped is dropped (docs/BENCHMARKS.md, issue 36).
    timing_mode: TimingMode = Field(default="cold", validation_alias="GEMMWATCH_TIMING_MODE")
    sustained_warmup_s: float = Field(default=1.0, ge=0, le=60, validation_alias="GEMMWATCH_SUSTAINED_WARMUP_S")
    burst_rest_ms: float = Field(default=100.0, ge=0, le=5000, validation_alias="GEMMWATCH_BURST_REST_MS")
    # A sample holds no host launch overhead: a blocking kernel holds the stream while a batch is
    # queued (worker/gpu/stream_hold.py). Off only to show what it changes.
    hold_stream: bool = Field(default=True, validation_alias="GEMMWATCH_HOLD_STREAM")
    # How a cold sample's L2 is evicted: "readwrite" (our kernel) or "memset" (nvbench's way).
    l2_flush: Literal["readwrite", "memset"] = Field(default="readwrite", validation_alias="GEMMWATCH_L2_FLUSH")
    # Order of a batch's samples: each kernel's in a block of its own (default), or alternating. With
    # "pairs", each variant sample followed a cuBLAS kernel, and a small variant read 8-15 % slower
    # than when timed alone or by nvbench on the H100 (docs/BENCHMARKS.md, issue 10): the kernel
    # before it changes what it pays at start. Samples still pair up within a batch for ratios.
    interleave: Literal["pairs", "blocks"] = Field(default="blocks", validation_alias="GEMMWATCH_INTERLEAVE")
    # Cold samples one at a time, each behind its own stream hold and waited for (nvbench's cold
    # measurement); false queues a whole batch behind one hold (worker/measure/timing.py time_pair).
    isolate_samples: bool = Field(default=True, validation_alias="GEMMWATCH_ISOLATE_SAMPLES")
    # Converged also means the medians of the first and second halves of the samples agree this closely.
    max_drift: float = Field(default=0.01, gt=0, validation_alias="GEMMWATCH_MAX_DRIFT")
    # A case (compile, verify, time) taking longer than this is killed and fails its job.
    case_timeout_s: float = Field(default=120.0, validation_alias="GEMMWATCH_CASE_TIMEOUT_S")
    # GPU-process seconds one job may spend across its cases (compiles included); once spent, the
    # case running is stopped and the rest end with "job budget of N s spent" (worker/gpu_process.py).
    job_budget_s: float = Field(default=1800.0, gt=0, validation_alias="GEMMWATCH_JOB_BUDGET_S")

    # Access: writes (jobs, results) need a bearer token; reads of /api are public unless set.
    # Threads one API process runs blocking work on (database, broker). Few on purpose: under 50
    # clients, 40 threads taking turns at one GIL cost each request twice its CPU; no request
    # holds a database connection while it waits for a thread (core/web_deps.py), so few is safe.
    # Dashboard pages share them: where many people read heavy pages at once, raise it.
    api_threads: int = Field(default=4, ge=1, le=64, validation_alias="GEMMWATCH_API_THREADS")
    # Processes one API process validates large bodies in (a job's sources past 64 KiB, a posted run
    # past it): their source guard and JSON parse then hold no thread of the API's and not its GIL,
    # so a reader is not held behind them (api/validation_pool.py). 0: on threads, as small ones.
    validation_processes: int = Field(default=1, ge=0, le=16, validation_alias="GEMMWATCH_VALIDATION_PROCESSES")
    # Requests of one API process holding a database session at once; the rest wait their turn on
    # the event loop, holding no thread (core/web_deps.py). The pool is sized from it (db_connections).
    api_sessions: int = Field(default=8, ge=1, le=256, validation_alias="GEMMWATCH_API_SESSIONS")
    auth_writes: bool = Field(default=True, validation_alias="GEMMWATCH_AUTH_WRITES")
    auth_reads: bool = Field(default=False, validation_alias="GEMMWATCH_AUTH_READS")
    # Signs the dashboard's session cookie (dashboard/login.py); made once in the data dir when unset.
    # Set it (the same on every API server) in a deployment.
    secret_key: str | None = Field(default=None, min_length=32, validation_alias="GEMMWATCH_SECRET_KEY")
    session_max_age_s: float = Field(default=7 * 86400, gt=0, validation_alias="GEMMWATCH_SESSION_MAX_AGE_S")
    # Origins (https://host[:port]) the dashboard's forms may post from besides the request's own Host,
    # comma-separated: for a proxy that rewrites Host (api/same_origin.py).
    public_origins: str = Field(default="", validation_alias="GEMMWATCH_PUBLIC_ORIGINS")

    # Regression detection (core/verdicts/regression.py explains the method).
    regression_boundary: float = Field(default=0.999, validation_alias="GEMMWATCH_REGRESSION_BOUNDARY")
    regression_window: int = Field(default=64, validation_alias="GEMMWATCH_REGRESSION_WINDOW")
    regression_min_points: int = Field(default=5, validation_alias="GEMMWATCH_REGRESSION_MIN_POINTS")
    regression_min_drop: float = Field(default=0.02, validation_alias="GEMMWATCH_REGRESSION_MIN_DROP")

    # A running job whose heartbeat is older than this lost its worker and is queued again;
    # a queued job older than requeue_after_s is published again (a broker restart loses queues).
    heartbeat_stale_s: float = Field(default=60.0, validation_alias="GEMMWATCH_HEARTBEAT_STALE_S")
    requeue_after_s: float = Field(default=120.0, validation_alias="GEMMWATCH_REQUEUE_AFTER_S")
    reaper_interval_s: float = Field(default=15.0, validation_alias="GEMMWATCH_REAPER_INTERVAL_S")
    # Workers beat every worker_beat_s (worker/fleet.py); one silent for worker_offline_after_s is offline.
    worker_beat_s: float = Field(default=5.0, gt=0, validation_alias="GEMMWATCH_WORKER_BEAT_S")
    worker_offline_after_s: float = Field(default=30.0, gt=0, validation_alias="GEMMWATCH_WORKER_OFFLINE_AFTER_S")

    # Compiling a kernel (worker/compile/compiler.py): a confined process of its own, with these limits.
    compile_timeout_s: float = Field(default=60.0, gt=0, validation_alias="GEMMWATCH_COMPILE_TIMEOUT_S")
    compile_memory_mb: int = Field(default=4096, ge=256, validation_alias="GEMMWATCH_COMPILE_MEMORY_MB")
    # Writing a Helion kernel's Triton code (worker/compile/helion_build.py) imports torch, whose CUDA
    # build maps its libraries (gigabytes of address space) before Helion writes a line: its own limit.
    helion_memory_mb: int = Field(default=8192, ge=1024, validation_alias="GEMMWATCH_HELION_MEMORY_MB")
    # and its own time limit: the imports alone took 7 s of CPU on the 2-core test machine, 35 s of wall
    # time a process under a load of four busy processes beside the test suite (docs/BENCHMARKS.md).
    helion_timeout_s: float = Field(default=180.0, gt=0, validation_alias="GEMMWATCH_HELION_TIMEOUT_S")
    # A job's kernels compiled ahead of its cases, this many at once beside the timing (each a confined
    # compile process of its own, within the two limits above); below 2, each compiles as its case comes.
    # Default: half the machine's CPUs, at most 8 (the first job of the 47 built-ins on an H200's 16-CPU
    # host, nothing in the kernel cache: 69.9 s compiling one by one, 21.9 s with 8; docs/BENCHMARKS.md).
    # A 2-CPU machine (a CI runner with the CPU double) compiles as cases come, its CPUs left to the cases.
    compile_workers: int = Field(default_factory=lambda: min(8, max(1, (os.cpu_count() or 1) // 2)), ge=1, le=64,
                                 validation_alias="GEMMWATCH_COMPILE_WORKERS")
    # Where the compiler cannot be confined (no Landlock): refuse a job's own sources, or warn and compile.
    unconfined_sources: Literal["refuse", "warn"] = Field(default="refuse", validation_alias="GEMMWATCH_UNCONFINED_SOURCES")
    kernel_cache_dir_override: Path | None = Field(default=None, validation_alias="GEMMWATCH_KERNEL_CACHE_DIR")
    # Issue 37, row 3: the kernel cache's size, its least recently used entries evicted beyond it; a
    # compiled cubin or library over kernel_max_bytes is refused, never cached; a compile log as a
    # job's author sees it (its head and tail), in its result's error.
    kernel_cache_max_bytes: int = Field(default=2 << 30, ge=1 << 20, validation_alias="GEMMWATCH_KERNEL_CACHE_MAX_BYTES")
    kernel_max_bytes: int = Field(default=64 << 20, ge=1 << 16, validation_alias="GEMMWATCH_KERNEL_MAX_BYTES")
    compile_log_max_bytes: int = Field(default=32 << 10, ge=1 << 10, le=1 << 20,
                                       validation_alias="GEMMWATCH_COMPILE_LOG_MAX_BYTES")
    # The libnvrtc the compile process loads (unset: cuda-pathfinder's choice, a wheel's first). Code
    # generation differs between NVRTC releases; pin the toolkit a repository builds with.
    nvrtc_library: Path | None = Field(default=None, validation_alias="GEMMWATCH_NVRTC_LIBRARY")
    # Where CUDA's device headers are read from when a kernel includes one (os.pathsep-separated;
    # unset: the folder of that NVRTC's own release, core/description/kernel_includes.py toolkit_include_dirs).
    cuda_include_dirs: str | None = Field(default=None, validation_alias="GEMMWATCH_CUDA_INCLUDE_DIRS")
    # The nvcc a `"compiler": "nvcc"` kernel is built with (unset: the nvidia-cuda-nvcc wheel's, else
    # CUDA_HOME's, else the one on PATH); its host compiler is the first g++/gcc on PATH.
    nvcc: Path | None = Field(default=None, validation_alias="GEMMWATCH_NVCC")
    # The CUTLASS a kernel naming `"libraries": ["cutlass"]` is built with: a checkout's folder
    # (include/, tools/util/include/, examples/common/); unset: the nvidia-cutlass wheel's copy
    # (worker/compile/header_libraries.py).
    cutlass_dir: Path | None = Field(default=None, validation_alias="GEMMWATCH_CUTLASS_DIR")

    # Dotted path of the object that does the GPU work. Tests point it at a CPU double.
    runner: str = Field(default="worker.measure.runner:CupyRunner", validation_alias="GEMMWATCH_RUNNER")
    # The worker starts its GPU process as it starts and runs one small case per precision there
    # (worker/measure/warm_up.py), so the first job after a start does not pay CuPy's first compiles
    # (about 16 s on a fresh H200). It registers with the fleet once that is done, or after
    # warm_up_timeout_s whatever happened.
    warm_up_gpu: bool = Field(default=True, validation_alias="GEMMWATCH_WARM_UP")
    warm_up_timeout_s: float = Field(default=300.0, gt=0, validation_alias="GEMMWATCH_WARM_UP_TIMEOUT_S")

    # Same-job A/B confirmation (core/verdicts/regression.py, "Same-job A/B confirmation", explains the method).
    confirm_confidence: float = Field(default=0.99, gt=0.5, lt=1, validation_alias="GEMMWATCH_CONFIRM_CONFIDENCE")
    confirm_min_change: float = Field(default=0.01, gt=0, lt=1, validation_alias="GEMMWATCH_CONFIRM_MIN_CHANGE")
    confirm_min_pairs: int = Field(default=10, ge=3, validation_alias="GEMMWATCH_CONFIRM_MIN_PAIRS")
    confirm_resamples: int = Field(default=2000, ge=100, le=100_000, validation_alias="GEMMWATCH_CONFIRM_RESAMPLES")
    # A confirmed regression on a watched branch is POSTed here as JSON (worker/webhook.py), retried with backoff.
    webhook_url: str | None = Field(default=None, validation_alias="GEMMWATCH_WEBHOOK_URL")
    webhook_branches: str = Field(default="main", validation_alias="GEMMWATCH_WEBHOOK_BRANCHES")
    webhook_attempts: int = Field(default=5, ge=1, le=20, validation_alias="GEMMWATCH_WEBHOOK_ATTEMPTS")

    # -- Profiles of a confirmation (issue 39; worker/profile/profile_step.py, docs/ARCHITECTURE.md) --
    # Nsight Compute's command (a name on PATH or a path); "" for none: the SASS diff alone.
    ncu: str = Field(default="ncu", validation_alias="GEMMWATCH_NCU")
    # Every confirmed regression or improvement is profiled, base and head, after the job's timed
    # samples; a confirmation asked with "profile": true is profiled whatever its verdict.
    profile_confirmed: bool = Field(default=True, validation_alias="GEMMWATCH_PROFILE_CONFIRMED")
    # One profile (the profiler, its process and the kernels' compile) may take this long.
    profile_timeout_s: float = Field(default=300.0, gt=0, validation_alias="GEMMWATCH_PROFILE_TIMEOUT_S")

    # -- Cancelling jobs (core/jobs/cancel.py, worker/gpu_process.py) --
    # A cancelled job's case still running this long after the worker saw the cancel is stopped
    # by replacing the GPU process (a kernel that never ends); a case ending sooner keeps its result.
    cancel_grace_s: float = Field(default=10.0, ge=0, validation_alias="GEMMWATCH_CANCEL_GRACE_S")

    @field_validator("nvrtc_library", "nvcc", mode="before")
    @classmethod
    def _unset_when_empty(cls, value):
        return None if value in ("", None) else value

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'gemmwatch.db').resolve()}"

    @property
    def db_connections(self) -> int:
        """The most connections one process's pool opens: a connection for each session slot, each
        API thread (a token check or the metrics take a short session of their own on one) and the
        job intake's thread, so no one ever waits on the pool while holding what another needs."""
        return self.api_sessions + self.api_threads + 1

    @property
    def kernel_cache_dir(self) -> Path:
        return self.kernel_cache_dir_override or self.data_dir / "kernel-cache"

    @property
    def embedded_broker(self) -> bool:
        return not self.broker_url

    @property
    def broker_folder(self) -> Path:
        return (self.data_dir / "broker").resolve()


settings = Settings()
