"""How much source a job carries, counted as its files are kept: by content, each distinct file once.

A repository's kernels often share one runner and its headers (fast.cu's twelve launchers are all in
one 274 KB unit): the kernel store keeps each file once by its digest (core/records/kernel_store.py) and the
compile cache builds by content, so what a job costs the server is its distinct files. The API's
limit (GEMMWATCH_MAX_SOURCE_BYTES, api/limits.py) and `gemmwatch ci`'s split before posting
(cli/ci.py) both measure with `distinct_bytes`.
"""

import hashlib
from collections.abc import Iterable, Mapping


def distinct_bytes(file_sets: Iterable[Mapping[str, str]]) -> int:
    """The bytes of every distinct file text among the sets (a file shared by several kernels, under
    any path, counted once)."""
    seen: dict[bytes, int] = {}
    for files in file_sets:
        for text in files.values():
            data = text.encode()
            seen.setdefault(hashlib.sha256(data).digest(), len(data))
    return sum(seen.values())


def refusal(names: list[str], size: int, most: int) -> str | None:
    """Why kernels whose distinct files hold `size` bytes are refused, or None within the limit."""
    if size <= most:
        return None
    who = names[0] if len(names) == 1 else f"the {len(names)} kernels {', '.join(names)}"
    return (f"{who}: the files hold {size} bytes (each distinct file counted once, however many kernels share it); "
            f"at most {most} a job (GEMMWATCH_MAX_SOURCE_BYTES)")
