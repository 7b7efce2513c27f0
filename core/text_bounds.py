"""Every stored text has a bound (issue 37, row 3): a compile log, a result's error, a job's error.

A text over its bound keeps its head and its tail, each half the bound, with one line between
them that says how much was left out. Bounds are counted in UTF-8 bytes, as the database and
the readers carry them; a cut never splits a character.
"""

import re

# A result's or a job's error as stored and served (a compile log inside it is bounded first,
# by GEMMWATCH_COMPILE_LOG_MAX_BYTES): what any reader of /api/jobs, / or a job page gets at most.
ERROR_MAX_BYTES = 64 << 10

_MARKER = "\n… {n} bytes left out …\n"
# The marker's own line, as a reader (and worker/compile/compile_log.py) recognises it.
MARKER_LINE = re.compile(r"^… \d+ bytes left out …$")


def head_and_tail(text: str | None, limit: int) -> str | None:
    """`text` itself when its UTF-8 form is at most `limit` bytes; else its head and its tail with
    "… N bytes left out …" on a line between them, the whole at most `limit` bytes."""
    if text is None:
        return None
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    room = max(limit - len(_MARKER.format(n=len(data)).encode()), 2)
    head, tail = room - room // 2, room // 2
    kept_head = data[:head].decode("utf-8", errors="ignore")
    kept_tail = data[len(data) - tail:].decode("utf-8", errors="ignore") if tail else ""
    left_out = len(data) - len(kept_head.encode()) - len(kept_tail.encode())
    return kept_head + _MARKER.format(n=left_out) + kept_tail


def bounded_error(text: str | None) -> str | None:
    """An error as it is stored: at most ERROR_MAX_BYTES."""
    return head_and_tail(text, ERROR_MAX_BYTES)
