"""The dashboard's error pages: a person who opens a job that is not there, a page whose address it
cannot read, or a page the server failed to make gets a page in the dashboard's layout with the
status, a sentence to act on and links back, never `{"detail": ...}`.

Who gets a page (`wants_page`): any dashboard route (its endpoint lives in dashboard/), and any
other address asked for by a browser (Accept: text/html). The API under /api, the machine
endpoints (/metrics, /healthz, /openapi.json) and a page's own exports (format=csv|json) keep
their JSON, status for status. api/error_handlers.py decides which and calls `error_page`.
"""

from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse

from dashboard.templating import templates

MACHINE_PATHS = ("/metrics", "/healthz", "/openapi.json")
# What a path parameter names, for "there is no job 999".
THINGS = {"job_id": "job", "sha": "commit", "result_id": "result"}
# What a field of the address takes, said as a person would, in place of the validator's pattern.
HINTS = {"sha": "a commit's sha or its start: hexadecimal digits, 0-9 and a-f", "job_id": "a job's number, such as 12"}


def _phrase(status: int) -> str:
    return HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"


def wants_page(request: Request) -> bool:
    path = request.url.path
    if path == "/api" or path.startswith("/api/") or path in MACHINE_PATHS:
        return False
    if request.query_params.get("format") in ("csv", "json"):
        return False
    endpoint = request.scope.get("endpoint")
    if endpoint is not None and getattr(endpoint, "__module__", "").startswith("dashboard."):
        return True
    return "text/html" in request.headers.get("accept", "").lower()


@dataclass
class Problem:
    """One thing the address got wrong: the field, what was wrong with it, what it held."""

    field: str
    message: str
    value: str | None = None


def _shown(value, limit: int = 80) -> str:
    """A value from the request as a page can show it: short, and always encodable."""
    text = value if isinstance(value, str) else repr(value)
    text = text if len(text) <= limit else text[:limit] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def problems_of(errors: list[dict]) -> list[Problem]:
    """A validation error's entries (FastAPI's `exc.errors()`) as fields a person can find in the address."""
    out = []
    for err in errors[:20]:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("query", "path", "body", "header", "cookie")]
        value = err.get("input")
        message = HINTS.get(loc[-1] if loc else "", str(err.get("msg", "not valid")))
        out.append(Problem(_shown(".".join(loc) or "the address"), _shown(message, 300),
                           None if value is None or isinstance(value, (dict, list)) else _shown(value)))
    return out


def _without(request: Request, fields: set[str]) -> str | None:
    """This page's address without the query parameters named, where that leaves a different address."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in fields]
    if len(kept) == len(request.query_params.multi_items()):
        return None
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")


def _missing_thing(request: Request) -> tuple[str, str] | None:
    for name, thing in THINGS.items():
        if name in request.path_params:
            return thing, str(request.path_params[name])
    return None


def _sentences(request: Request, status: int, detail, problems: list[Problem]) -> tuple[str, list[str]]:
    """The page's heading and its sentences."""
    if status == 404:
        missing = _missing_thing(request)
        if missing:
            thing, name = missing
            where = {"job": "The jobs list (the link below) shows the recent ones.",
                     "commit": "The overview and the history list the commits measured.",
                     "result": "Each job's page lists its results."}[thing]
            return (f"No {thing} {_shown(name)}",
                    [f"This gemmwatch has no {thing} {_shown(name)}. The address may be mistyped, or it was sent to "
                     f"another gemmwatch server. {where}"])
        return ("Page not found", [f"There is no page at {_shown(request.url.path)}. The pages are listed at the top."])
    if status == 422:
        lines = ["This page could not read part of its address. Correct it in the address bar, or open the page "
                 "without it and choose from its menus."]
        if not problems and isinstance(detail, str):
            lines.append(_shown(detail, 300))
        return "The address has a value this page cannot read", lines
    if status >= 500:
        return ("The server failed to make this page",
                ["Something went wrong on the server, not in the address. Try again in a moment; if it keeps "
                 "happening, the server's log holds the error for this request."])
    phrase = _phrase(status)
    return phrase, [_shown(detail, 300) if isinstance(detail, str) and detail else f"The server answered {status} {phrase}."]


def error_page(request: Request, status: int, detail=None, errors: list[dict] | None = None,
               headers: dict | None = None) -> HTMLResponse:
    problems = problems_of(errors or [])
    if status == 422 and not problems and isinstance(detail, str) and ":" in detail:
        # dashboard/filters.py's own refusals: "size: expected MxNxK ..., got 'big'"
        field, message = detail.split(":", 1)
        if field.strip() in request.query_params:
            problems = [Problem(field.strip(), _shown(message.strip(), 300))]
    heading, sentences = _sentences(request, status, detail, problems)
    phrase = _phrase(status)
    without = _without(request, {p.field for p in problems}) if problems else None
    return templates.TemplateResponse(
        request, "error.html",
        {"view": "error", "status": status, "phrase": phrase, "heading": heading, "sentences": sentences,
         "problems": problems, "without": without},
        status_code=status, headers=headers)
