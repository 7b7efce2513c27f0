"""A result's `env`: the record of how its number was made, as a declared, bounded shape.

The worker writes it (worker/measure/runner.py, worker/measure/ab.py, worker/execute.py adds `gpu`), and
`gemmwatch run --post` posts the same record (cli/local_run.py). Before issue 20 it was any JSON:
a writer could store a value 300 levels deep (every read of it then failed to serialise) or a
`gpu` that is a string (the overview then failed on `.get`). Now every key a reader looks at has a
type with bounds, and every key the schema does not know, at any level, is moved into `extra`:
one free-form field, bounded in depth and size, that no page or figure interprets. So a worker
that learns a new key still posts, and nothing a writer sends can reach a reader untyped.
"""

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model, model_validator

from core.wire_types import Count, Finite, Gflops, Int32, Integer, Mask, Millis, Name, Percent, Ratio, StrictBool, Text
from core.description.inputs import Inputs
from core.results.timing_stats import STATISTICS, timing_fields

Key = Name(100)  # a key of extra ("launch.swizzle"), or of a record's limits ("shared memory")
Macro = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
Samples = Annotated[list[Millis], Field(max_length=100_000)]

EXTRA_MAX_DEPTH = 4  # levels of nesting under one key of `extra`
EXTRA_MAX_BYTES = 64 * 1024  # `extra` as compact JSON
ENV_MAX_BYTES = 4 * 1024 * 1024  # the whole record; samples dominate (100,000 of them is ~2 MB)


class _Record(BaseModel):
    # Unknown keys never reach here: ResultEnv moves them into `extra` first (split_unknown).
    model_config = ConfigDict(extra="forbid")


# worker/measure/stats.py summarise(): core/results/timing_stats.py STATISTICS, each with its bounds.
Stats = create_model("Stats", __base__=_Record, __doc__="worker/measure/stats.py summarise() of one side's samples.",
                     **timing_fields(Millis, Ratio, names=STATISTICS))


class Convergence(_Record):
    """worker/measure/stats.py convergence(); JSON cannot carry its infinity (fewer than 4 samples): null."""

    median_ci_rel: Ratio | None = None
    drift_rel: Ratio | None = None


class ConvergencePair(_Record):
    variant: Convergence | None = None
    cublas: Convergence | None = None


class DeviceState(_Record):
    """worker/gpu/gpu_identity.py device_state(): clocks and temperature before and after a case."""

    sm_clock_mhz: Count | None = None
    mem_clock_mhz: Count | None = None
    temperature_c: Int32 | None = None
    power_w: Annotated[Finite, Field(ge=0, le=1e6)] | None = None
    throttle_reasons: Mask | None = None
    unreadable: Annotated[list[Text(300)], Field(max_length=16)] | None = None


class GpuRecord(_Record):
    """The GPU as the worker saw it (worker/measure/runner.py identity(), worker/child.py adds the pid)."""

    name: Name(120) | None = None
    model: Name(60) | None = None
    uuid: Name(80) | None = None
    driver: Name(40) | None = None
    memory_mib: Count | None = None
    max_sm_clock_mhz: Integer(0, 100_000) | None = None
    memory_bus_bits: Integer(0, 100_000) | None = None
    max_mem_clock_mhz: Integer(0, 100_000) | None = None
    sm_count: Integer(0, 100_000) | None = None
    compute_capability: Name(10) | None = None
    l2_bytes: Count | None = None
    cuda_runtime: Count | None = None
    cuda_driver_api: Count | None = None
    cupy: Name(40) | None = None
    cublas: Count | None = None  # cublasLtGetVersion(): the cuBLAS every % of cuBLAS is against
    nvrtc_flush_to_zero: StrictBool | None = None
    cublas_math_mode: Count | None = None
    index: Count | None = None
    gpu_process_pid: Count | None = None


class Resources(_Record):
    """worker/gpu/resources.py describe() and for_function(): what a kernel asks of an SM."""

    registers_per_thread: Count | None = None
    static_smem_bytes: Count | None = None
    dynamic_smem_bytes: Count | None = None
    local_bytes_per_thread: Count | None = None
    max_threads_per_block: Count | None = None
    threads_per_block: Count | None = None
    blocks_per_sm: Count | None = None
    limited_by: Name(40) | None = None
    warps_per_sm: Count | None = None
    occupancy: Annotated[Finite, Field(ge=0, le=1)] | None = None
    limits: Annotated[dict[Key, Count], Field(max_length=16)] | None = None
    sm: Annotated[dict[Key, Count], Field(max_length=32)] | None = None
    compiler: Name(60) | None = None  # which NVRTC built it ("NVRTC 13.5"; worker/gpu/cupy_device.py)
    why_none: Text(200) | None = None  # a launcher's case whose description names no entry to read them from


class Launch(_Record):
    entry: Text(200) | None = None
    block: Annotated[list[Count], Field(max_length=3)] | None = None
    grid: Annotated[list[Count], Field(max_length=3)] | None = None
    # As the kernel was compiled; the API checks a job's own defines (core/description/kernel.py).
    defines: Annotated[dict[Macro, Int32 | Name(64)], Field(max_length=64)] | None = None
    dynamic_smem: Count | None = None
    layout: Name(10) | None = None  # "row" or "column"
    target: Name(20) | None = None  # "sm_90a", or null: built for the GPU that ran it
    # Per matrix, the TMA box the kernel's tensor map moved: [elements, lines, swizzle bytes]. C too: a
    # kernel may write C by TMA stores (its C_map).
    tensor_maps: Annotated[dict[Literal["A", "B", "C"], Annotated[list[Count], Field(max_length=3)]],
                           Field(max_length=3)] | None = None
    # The matrices whose map the TMA could not describe at this size (odd K or N): the kernel got
    # address 0 or zeros for them and reached them its other way, so the number is that path's.
    maps_absent: Annotated[list[Literal["A", "B", "C"]], Field(max_length=3)] | None = None
    c_starts_zero: StrictBool | None = None  # C zeroed before each call, in its time
    # How it was built: the description's compiler ("nvrtc", "nvcc", "triton") and flags, and each
    # parameter as the compiled binary declares it ("M: unsigned long", "A_map: CUtensorMap const&").
    compiler: Name(20) | None = None
    flags: Annotated[list[Text(64)], Field(max_length=64)] | None = None
    params: Annotated[list[Text(300)], Field(max_length=64)] | None = None
    launcher: Text(300) | None = None  # the repository's host function that ran the kernel, where one did


class LauncherRecord(_Record):
    """A launcher case's (worker/measure/launcher_case.py): the job's host function, how its confined
    process went and what it printed, and how long each call held the host."""

    launcher: Text(300) | None = None
    symbol: Name(100) | None = None
    what_happened: Text(4000) | None = None
    confinement: Text(8000) | None = None
    results: Text(300) | None = None
    output: Text(4000) | None = None
    # The median time a call of the launcher took on the host, and whether that says it waits for its
    # kernel to end (a cudaDeviceSynchronize in it): judged only where the kernel's sample is long
    # enough to tell a wait from a launch (worker/measure/launcher_hook.py).
    host_call_ms: Millis | None = None
    waits: StrictBool | None = None


class StreamHold(_Record):
    used: StrictBool | None = None
    batches_dropped: Count | None = None


# A case's stages in the order it meets them (worker/measure/stage_clock.py times them). "launcher_setup"
# is a launcher case's own process (worker/measure/launcher_case.py): its start, CUDA's initialisation and
# the rehearsal, i.e. the confined call's wall time less the stages that process reported.
CASE_STAGES = ("compile", "launcher_setup", "reference", "verify", "cublas_best", "cublas_check", "samples", "after_check", "resources")
_stage_fields: dict[str, Any] = {name: (Annotated[Finite, Field(ge=0, le=1e6)] | None, None) for name in CASE_STAGES}
Stages = create_model("Stages", __base__=_Record,
                      __doc__="Host wall seconds a case spent in each stage (worker/measure/stage_clock.py).",
                      **_stage_fields)


class Sustained(_Record):
    """How a "sustained" result's card was brought to its loaded state (worker/measure/timing.py settle())."""

    settle_s: Annotated[Finite, Field(ge=0, le=3600)] | None = None
    settle_samples: Count | None = None
    power_capped_batches_kept: Count | None = None


class PrecisionRecord(_Record):
    """The types of A and B, the accumulator and C (core/description/precision.py describe())."""

    input: Literal["float32", "float16", "bfloat16", "float8_e4m3"] | None = None
    accumulate: Literal["float32", "float16"] | None = None
    output: Literal["float32", "float16", "bfloat16"] | None = None
    scale_a: Annotated[Finite, Field(gt=0, le=1e30)] | None = None  # FP8's per-tensor scales
    scale_b: Annotated[Finite, Field(gt=0, le=1e30)] | None = None
    # FP8's block scales, each operand's block (DeepSeek-V3's recipe): {"A": "1x128", "B": "128x128"}
    scales: Annotated[dict[Literal["A", "B"], Literal["1x128", "128x128"]], Field(min_length=2, max_length=2)] | None = None


class FormRecord(_Record):
    """The GEMM's form (core/description/gemm_form.py describe()): layouts, epilogue, accumulate, batch."""

    key: Name(40) | None = None
    layout: Annotated[dict[Literal["A", "B", "C"], Literal["row", "column"]], Field(max_length=3)] | None = None
    epilogue: Literal["alpha_beta", "ab_only", "alpha_only"] | None = None
    accumulate: Literal["fp32", "fp16"] | None = None
    batch: Count | None = None


ScaleMode = Literal["CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F", "CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F"]


class CublasAlgo(_Record):
    id: Integer(-1, 1 << 20) | None = None
    tile_id: Integer(-1, 1 << 20) | None = None
    splitk: Integer(-1, 1 << 20) | None = None
    stages_id: Integer(-1, 1 << 20) | None = None


class CublasPlan(_Record):
    """What cuBLASLt chose for the baseline, where it chooses (FP8: worker/gpu/cublaslt_fp8.py)."""

    call: Name(40)
    compute_type: Name(40)
    scale_type: Name(40)
    a_b_type: Name(40)
    c_type: Name(40)
    trans: Literal["TN", "NN", "NT", "TT"]
    algo: CublasAlgo
    waves: Annotated[Finite, Field(ge=0, le=1e9)] | None = None
    workspace_bytes: Integer(0, 1 << 40) = 0
    padded_n_k: Annotated[list[Integer(1, 1 << 21)], Field(min_length=2, max_length=2)] | None = None
    # FP8's block scales: each operand's cuBLASLt scale mode, and the sizes padded for them
    a_scale_mode: ScaleMode | None = None
    b_scale_mode: ScaleMode | None = None
    padded_m_n_k: Annotated[list[Integer(1, 1 << 21)], Field(min_length=3, max_length=3)] | None = None


class CublasCandidate(_Record):
    """One call timed when cuBLAS's best was chosen: the default call (index -1) or one of
    cuBLASLt's heuristic candidates, with its selection median (or why it could not run)."""

    index: Integer(-1, 64)
    call: Name(40)
    algo: CublasAlgo | None = None
    median_ms: Millis | None = None
    error: Text(200) | None = None


class CublasBest(_Record):
    """Which cuBLAS the kernel was timed beside (worker/measure/cublas_best.py): `against` "best" (the
    fastest of the candidates) or "default" (cuBLAS's own call, where it was the fastest or no
    candidates were offered, `why`)."""

    against: Literal["best", "default"]
    default: CublasCandidate | None = None
    best: CublasCandidate | None = None
    candidates: Annotated[list[CublasCandidate], Field(max_length=65)] = Field(default_factory=list)
    cached: StrictBool = False
    why: Text(200) | None = None


class Peak(_Record):
    """The GPU's peak for the result's precision and the share of it reached (worker/measure/runner.py peak())."""

    tflops: Annotated[Finite, Field(ge=0, le=1e6)] | None = None
    sm_clock_mhz: Integer(0, 100_000) | None = None
    pct: Percent | None = None


class AbRecord(_Record):
    """A confirmation case's base samples beside the head's (worker/measure/ab.py record())."""

    base_ms: Samples = Field(default_factory=list)
    base_stats: Stats | None = None
    base_gflops: Gflops | None = None


def _bounded_json(value: Any, depth: int) -> None:
    if depth > EXTRA_MAX_DEPTH:
        raise ValueError(f"env.extra is nested deeper than {EXTRA_MAX_DEPTH} levels")
    if isinstance(value, dict):
        for item in value.values():
            _bounded_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _bounded_json(item, depth + 1)
    elif isinstance(value, str):
        if "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value):
            raise ValueError("env.extra holds text with a NUL or a lone surrogate")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise ValueError("env.extra holds an integer beyond 64 bits")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError("env.extra holds NaN or an infinity (JSON has neither)")


class ImportSource(_Record):
    """Where an imported result came from (core/exchange/imports/): the tool and its version, the file
    and the entry in it, how the tool times, which of its statistics gave the figure and what, if
    anything, checked the kernel's output."""

    tool: Name(40)
    version: Name(80) | None = None
    file: Text(200) | None = None
    entry: Text(300) | None = None  # nvbench's state name, the CSV's row
    timed: Text(300) | None = None
    figure: Literal["median", "mean"] = "median"  # the statistic its GFLOPS is read from
    samples: Count | None = None  # as many as the tool took
    samples_stored: StrictBool = False  # its sample times are the result's samples_ms
    checked: Text(300) | None = None


class HelionRecord(_Record):
    """What wrote a Helion kernel's Triton code (worker/compile/helion_build.py): Helion's release, torch's,
    and the helion.Config it was written with."""

    version: Name(40) | None = None
    torch: Name(60) | None = None
    config: Annotated[dict[Key, JsonValue], Field(max_length=32)] | None = None


class ResultEnv(_Record):
    notes: Annotated[list[Text(500)], Field(max_length=16)] | None = None
    gpu: GpuRecord | None = None
    before: DeviceState | None = None
    after: DeviceState | None = None
    cublas_samples_ms: Samples | None = None
    cublas_stats: Stats | None = None
    throttled_samples_discarded: Count | None = None
    throttle_reasons_seen: Mask | None = None
    throttled_samples_kept: StrictBool | None = None
    stream_hold: StreamHold | None = None
    l2_flush: Name(40) | None = None
    sustained: Sustained | None = None
    convergence: ConvergencePair | None = None
    resources: Resources | None = None
    base_resources: Resources | None = None
    launch: Launch | None = None
    launcher: LauncherRecord | None = None
    ab: AbRecord | None = None
    not_applicable: StrictBool | None = None
    precision: PrecisionRecord | None = None
    cublas_plan: CublasPlan | None = None
    cublas_best: CublasBest | None = None
    form: FormRecord | None = None
    # The cuBLAS call of a form other than the default, and its C's error against the reference.
    cublas_call: Text(300) | None = None
    cublas_rel_error: Annotated[Finite, Field(ge=0)] | None = None
    # The baseline's own disposition, apart from the kernel's status (a wrong cuBLAS never makes a
    # right kernel "failed"): passed, incorrect (its C checked like a kernel's), and why where it is wrong.
    cublas_status: Literal["passed", "incorrect", "not supported", "failed"] | None = None
    cublas_error: Text(500) | None = None
    imported: ImportSource | None = None  # measured by another tool, brought in by `gemmwatch import`
    peak: Peak | None = None
    # What the timed runs multiplied (core/description/inputs.py); the check always multiplies signed inputs.
    inputs: Inputs | None = None
    # Whether the kernel reads C when beta = 0 (worker/measure/verify.py says it in words).
    c_convention: Text(200) | None = None
    stages_s: Stages | None = None  # where the case's time went: compile, check, cuBLAS's search, samples
    # A Helion kernel's: what wrote its Triton code; in a confirmation, each side's.
    helion: HelionRecord | None = None
    helion_head: HelionRecord | None = None
    helion_base: HelionRecord | None = None
    # Keys this schema does not declare, at any level ("launch.swizzle"), as sent; shown nowhere.
    extra: Annotated[dict[Key, JsonValue], Field(max_length=64)] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _unknown_keys_to_extra(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic says what is wrong with it
        data = dict(data)
        given = data.pop("extra", {})
        if not isinstance(given, dict):
            raise ValueError("env.extra must be an object")
        known, moved = split_unknown(cls, data, "")
        clash = sorted(set(moved) & set(given))
        if clash:
            raise ValueError(f"env.extra already holds {clash}, which are also unknown keys of env")
        extra = {**given, **moved}
        for value in extra.values():  # before pydantic walks it: a 300-level value fails here, shortly
            _bounded_json(value, 1)
        return {**known, "extra": extra}

    @model_validator(mode="after")
    def _bounded(self) -> "ResultEnv":
        if len(json.dumps(self.extra, separators=(",", ":"))) > EXTRA_MAX_BYTES:
            raise ValueError(f"env.extra is larger than {EXTRA_MAX_BYTES // 1024} KiB")
        return self

    def stored(self) -> dict[str, Any]:
        """The record as the column keeps it: keys left out stay out (no nulls added), and so does
        an empty extra, so a record that already fits is stored as it came."""
        out = self.model_dump(mode="json", exclude_unset=True)
        if not out.get("extra"):
            out.pop("extra", None)
        return out


def split_unknown(model: type[BaseModel], data: dict, prefix: str) -> tuple[dict, dict]:
    """(the keys `model` declares, with nested records split alike; every other key by its dotted path)."""
    known, moved = {}, {}
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None or key == "extra":
            moved[f"{prefix}{key}"] = value
            continue
        record = _record_type(field.annotation)
        if record is not None and isinstance(value, dict):
            value, deeper = split_unknown(record, value, f"{prefix}{key}.")
            moved.update(deeper)
        known[key] = value
    return known, moved


def _record_type(annotation) -> type[BaseModel] | None:
    """The _Record class a field holds (`Stats | None` -> Stats), if it holds one."""
    candidates = getattr(annotation, "__args__", (annotation,))
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, _Record):
            return candidate
    return None



# The record's shape is versioned as a whole, as nvbench versions its JSON: a change a reader of
# one version could misread (a key renamed or removed, another unit or meaning) makes the next; a
# new key does not. Its JSON Schema is docs/schemas/result-env-1.json (tests/test_result_env_schema.py
# keeps the two equal), and a result's detail names it (env_schema).
ENV_SCHEMA = "gemmwatch.result-env"
ENV_VERSION = 1
ENV_SCHEMA_ID = f"{ENV_SCHEMA}/{ENV_VERSION}"


def env_json_schema() -> dict[str, Any]:
    """The JSON Schema of `env`, version ENV_VERSION, as POST /api/results takes it."""
    schema = ResultEnv.model_json_schema(mode="validation")
    schema["$id"] = ENV_SCHEMA_ID
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
