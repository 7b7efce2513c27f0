"""What every importer makes of its file, and the one way that becomes a posted run.

Each format's reader (nvbench_json, cutlass_csv, plain_table) reads its file into an ImportedRun:
the GPU it names (if any) and one ImportedCase per measured GEMM, plus what it skipped and why. as_batch
turns that into the body POST /api/results takes (api/posted_schemas.py ResultBatchIn), so an
import is stored, trusted and judged exactly as a posted run is; only its mode says another tool
timed it (core/description/timing_modes.py).
"""

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from core.description.form_keys import batch_of
from core.description.precision import INPUT_TYPE
from core.records.gpu_records import gpu_model
from core.results.timing_stats import gflops

# A variant name as results take it (api/posted_schemas.py): lower case, digits, underscores.
VARIANT_MAX = 60


class ImportRefused(ValueError):
    """The file cannot be imported as it is: the message names what to change."""


@dataclass
class ImportedGpu:
    name: str
    sm_count: int | None = None
    compute_capability: str | None = None
    memory_mib: int | None = None


@dataclass
class ImportedCase:
    variant: str
    m: int
    n: int
    k: int
    compute_mode: str  # fp32, tf32, fp16, bf16, fp8 (core/description/precision.py)
    mode: str  # an imported mode (core/description/timing_modes.py)
    form: str  # a form key (core/description/form_keys.py)
    stats: dict[str, float]  # core/results/timing_stats.py STATISTICS, those the tool gives
    source: dict[str, Any]  # core/results/result_env.py ImportSource
    samples_ms: list[float] = field(default_factory=list)
    status: str = "passed"  # core/results/result_status.py; a tool's "incorrect" stays incorrect
    error: str | None = None
    cublas_median_ms: float | None = None  # the same problem's cuBLAS, where the tool timed it too


@dataclass
class ImportedRun:
    tool: str
    gpu: ImportedGpu | None
    cases: list[ImportedCase]
    skipped: list[str] = field(default_factory=list)  # entries not imported, each with its reason

    def take(self, case: ImportedCase, entry: str) -> bool:
        """Add a case, unless an earlier entry gave the same series (kernel, shape, form, precision,
        mode): one result each, the repeat listed as skipped. True where it was added."""
        key = (case.variant, case.m, case.n, case.k, case.form, case.compute_mode, case.mode)
        if any((c.variant, c.m, c.n, c.k, c.form, c.compute_mode, c.mode) == key for c in self.cases):
            self.skipped.append(f"{entry}: {case.variant} {case.m}x{case.n}x{case.k} {case.form} again (one result "
                                "a kernel, shape and form)")
            return False
        self.cases.append(case)
        return True


# An element type as tools spell it (nvbench's type strings, CUTLASS's, C++'s, PyTorch's), and the
# compute mode gemmwatch files a GEMM of that input type under. TF32 is named only by its own
# words: "f32" alone is FP32 math.
_TYPE_WORDS = {
    "fp16": ("f16", "fp16", "half", "__half", "float16", "torch.float16", "h"),
    "bf16": ("bf16", "bfloat16", "__nv_bfloat16", "torch.bfloat16"),
    "fp32": ("f32", "fp32", "float", "float32", "torch.float32", "s", "sgemm"),
    "tf32": ("tf32", "tfloat32", "tfloat32_t"),
    "fp8": ("e4m3", "fp8", "f8", "float8_e4m3", "float8_e4m3fn", "__nv_fp8_e4m3", "torch.float8_e4m3fn"),
}
_MODE_OF_WORD = {word: mode for mode, words in _TYPE_WORDS.items() for word in words}


def compute_mode_of(word: str) -> str | None:
    """The compute mode an element type's name means (None: a type gemmwatch does not time)."""
    return _MODE_OF_WORD.get(word.strip().lower())


def variant_name(*parts: str) -> str:
    """A variant name results take, from a tool's names: lower case, every other character an
    underscore; a name longer than 60 keeps its start and a digest of the whole, so two long names
    that share a start stay two variants."""
    text = re.sub(r"[^a-z0-9]+", "_", "_".join(p for p in parts if p).lower()).strip("_")
    if not text or not text[0].isalpha():
        text = "v_" + text
    if len(text) > VARIANT_MAX:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        text = text[:VARIANT_MAX - 9].rstrip("_") + "_" + digest
    return text


def as_batch(run: ImportedRun, *, gpu: dict[str, Any] | None, commit: dict[str, Any] | None, run_id: str | None,
             digest_of: Any, max_samples: int) -> dict[str, Any]:
    """The ResultBatchIn body of an imported run.

    gpu: the GPU as the importer names it (uuid, name...), over what the file says; a file that
    names none needs one. run_id: given, or made from digest_of (the file, its mapping and its
    commit), so importing the same file again adds nothing. Samples are stored while the whole run
    stays within max_samples (GEMMWATCH_MAX_POSTED_SAMPLES); past it, each result keeps the
    statistics read from all of them and says its samples were not stored."""
    if not run.cases:
        raise ImportRefused("nothing to import: " + ("; ".join(run.skipped[:10]) if run.skipped
                                                     else "the file holds no measured GEMM"))
    identity = _gpu_identity(run, gpu or {})
    keep_samples = sum(len(c.samples_ms) for c in run.cases) <= max_samples
    results = [_result(c, keep_samples) for c in run.cases]
    digest = hashlib.sha256(json.dumps(digest_of, sort_keys=True, default=str).encode()).hexdigest()[:32]
    body: dict[str, Any] = {"run_id": run_id or f"import:{run.tool}:{digest}", "gpu": identity, "results": results}
    if commit:
        body["commit"] = commit
    return body


def _gpu_identity(run: ImportedRun, given: dict[str, Any]) -> dict[str, Any]:
    said = run.gpu
    name = given.get("name") or (said.name if said else None)
    if not name:
        raise ImportRefused(f"a {run.tool} file does not say which GPU it ran on: name it (gemmwatch import --gpu "
                            "'NVIDIA H100 80GB HBM3', as nvidia-smi prints it)")
    identity = {"name": name, "model": given.get("model") or gpu_model(name)}
    if said and said.name == name:
        identity |= {k: v for k, v in (("sm_count", said.sm_count), ("compute_capability", said.compute_capability),
                                       ("memory_mib", said.memory_mib)) if v is not None}
    # Without the card's uuid (nvbench and the profiler do not write it) a GPU is filed by what the
    # file says of it: one record per model and SM count, shared by every import of such a card.
    identity["uuid"] = given.get("uuid") or "imported-" + variant_name(identity["model"], str(identity.get("sm_count") or ""))
    return identity


def _result(c: ImportedCase, keep_samples: bool) -> dict[str, Any]:
    source = dict(c.source, samples_stored=bool(c.samples_ms) and keep_samples)
    figure_ms = c.stats.get("median_ms") if source.get("figure", "median") == "median" else c.stats.get("mean_ms")
    passed = c.status == "passed" and figure_ms is not None and figure_ms > 0
    out: dict[str, Any] = {
        "variant": c.variant, "m": c.m, "n": c.n, "k": c.k, "dtype": INPUT_TYPE[c.compute_mode],
        "compute_mode": c.compute_mode, "mode": c.mode, "form": c.form, "verified": passed, "status": c.status,
        "error": c.error, "n_samples": int(source.get("samples") or len(c.samples_ms)),
        "env": {"imported": source},
    }
    if passed:
        assert figure_ms is not None
        out |= {name: value for name, value in c.stats.items()}
        # The figure every reader divides by is the row's median; a tool that reports only a mean
        # has it there, and env.imported.figure says so.
        out["median_ms"] = figure_ms
        batch = batch_of(c.form)
        out["gflops"] = gflops(c.m, c.n, c.k, figure_ms, batch)
        if c.cublas_median_ms:
            out["cublas_median_ms"] = c.cublas_median_ms
            out["cublas_gflops"] = gflops(c.m, c.n, c.k, c.cublas_median_ms, batch)
            out["pct_of_cublas"] = 100.0 * c.cublas_median_ms / figure_ms
        if keep_samples and c.samples_ms:
            out["samples_ms"] = c.samples_ms
    return out
