"""CSV and JSON exports: every page can hand over the rows it charts (`?format=csv|json`)."""

import csv
import io
import json
from datetime import datetime

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response


# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), =cmd|...).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value) -> str:
    """Text from a request (branch, message, variant, error) that a spreadsheet would run as a
    formula gets a leading apostrophe; numbers are data, so -3.5 stays -3.5."""
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(_FORMULA_START) else value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def csv_response(view: str, columns: list[str], rows: list[dict]) -> Response:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="gemmwatch-{view}.csv"'},
    )


def json_response(view: str, filters: dict, rows: list[dict], reason: str | None, **extra) -> JSONResponse:
    """The rows plus the filters that chose them and, for an empty chart, the reason."""
    body = {"view": view, "filters": filters, "reason": reason, "rows": rows, **extra}
    return JSONResponse(jsonable_encoder(body))
