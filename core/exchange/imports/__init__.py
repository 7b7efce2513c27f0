"""Results other tools measured, brought in as gemmwatch results: nvbench JSON, the CUTLASS profiler's
CSV, a plain table. Each reader makes an ImportedRun (imported_run.py); POST /api/imports stores it
as a posted run under a mode that names its tool (core/description/timing_modes.py)."""

import csv
import json
from typing import Any, Literal

from core.exchange.imports import cutlass_csv, nvbench_json, plain_table
from core.exchange.imports.imported_run import ImportedRun, ImportRefused

ImportFormat = Literal["nvbench", "cutlass-profiler", "csv", "json"]


def read_import(format: ImportFormat, content: str, *, axes: dict[str, str], dtype: str | None, form: str,
                file_name: str | None, files: dict[str, bytes], timed: str | None, device: int | None) -> ImportedRun:
    """The run a file holds, read by its format's reader; ImportRefused says what is wrong with it.
    The readers expect the shape their tool writes; a file of another shape (a list where nvbench
    writes an object, a number for a name) is refused as such, never a server error."""
    try:
        if format == "nvbench":
            try:
                document: Any = json.loads(content)
            except (ValueError, RecursionError) as exc:
                raise ImportRefused(f"not JSON: {str(exc)[:200]}") from None
            return nvbench_json.read(document, axes=axes, dtype=dtype, form=form, file_name=file_name, files=files,
                                     device=device)
        if format == "cutlass-profiler":
            return cutlass_csv.read(content, file_name=file_name)
        return plain_table.read(content, as_json=format == "json", form=form, file_name=file_name, timed=timed)
    except (AttributeError, TypeError, KeyError, IndexError, csv.Error) as exc:
        raise ImportRefused(f"not a {format} file as its tool writes one: {type(exc).__name__} {str(exc)[:200]}") from None


def guess_format(file_name: str, head: str) -> ImportFormat:
    """The format a file's name and first characters say: an nvbench JSON has "benchmarks", the
    profiler's CSV starts "Problem,Provider"."""
    text = head.lstrip("\ufeff \t\r\n")
    if "Problem,Provider" in head:
        return "cutlass-profiler"
    if text.startswith(("{", "[")):
        return "nvbench" if '"benchmarks"' in head or '"devices"' in head else "json"
    return "csv" if file_name.lower().endswith(".csv") or "," in text.split("\n", 1)[0] else "json"


__all__ = ["ImportFormat", "ImportRefused", "ImportedRun", "guess_format", "read_import"]
