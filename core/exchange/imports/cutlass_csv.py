"""A CUTLASS profiler CSV (`cutlass_profiler --output=FILE`) read as imported results.

The profiler writes one row per kernel and problem, its columns named in the header: Problem,
Provider, OperationKind, Operation, Disposition, Status, then the problem's arguments (gemm_kind, m,
n, k, A, B, C, alpha, beta, batch_count, accum, ...; which ones depends on the CUTLASS version), then
Bytes, Flops, Runtime (ms), GB/s, GFLOPs. Columns are read by name, so any version's set works.

- A and B say the element type and layout ("f16:column"), C its layout: the form's letters.
- beta = 0 is C = alpha·A·B ("+alpha", or "+ab" where alpha is 1): the profiler then never reads C.
- Disposition is the profiler's own check against its reference: passed, not_verified (imported,
  and says it was not checked), incorrect (imported as incorrect, without a speed), failed;
  not_supported and invalid rows measured nothing and are listed as skipped.
- A cuBLAS row (--providers=cutlass,cublas) is the baseline of the CUTLASS rows of its problem:
  their % of cuBLAS, as the profiler timed both.
"""

import csv
import io
import math
from typing import Any

from core.description.timing_modes import IMPORTED_MODES
from core.exchange.imports.imported_run import ImportedCase, ImportedRun, ImportRefused, compute_mode_of, variant_name

TOOL = "cutlass profiler"
REQUIRED = ("Provider", "OperationKind", "Operation", "Disposition", "m", "n", "k", "A", "B", "C", "Runtime")
PROBLEM = ("m", "n", "k", "A", "B", "C", "alpha", "beta", "batch_count", "split_k_slices")
NOT_MEASURED = {"not_supported", "invalid", "not_run"}


def read(text: str, *, file_name: str | None) -> ImportedRun:
    rows = list(csv.DictReader(io.StringIO(_from_header(text))))
    header = set(rows[0]) if rows else set()
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ImportRefused(f"not a CUTLASS profiler CSV: no column {', '.join(missing)} (write one with "
                            "cutlass_profiler --operation=gemm --output=FILE.csv)")
    run = ImportedRun(TOOL, None, [])
    cublas = {_problem(r): float(r["Runtime"]) for r in rows if r["Provider"].strip().lower() == "cublas"
              and r["Disposition"].strip() in ("passed", "not_verified") and _positive(r["Runtime"])}
    for line, row in enumerate(rows, start=2):
        if row["Provider"].strip().lower() != "cutlass":
            continue
        entry = f"row {line}: {row['Operation'].strip()}"
        case = _case(row, entry, file_name, run.skipped)
        if case is not None and run.take(case, entry) and case.status == "passed":
            case.cublas_median_ms = cublas.get(_problem(row))
    return run


def _from_header(text: str) -> str:
    """The CSV itself: the profiler's console output has it after "CSV Results:", a file from its first line."""
    start = text.find("Problem,Provider")
    return text[start:] if start > 0 else text


def _problem(row: dict) -> tuple:
    return tuple((row.get(c) or "").strip() for c in PROBLEM)


def _positive(text: str | None) -> bool:
    try:
        value = float(text or "")
    except ValueError:
        return False
    return math.isfinite(value) and value > 0


def _case(row: dict, entry: str, file_name: str | None, skipped: list[str]) -> ImportedCase | None:
    if row["OperationKind"].strip().lower() != "gemm":
        skipped.append(f"{entry}: a {row['OperationKind'].strip()} operation, not a GEMM")
        return None
    disposition = row["Disposition"].strip()
    if disposition in NOT_MEASURED:
        skipped.append(f"{entry}: {disposition} (the profiler measured nothing)")
        return None
    try:
        m, n, k = (int(row[d]) for d in ("m", "n", "k"))
        batch = int(row.get("batch_count") or 1)
    except ValueError:
        skipped.append(f"{entry}: m, n, k or batch_count is not an integer")
        return None
    operands = [(row[x].strip().partition(":")[0], row[x].strip().partition(":")[2]) for x in ("A", "B", "C")]
    a_type, b_type = operands[0][0], operands[1][0]
    if a_type != b_type:
        skipped.append(f"{entry}: A is {a_type} and B is {b_type}; gemmwatch files GEMMs of one input type")
        return None
    compute_mode = "tf32" if a_type == "f32" and "tf32" in row["Operation"].lower() else compute_mode_of(a_type)
    if compute_mode is None or any(layout not in ("row", "column") for _, layout in operands):
        skipped.append(f"{entry}: {a_type} inputs with layouts {'/'.join(o[1] for o in operands)}: not a GEMM "
                       "gemmwatch files (FP32, TF32, FP16, BF16, FP8 E4M3; row or column)")
        return None
    form = _form(row, operands, compute_mode, batch)
    variant = variant_name(row["Operation"].strip(), *_differing(row))
    source = {"tool": TOOL, "file": file_name, "entry": entry[:300], "timed": IMPORTED_MODES["cutlass:profiler"],
              "figure": "mean", "checked": _checked(row)}
    common: dict[str, Any] = dict(variant=variant, m=m, n=n, k=k, compute_mode=compute_mode, mode="cutlass:profiler", form=form,
                  source=source)
    status = row.get("Status", "success").strip() or "success"
    if disposition == "incorrect":
        return ImportedCase(**common, stats={}, status="incorrect",
                            error="the CUTLASS profiler found this kernel's output incorrect (Disposition incorrect)")
    if disposition == "failed" or status != "success" or not _positive(row["Runtime"]):
        return ImportedCase(**common, stats={}, status="failed",
                            error=f"the CUTLASS profiler's run failed (Disposition {disposition}, Status {status})")
    return ImportedCase(**common, stats={"mean_ms": float(row["Runtime"])})


def _form(row: dict, operands: list[tuple[str, str]], compute_mode: str, batch: int) -> str:
    letters = "".join("r" if layout == "row" else "c" for _, layout in operands)
    alpha, beta = _number(row.get("alpha"), 1.0), _number(row.get("beta"), 0.0)
    epilogue = "" if beta != 0 else "+ab" if alpha == 1 else "+alpha"
    acc16 = "+acc16" if compute_mode == "fp16" and (row.get("accum") or "").strip() == "f16" else ""
    return letters + epilogue + acc16 + (f"+batch{batch}" if batch > 1 else "")


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text not in (None, "") else default
    except ValueError:
        return default


def _differing(row: dict) -> list[str]:
    """What tells two rows of one kernel and problem apart as two ways of running it: split-K,
    raster order, swizzle (the profiler sweeps them)."""
    parts = []
    if (row.get("split_k_slices") or "1").strip() not in ("", "1"):
        parts.append(f"splitk{row['split_k_slices'].strip()}")
    if (row.get("raster_order") or "").strip() not in ("", "heuristic"):
        parts.append(f"raster_{row['raster_order'].strip()}")
    if (row.get("swizzle_size") or "1").strip() not in ("", "1"):
        parts.append(f"swizzle{row['swizzle_size'].strip()}")
    return parts


def _checked(row: dict) -> str:
    disposition = row["Disposition"].strip()
    if disposition == "passed":
        return "checked by the CUTLASS profiler against its reference: passed"
    if disposition == "not_verified":
        return "not checked: the CUTLASS profiler ran without verification (Disposition not_verified)"
    return f"the CUTLASS profiler's check: {disposition}"
