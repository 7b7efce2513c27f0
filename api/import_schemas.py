"""What `gemmwatch import` sends (POST /api/imports): another tool's result file, as it wrote it,
with what the file does not say (which axis is M, the GPU, the commit)."""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from api.wire_words import CommitIn, GpuModel
from core.description.form_keys import DEFAULT_KEY, FormKey
from core.description.precision import ComputeMode
from core.exchange.imports import ImportFormat
from core.wire_types import Count, Name, Text

# A sample file's name as nvbench writes it beside its JSON ("run.json-bin/0.bin"): no way up, no root.
SideFile = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*$",
                                            max_length=300)]
Role = Literal["m", "n", "k", "dtype"]


class ImportGpu(BaseModel):
    """The GPU the file's numbers came from, over what the file says of it (nvbench names its
    device; the profiler's CSV and a table do not). The uuid, where known (`nvidia-smi -L`), files the
    results under that card; without it, under one record per model and SM count."""

    model_config = ConfigDict(extra="forbid")

    name: Name(120) | None = None
    uuid: Name(80) | None = None
    model: GpuModel | None = None


class ImportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: ImportFormat = Field(description="nvbench (its --json/--jsonbin file), cutlass-profiler (its --output "
                                             "CSV), csv or json (a table: kernel, m, n, k, dtype, times)")
    content: Annotated[str, StringConstraints(min_length=1)] = Field(description="the file, as the tool wrote it")
    file_name: Text(200) | None = Field(default=None, description="its name, kept on each result")
    files: dict[SideFile, Annotated[str, StringConstraints(max_length=40_000_000)]] = Field(
        default_factory=dict, max_length=10_000,
        description="nvbench's sample files (--jsonbin), base64, by the name the JSON gives them")
    axes: dict[Role, Name(100)] = Field(default_factory=dict, description="nvbench: which axis says m, n, k and dtype "
                                        "(default: the axes named M, N, K and T)")
    dtype: ComputeMode | None = Field(default=None, description="the element type where no axis says it")
    device: Count | None = Field(default=None, description="nvbench: the device whose states to import, where the "
                                                           "file holds several")
    form: FormKey = Field(default=DEFAULT_KEY, description="the GEMM's form where the file does not say it (nvbench, "
                                                           "a table without a form column)")
    timed: Text(300) | None = Field(default=None, description="a table: how its times were taken (\"do_bench, 100 reps\")")
    gpu: ImportGpu | None = None
    commit: CommitIn | None = None
    run_id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{8,100}$")] | None = Field(
        default=None, description="default: made from the file, its mapping and its commit, so importing the same "
                                  "file again adds nothing")


class ImportOut(BaseModel):
    job_id: int
    created: bool
    results: int
    modes: list[str] = Field(description="how its results were timed (core/description/timing_modes.py)")
    skipped: list[str] = Field(description="entries of the file not imported, each with its reason")
