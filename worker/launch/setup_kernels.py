"""The kernels a confined call's set-up compiles (CuPy's kernel cache: its own elementwise and
reduction kernels for drawing, converting and checking matrices, and the L2 flush), kept from one
call to the next.

Every launcher case runs in a fresh process with a fresh HOME (worker/launch/launcher_call.py), so
each one used to compile those kernels again: on the H200, 8.6 s of a case's 12-18 s set-up
(docs/BENCHMARKS.md). They are now made once per worker, by a set-up-only call, a process that runs
the set-up and ends without loading anything of the job's; its cache is the only one ever kept.
Each later call gets a copy of what was kept, never the folder itself, and nothing is taken back
from a call that loaded a job's library: a thread CUDA made during the set-up keeps the set-up's
Landlock layer (HOME writable), and the job's code can get such a thread to run for it
(tests/fixtures/hostile_launchers/host_callback.c), so a cache that such a process could write is
never trusted by another.
"""

import os
import re
import shutil
from pathlib import Path

from core.atomic_file import write_whole

# Where CuPy keeps its compiled kernels in the call's HOME (its CUPY_CACHE_DIR, set explicitly).
IN_HOME = Path(".cupy") / "kernel_cache"
# What CuPy names a kept kernel (a digest of its source and options, then the binary's kind): any
# other name in a set-up's cache (CuPy's temporary files, anything unexpected) is not kept.
KEPT_NAME = re.compile(r"^[0-9a-f]{16,64}(?:_[0-9]{1,4})?\.(?:cubin|ptx|hsaco)$")
LARGEST_FILE = 32 << 20  # CuPy's kernels run to hundreds of KiB; a larger file is not one of them


def kept_files(folder: Path) -> list[Path]:
    """The regular files of `folder` named as CuPy names a kernel (no link, no folder, none too large)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(Path(e.path) for e in entries
                  if KEPT_NAME.match(e.name) and e.is_file(follow_symlinks=False)
                  and e.stat(follow_symlinks=False).st_size <= LARGEST_FILE)


def seed(cache: Path, kept: Path | None) -> int:
    """Copy what `kept` holds into a call's own cache folder (made here); how many files."""
    cache.mkdir(parents=True, exist_ok=True)
    files = kept_files(kept) if kept is not None else []
    for path in files:
        shutil.copyfile(path, cache / path.name, follow_symlinks=False)
    return len(files)


def keep(cache: Path, kept: Path) -> int:
    """Add to `kept` the kernels a set-up-only call compiled into its cache; how many were new.
    Each file lands whole (written beside, then renamed), so a call seeded meanwhile copies either
    nothing of it or all of it."""
    kept.mkdir(parents=True, exist_ok=True)
    added = 0
    for path in kept_files(cache):
        if (kept / path.name).exists():
            continue
        write_whole(kept / path.name, path.read_bytes(), temporary_prefix=".arriving-")
        added += 1
    return added
