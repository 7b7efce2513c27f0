"""What `gemmwatch run --post` sends (POST /api/results): results measured on a machine of its own.

Everything here is typed at the door (issue 20): strict scalars with bounds (core/wire_types.py),
the environment record as a declared shape (core/results/result_env.py). A reader never meets a value it
cannot render, sum or serialise.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, field_validator, model_validator

from api.wire_words import CommitIn, GpuModel, Identifier
from core.description.form_keys import DEFAULT_KEY, FormKey, is_key
from core.records.gpu_records import normal_name
from core.description.precision import INPUT_TYPE, ComputeMode
from core.description.timing_modes import ImportedMode, TimingMode
from core.results.result_env import ResultEnv
from core.results.result_status import ResultStatus, status_of
from core.results.timing_stats import timing_fields
from core.wire_types import Count, Finite, Gflops, Int32, Integer, Millis, Name, Percent, Ratio, StrictBool, Text


NVML_TEXT = {"pattern": r"^[ -~]*$"}


class GpuIn(BaseModel):
    """The GPU a posted run measured on. Its record is made by the first writer that names its uuid
    and is never changed by another token (core/records/gpu_records.py)."""

    # The schema says what NVML writes, printable ASCII, so a client (or a fuzzer) knows it; the
    # validator below also takes what normalises to it (a full-width hyphen, a zero-width space).
    uuid: Annotated[Name(80), Field(json_schema_extra=NVML_TEXT)]
    name: Annotated[Name(120), Field(json_schema_extra=NVML_TEXT)]
    model: GpuModel
    sm_count: Integer(1, 100_000) | None = None
    compute_capability: Annotated[str, StringConstraints(pattern=r"^[0-9]{1,2}\.[0-9]{1,2}$")] | None = None
    memory_mib: Count | None = None
    driver: Name(40) | None = None

    @field_validator("uuid", "name")
    @classmethod
    def _one_spelling(cls, text: str) -> str:
        """Normalised before it identifies anything (core/records/gpu_records.py normal_name)."""
        return normal_name(text)


class _ResultInFields(BaseModel):
    """ResultIn but its timing statistics, which core/results/timing_stats.py declares (below)."""

    variant: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,59}$")]
    m: Integer(1, 1 << 20)
    n: Integer(1, 1 << 20)
    k: Integer(1, 1 << 20)
    dtype: Literal["float32", "float16", "bfloat16", "float8_e4m3"] = "float32"  # of A and B
    mode: TimingMode | ImportedMode = Field(default="cold", description="how it was timed: gemmwatch's own modes, or an "
                                             "imported tool's (core/description/timing_modes.py)")
    compute_mode: ComputeMode = "fp32"
    form: FormKey | None = Field(
        default=None, description='the GEMM\'s form, its key (core/description/gemm_form.py): "rrr" (A, B, C row-major, '
        'C = alpha·A·B + beta·C, FP32 sums), "rcr+ab+acc16", ...; default: env.form.key, else "rrr"')
    tunables: dict[Identifier, Int32] = Field(default_factory=dict, max_length=32)
    verified: StrictBool
    rel_error: Annotated[Finite, Field(ge=0, le=1e30)] | None = None
    gflops: Gflops | None = None
    cublas_gflops: Gflops | None = None
    pct_of_cublas: Percent | None = None
    n_samples: Integer(0, 10_000_000) = 0
    converged: StrictBool = False
    error: Text(100_000) | None = None
    status: ResultStatus | None = Field(default=None, description="passed / incorrect / not applicable / failed /"
                                        " cancelled (core/results/result_status.py); default: read from verified, error and"
                                        " rel_error")
    samples_ms: list[Millis] = Field(default_factory=list, max_length=100_000)
    env: ResultEnv = Field(default_factory=ResultEnv, description="how the number was made (core/results/result_env.py);"
                           " keys it does not declare are kept in env.extra")

    @model_validator(mode="after")
    def _no_speed_without_verification(self) -> "ResultIn":
        if not self.verified and self.gflops is not None:
            raise ValueError("an unverified result carries no gflops (a wrong kernel has no speed)")
        if self.dtype != INPUT_TYPE[self.compute_mode]:
            raise ValueError(f"dtype {self.dtype} does not fit compute_mode {self.compute_mode} (its inputs are "
                             f"{INPUT_TYPE[self.compute_mode]})")
        # The form's key as the worker records it twice (the column, env.form.key): two that
        # differ say two GEMMs, and which one was timed is not the server's guess.
        recorded = self.env.form.key if self.env.form is not None else None
        recorded = recorded if recorded and is_key(recorded) else None
        if self.form and recorded and self.form != recorded:
            raise ValueError(f"form {self.form} differs from env.form.key {recorded}: one result is one GEMM")
        self.form = self.form or recorded or DEFAULT_KEY
        implied = status_of(self.verified, self.error, self.rel_error, bool(self.env.not_applicable))
        if self.status is None:
            self.status = implied
        elif (self.status == "passed") != (implied == "passed"):  # one result, one verdict
            raise ValueError(f"status {self.status!r} contradicts verified={self.verified} and error "
                             f"{'set' if self.error else 'unset'} (they say {implied!r})")
        if "+acc16" in self.form and self.compute_mode != "fp16":
            raise ValueError(f"form {self.form} sums in FP16, which only an fp16 kernel does; this one is "
                             f"{self.compute_mode}")
        return self

    def stored(self) -> dict[str, Any]:
        """The columns of its Result row."""
        return {**self.model_dump(exclude={"env"}), "env": self.env.stored()}


# Its statistics (core/results/timing_stats.py RESULT_STATISTICS) last, each bounded: times in milliseconds,
# noise a fraction, and a median, where given, above 0 (the figure every reader divides by).
ResultIn = create_model(
    "ResultIn", __base__=_ResultInFields,
    __doc__="""One case measured by `gemmwatch run` on a machine of its own; names as in ResultOut.

    Strict and bounded (core/wire_types.py): what a reader computes from these (sums, ratios, the
    FP32 peak) stays finite, and every value renders on every page.""",
    **timing_fields(Millis, Ratio, median=Annotated[Millis, Field(gt=0)]))


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
