"""Scalar types a writer's request is checked against: strict, bounded, storable and renderable.

Strict: JSON `"64"` and `true` are not the integer 64, and `true` is not a number (pydantic's lax
mode takes both). `64.0` is: JSON Schema calls it an integer, and a client may write one so. Bounded: every value fits its column and every sum or ratio a
reader computes from it stays finite. Renderable: no text holds a lone UTF-16 surrogate (JSON
allows `"\\ud800"`, but no database driver or HTTP response can encode it) or a NUL character
(PostgreSQL text refuses it).
"""

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, Strict, StringConstraints


def _storable(text):
    # A before-validator, so its message (not the pattern's regex) is what the writer reads.
    if not isinstance(text, str):
        return text
    if "\x00" in text:
        raise ValueError("text may not hold a NUL character")
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise ValueError("text may not hold a lone UTF-16 surrogate (it is not encodable as UTF-8)")
    return text


def Text(max_length: int, min_length: int = 0):  # noqa: N802 (a type, used as one)
    """A string of at most max_length characters that every database and page can hold. (The pattern
    says "no NUL" in the API's schema too, so a client, or a fuzzer, can know it.)"""
    return Annotated[str, Strict(), StringConstraints(min_length=min_length, max_length=max_length,
                                                      pattern=r"^[^\x00]*$"), BeforeValidator(_storable)]


def _one_line(text):
    if isinstance(text, str) and any(c < " " or "\x7f" <= c <= "\x9f" for c in text):
        raise ValueError("a name may not hold control characters (line breaks, tabs, escapes)")
    return text


def Name(max_length: int, min_length: int = 1):  # noqa: N802
    """A short one-line label (a GPU's name, a driver version): text without control characters."""
    return Annotated[str, Strict(), StringConstraints(min_length=min_length, max_length=max_length,
                                                      pattern=r"^[^\x00-\x1f\x7f-\x9f]*$"),
                     BeforeValidator(_one_line), BeforeValidator(_storable)]


def _a_number(value):
    # Runs before pydantic's own (lax) integer check, which then refuses 64.5 and takes 64.0.
    if isinstance(value, (str, bytes, bool)):
        raise ValueError(f"expected an integer, got {type(value).__name__} {value!r}"[:120])
    return value


def Integer(ge: int | None = None, le: int | None = None):  # noqa: N802
    """An integer: a JSON integer or an integral float (64.0); never a string or a boolean. The bounds
    sit on the integer itself, so the API's schema states them (minimum, maximum)."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_a_number)]


StrictBool = Annotated[bool, Strict()]
Int32 = Integer(-(2**31), 2**31 - 1)
Count = Integer(0, 2**31 - 1)
# Bit masks (NVML throttle reasons) are 64-bit; JSON columns hold them, no integer column.
Mask = Integer(0, 2**63 - 1)
# A float written as JSON: finite (JSON has no NaN or Infinity; Python's parser takes them, and
# 1e999 as infinity). Strict still takes an integer: 3 is a float as JSON sees it.
Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
# Times of one kernel, in milliseconds: a case is capped at minutes, this at about three hours.
Millis = Annotated[Finite, Field(ge=0, le=1e7)]
# 1e9 GFLOPS is an exaflop per second: far past any GPU, and a sum of thousands stays finite.
Gflops = Annotated[Finite, Field(ge=0, le=1e9)]
Percent = Annotated[Finite, Field(ge=0, le=1e6)]
Ratio = Annotated[Finite, Field(ge=0, le=1e6)]  # noise, relative spreads: fractions, far below this


def finite_or_null(value: Any) -> Any:
    """The value with every NaN and infinity, at any depth, made None: JSON has neither, so a
    stored row or a ratio a view computes that overflows reads as null, never as a 500."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_null(v) for v in value]
    return value


# A commit's hash, lower-cased as it comes in: `ABC123` and `abc123` are one commit, never two
# (issue 49, row 2). The one definition for the API's words, confirmations and the CLI.
SHA_PATTERN = r"^[0-9a-fA-F]{4,64}$"
Sha = Annotated[str, StringConstraints(pattern=SHA_PATTERN, to_lower=True)]
