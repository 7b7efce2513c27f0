"""A matrix-multiply size as people write it: one number for a cube ("4096"), or its dimensions joined
by x, ×, * or a comma ("1000x1003x997", "8192×8192×64"), with a fourth for a batch where one is allowed.

The CLI's --size, the dashboard's size menus and a kernel description's `sizes` all read sizes through
`read_dims`, so the three agree on what a size is; each says in its own way what went wrong."""

import re
from typing import Literal, overload

_BETWEEN_DIMS = re.compile(r"\s*[x×*,]\s*")


Dims = tuple[int, int, int]
BatchedDims = tuple[int, int, int, int]


@overload
def read_dims(text: str, allow_batch: Literal[False] = False) -> Dims | None: ...
@overload
def read_dims(text: str, allow_batch: bool) -> Dims | BatchedDims | None: ...


def read_dims(text: str, allow_batch: bool = False) -> tuple[int, ...] | None:
    """(M, N, K), or (M, N, K, BATCH) where `allow_batch`, from `text`; None where it is neither."""
    parts = _BETWEEN_DIMS.split(text.strip().lower())
    if not all(p.isascii() and p.isdigit() for p in parts) or len(parts) not in ((1, 3, 4) if allow_batch else (1, 3)):
        return None
    dims = tuple(int(p) for p in parts)
    return dims * 3 if len(dims) == 1 else dims


def required_dims(text: str) -> Dims:
    """(M, N, K) from `text`, or a ValueError saying what a size looks like (for scripts and tools)."""
    dims = read_dims(text)
    if dims is None:
        raise ValueError(f"{text!r} is no size: give MxNxK (e.g. 1000x1003x997) or one number for a cube (4096)")
    return dims
