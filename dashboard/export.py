"""CSV and JSON exports: every page can hand over the rows it charts (`?format=csv|json`)."""

import csv
import io
import json
import re
from datetime import datetime

from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response

from core.wire_types import finite_or_null

# A spreadsheet runs a cell that starts with one of these as a formula (=HYPERLINK(...), =cmd|...).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Where a formula can start: the cell's first character, and the first of every line in it (a
# reader that splits rows at a line break, even inside quotes, starts a new cell there).
_LINE_START = re.compile(r"(?:^|(?<=[\r\n]))(?=[=+\-@\t\r])")


def _cell(value) -> str:
    """Text from a request (branch, message, variant, error) that a spreadsheet would run as a
    formula gets an apostrophe at the start of each of its lines; numbers are data, so -3.5
    stays -3.5."""
    if value is None:
        return ""
    if isinstance(value, str):
        return _LINE_START.sub("'", value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def csv_response(view: str, columns: list[str], rows: list[dict]) -> Response:
    buf = io.StringIO()
    # The csv module quotes a field holding the delimiter, a quote or a character of the line
    # terminator; with "\r\n" (RFC 4180's) that covers a bare "\r" too. A "\n" terminator left a
    # field with "\r" unquoted, and a reader started a row at "=cmd|..." (issue 20, finding 3).
    writer = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
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
    return JSONResponse(finite_or_null(jsonable_encoder(body)))
