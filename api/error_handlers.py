"""How a refused request is answered: always a 422 that names the field, whatever it held.

FastAPI's own handler echoes each invalid value back as JSON. Some values cannot be written as
JSON or UTF-8: NaN and 1e999 (Python's parser reads them; JSON has no NaN or Infinity), a lone
surrogate ("\\ud800"), a value nested hundreds of levels deep. The echo then failed and the
client got a 500 for its own bad input (issue 20, finding 8). Here the echo is made safe first:
small plain values are kept, anything else is shown as a short, ASCII-only repr.

A person in a browser gets the same status as a page in the dashboard's layout instead
(dashboard/error_pages.py: any dashboard route, or Accept: text/html outside /api): a missing job,
an address a page cannot read, a server error. The API under /api keeps its JSON.
"""

import math
import reprlib

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.security_headers import HEADERS
from core.errors import Unprocessable
from dashboard.error_pages import error_page, wants_page

_echo = reprlib.Repr()
_echo.maxlevel, _echo.maxstring, _echo.maxother, _echo.maxlist, _echo.maxdict = 3, 120, 120, 6, 6


def _plain(value, budget: int = 200) -> bool:
    """True for a value JSON can carry as it is and short enough to echo."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**63
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return len(value) <= budget and _encodable(value)
    return False


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _ascii(text: str) -> str:
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _text(text: str) -> str:
    """Our own messages and field names, kept whole; only made encodable."""
    return text if _encodable(text) else _ascii(text)


def _safe(value):
    return value if _plain(value) else _ascii(_echo.repr(value))


def _error(err: dict) -> dict:
    out = {"type": str(err.get("type", "value_error")),
           "loc": [part if isinstance(part, int) else _text(str(part)[:200]) for part in err.get("loc", ())],
           "msg": _text(str(err.get("msg", "")))}
    if "input" in err:
        out["input"] = _safe(err["input"])
    if err.get("ctx"):
        out["ctx"] = {str(k): _safe(v) if _plain(v) else _safe(str(v)) for k, v in err["ctx"].items()}
    return out


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        # A redirect (the login's 303) and the API keep FastAPI's own answer; a page gets a page.
        if exc.status_code < 400 or not wants_page(request):
            return await http_exception_handler(request, exc)
        return error_page(request, exc.status_code, exc.detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        if wants_page(request):
            return error_page(request, 422, errors=exc.errors())
        return JSONResponse(status_code=422, content={"detail": [_error(e) for e in exc.errors()[:50]]})

    @app.exception_handler(DataError)
    def _unstorable_value(request: Request, exc: DataError):
        # Input that passed validation but that the database cannot hold: the request's fault,
        # and nothing was stored.
        detail = f"a value cannot be stored: {_ascii(str(exc.orig)[:300])}"
        if wants_page(request):
            return error_page(request, 422, detail)
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(Unprocessable)
    def _unprocessable(request: Request, exc: Unprocessable):
        if wants_page(request):
            return error_page(request, 422, errors=[{"loc": ["body", exc.field], "msg": exc.message}])
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": ["body", exc.field], "msg": exc.message, "type": "value_error"}]})

    @app.exception_handler(Exception)
    def _server_error(request: Request, exc: Exception):
        # Starlette's outermost middleware calls this, then raises the exception again for the
        # server's log; the answer passes no other middleware, so it carries the security headers
        # itself. Nothing of the exception is shown.
        response = None
        if wants_page(request):
            try:
                response = error_page(request, 500)
            except Exception:  # the page itself failed: the plain answer below
                response = None
        response = response or JSONResponse(status_code=500, content={"detail": "Internal Server Error"})
        response.headers.update({k.decode(): v.decode() for k, v in HEADERS})
        return response
