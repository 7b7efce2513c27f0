"""How a refused request is answered: always a 422 that names the field, whatever it held.

FastAPI's own handler echoes each invalid value back as JSON. Some values cannot be written as
JSON or UTF-8: NaN and 1e999 (Python's parser reads them; JSON has no NaN or Infinity), a lone
surrogate ("\\ud800"), a value nested hundreds of levels deep. The echo then failed and the
client got a 500 for its own bad input (issue 20, finding 8). Here the echo is made safe first:
small plain values are kept, anything else is shown as a short, ASCII-only repr.
"""

import math
import reprlib

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError

from core.errors import Unprocessable

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
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": [_error(e) for e in exc.errors()[:50]]})

    @app.exception_handler(DataError)
    def _unstorable_value(request: Request, exc: DataError) -> JSONResponse:
        # Input that passed validation but that the database cannot hold: the request's fault,
        # and nothing was stored.
        return JSONResponse(status_code=422, content={"detail": f"a value cannot be stored: {_ascii(str(exc.orig)[:300])}"})

    @app.exception_handler(Unprocessable)
    def _unprocessable(request: Request, exc: Unprocessable) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": ["body", exc.field], "msg": exc.message, "type": "value_error"}]})
