"""A plain table of a team's own timings (a do_bench script's output, a spreadsheet) read as imported results.

CSV with a header, or JSON (a list of objects, or {"results": [...]}), one row per kernel and shape:

  kernel,m,n,k,dtype,median_ms              <- the least a row says
  kernel,m,n,k,dtype,times_ms               <- every sample (CSV: separated by spaces or semicolons)

Any of mean_ms, min_ms, max_ms, q1_ms, q3_ms, stddev_ms, noise, n_samples and form may be added.
A row's figure is its median: times_ms's, else median_ms; a row with only mean_ms is read as a
mean and says so. How the times were taken is the importer's to say (--timed); without it the
results say only that a table gave them.
"""

import csv
import io
import json
import math
from typing import Any

from core.description.form_keys import is_key
from core.description.timing_modes import IMPORTED_MODES
from core.exchange.imports.imported_run import ImportedCase, ImportedRun, ImportRefused, compute_mode_of, variant_name
from core.results.sample_stats import summarise

TOOL = "table"
STATS = ("median_ms", "mean_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "stddev_ms", "noise")
MAX_ROWS = 10_000


def read(text: str, *, as_json: bool, form: str, file_name: str | None, timed: str | None) -> ImportedRun:
    rows = _json_rows(text) if as_json else list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"))))
    if len(rows) > MAX_ROWS:
        raise ImportRefused(f"the table has {len(rows)} rows; one import takes at most {MAX_ROWS}")
    run = ImportedRun(TOOL, None, [])
    for line, row in enumerate(rows, start=1 if as_json else 2):
        entry = f"{'item' if as_json else 'row'} {line}"
        case = _case({str(k).strip().lower(): v for k, v in row.items() if k is not None}, entry, form, file_name,
                     timed, run.skipped)
        if case is not None:
            run.take(case, entry)
    return run


def _json_rows(text: str) -> list[dict]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ImportRefused(f"not JSON: {str(exc)[:200]}") from None
    rows = data.get("results") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ImportRefused('a JSON table is a list of objects, or {"results": [...]}, one object per kernel and shape')
    return rows


def _case(row: dict[str, Any], entry: str, form: str, file_name: str | None, timed: str | None,
          skipped: list[str]) -> ImportedCase | None:
    missing = [c for c in ("kernel", "m", "n", "k", "dtype") if row.get(c) in (None, "")]
    if missing:
        raise ImportRefused(f"{entry}: no {', '.join(missing)} (columns: kernel, m, n, k, dtype, and median_ms, "
                            "mean_ms or times_ms)")
    try:
        m, n, k = (int(row[d]) for d in ("m", "n", "k"))
    except (TypeError, ValueError):
        raise ImportRefused(f"{entry}: m, n and k are whole numbers") from None
    compute_mode = compute_mode_of(str(row["dtype"]))
    if compute_mode is None:
        skipped.append(f"{entry}: element type {row['dtype']!r} is none gemmwatch files (fp32, tf32, fp16, bf16, fp8)")
        return None
    row_form = str(row.get("form") or form).strip()
    if not is_key(row_form):
        raise ImportRefused(f"{entry}: form {row_form!r} is no form key (\"rrr\", \"rcr+ab\", ...)")
    samples = _times(row.get("times_ms"), entry)
    stats: dict[str, float]
    if samples:
        stats, figure = {name: float(value) for name, value in summarise(samples).items()}, "median"  # type: ignore[arg-type]
    else:
        stats = {name: _number(row[name], name, entry) for name in STATS if row.get(name) not in (None, "")}
        if "median_ms" not in stats and "mean_ms" not in stats:
            raise ImportRefused(f"{entry}: no time (median_ms, mean_ms or times_ms, in milliseconds)")
        figure = "median" if "median_ms" in stats else "mean"
        if stats.get(figure + "_ms", 0) <= 0:
            raise ImportRefused(f"{entry}: {figure}_ms is not a positive time")
    count = int(_number(row["n_samples"], "n_samples", entry)) if row.get("n_samples") not in (None, "") else len(samples) or None
    return ImportedCase(
        variant=variant_name(str(row["kernel"])), m=m, n=n, k=k, compute_mode=compute_mode, mode="table",
        form=row_form, stats=stats, samples_ms=samples,
        source={"tool": TOOL, "file": file_name, "entry": entry, "figure": figure, "samples": count,
                "timed": timed or IMPORTED_MODES["table"], "checked": "not checked by gemmwatch: the table says only its times"})


def _number(value: Any, name: str, entry: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ImportRefused(f"{entry}: {name} {value!r} is not a number") from None
    if not math.isfinite(number) or number < 0:
        raise ImportRefused(f"{entry}: {name} {value!r} is not a finite, non-negative number")
    return number


def _times(value: Any, entry: str) -> list[float]:
    if value in (None, ""):
        return []
    items = value if isinstance(value, list) else str(value).replace(";", " ").split()
    times = [_number(t, "times_ms", entry) for t in items]
    if not all(t > 0 for t in times):
        raise ImportRefused(f"{entry}: times_ms holds a time that is not positive")
    return times
