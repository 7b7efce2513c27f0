"""A file written whole or not at all: a reader never sees half of it, a writer killed part-way leaves
only a stray temporary beside it (named so no reader takes it for the file), and two writers of one
name leave one of their two files, never a mix."""

import os
import tempfile
from pathlib import Path


def write_whole(path: Path, data: bytes, temporary_prefix: str | None = None) -> None:
    """Write `data` beside `path` under a temporary name, then rename it onto `path`.
    `temporary_prefix`: what the temporary's name starts with (default: `path`'s name, ".tmp" after)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix or path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
