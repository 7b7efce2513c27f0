"""The library nvcc's compile process preloads so that a read its confinement denies fails as a
missing file would (worker/compile/denied_as_absent.c says why: `__has_include` could otherwise tell
whether a path outside the job exists, issue 49 row 6).

Built once per source text with the host compiler nvcc uses, into the worker's data folder; where
no C compiler builds it, `library` says None and the compile's confinement says what is missing.
"""

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("denied_as_absent.c")


def library(folder: str) -> str | None:
    """The built library's absolute path under `folder` (made if missing), or None where it cannot be
    built. Absolute: the compile process runs in a folder of its own, and a relative path there (the
    data folder's default, `.gemmwatch`, is one) made the loader skip the library with a warning, so
    the confinement's denials read as such again."""
    return _library(str(Path(folder).resolve()))


@functools.lru_cache(maxsize=4)
def _library(folder: str) -> str | None:
    text = SOURCE.read_bytes()
    target = Path(folder) / f"denied_as_absent-{hashlib.sha256(text).hexdigest()[:16]}.so"
    if target.is_file():
        return str(target)
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(SOURCE), "-ldl"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not built.is_file():
            return None
        os.replace(built, target)  # whole or not at all: two workers may build it at once
    return str(target)
