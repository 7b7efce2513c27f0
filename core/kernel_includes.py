"""Where a kernel's #include may lead, decided before anything is compiled.

A kernel engineer's files include one another, CUDA's device headers and, habitually, host
headers. Each `#include` the source guard reads (core/source_guard.py) resolves to one of three
things, or the kernel is refused with the file and line:

1. a file the kernel itself carries (`#include "x.cuh"`: from the including file's folder, then
   the description's `include_dirs`, then the folder's root; `<x.cuh>` from `include_dirs`).
   NVRTC gets it as an in-memory header under the name as spelled: nothing is read from the
   worker's disk;
2. a stand-in for a host header (core/standin_headers/: <cstdio>, <cassert>, <cuda_runtime.h>, ...)
   that gives device code what it uses from it and nothing else, also in memory;
3. one of CUDA's own device headers on an allow-list (<cuda_fp16.h>, <mma.h>, <cuda/pipeline>,
   <cooperative_groups.h>, <cuda/std/...>), which NVRTC reads from the toolkit's include folders;
   the compile process may read those folders and nothing else (worker/nvrtc_sandbox.py).
"""

import functools
import importlib.util
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from core.source_guard import Include, SourceRefused, check_source, scan_source

STANDIN_DIR = Path(__file__).with_name("standin_headers")
# Files of the stand-ins that only other stand-ins include.
_STANDIN_PARTS = frozenset({"gemmwatch_host.h"})
# Stand-ins that include libcu++ (so the toolkit's folders must be readable).
LIBCUXX_STANDINS = frozenset({"cstdint", "stdint.h", "climits", "limits.h", "cfloat", "float.h"})

# CUDA's device headers a kernel may include: exact names, and folders whose every header may be
# included (libcu++ and cooperative groups). What they include in turn is the toolkit's business.
TOOLKIT_HEADERS = frozenset({
    "cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp", "mma.h",
    "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_awbarrier.h", "cuda_awbarrier_primitives.h",
    "cooperative_groups.h", "vector_types.h", "vector_functions.h", "sm_60_atomic_functions.h",
})
TOOLKIT_FOLDERS = ("cuda/", "cooperative_groups/")


class IncludeRefused(ValueError):
    """An #include that leads nowhere allowed; the message names the file and line."""

    def __init__(self, file: str, line: int, reason: str):
        super().__init__(f"{file}, line {line}: {reason}")
        self.file, self.line, self.reason = file, line, reason


@dataclass(frozen=True)
class Headers:
    """What NVRTC is given for one kernel: in-memory headers by the name their includes spell,
    whether any include needs the toolkit's folders, and the kernel's own path behind each
    spelled name (NVRTC's diagnostics say the spelled name; a user reads the path)."""

    by_name: dict[str, str]
    needs_toolkit: bool
    paths: dict[str, str] = field(default_factory=dict)


@functools.cache
def standins() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(STANDIN_DIR.iterdir()) if p.is_file()}


def standin_names() -> list[str]:
    return sorted(set(standins()) - _STANDIN_PARTS)


def is_toolkit_header(name: str) -> bool:
    return name in TOOLKIT_HEADERS or (name.startswith(TOOLKIT_FOLDERS) and ".." not in name.split("/"))


def allowed_system_headers() -> str:
    return (f"stand-ins for host headers: {', '.join(standin_names())}; CUDA device headers: "
            f"{', '.join(sorted(TOOLKIT_HEADERS))}, {', '.join(f + '...' for f in TOOLKIT_FOLDERS)}")


def _candidates(including: str, include: Include, include_dirs: list[str]) -> list[str]:
    """The carried paths an include may name, in the order they are tried."""
    here = posixpath.dirname(including)
    found = [] if include.angled else [posixpath.join(here, include.name)]
    found += [posixpath.join(d, include.name) for d in include_dirs] + [include.name]
    out = []
    for path in found:
        norm = posixpath.normpath(path)
        if not norm.startswith("../") and norm != ".." and norm not in out:
            out.append(norm)
    return out


def resolve(files: dict[str, str], source: str, include_dirs: list[str] = ()) -> Headers:
    """Check every file the source reaches (each through the source guard) and resolve every
    include; raise SourceRefused or IncludeRefused naming the file and line."""
    by_name: dict[str, str] = {}
    paths: dict[str, str] = {}
    spelled_from: dict[str, str] = {}  # spelled name -> what it led to
    needs_toolkit = False
    todo, seen = [source], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        includes, refusal = scan_source(files[path])
        if refusal is not None:
            # Whichever comes first in the file: the guard's refusal, or an include that leads nowhere.
            first_bad = next((inc for inc in sorted(includes, key=lambda i: i.line)
                              if inc.line < refusal.line and _lead(path, inc, files, include_dirs) is None), None)
            if first_bad is None:
                raise SourceRefused(refusal.line, refusal.reason, path)
            includes = frozenset({first_bad})
        for inc in sorted(includes, key=lambda i: i.line):
            shown = f"<{inc.name}>" if inc.angled else f'"{inc.name}"'
            lead = _lead(path, inc, files, include_dirs)
            if lead is None:
                looked = ", ".join(_candidates(path, inc, list(include_dirs)))
                raise IncludeRefused(path, inc.line, f"#include {shown} is neither a file of the kernel (looked for "
                                                     f"{looked}) nor an allowed system header ({allowed_system_headers()})")
            kind, target = lead
            if kind == "toolkit":
                needs_toolkit = True
                continue
            earlier = spelled_from.setdefault(inc.name, f"{kind} {target}")
            if earlier != f"{kind} {target}":
                raise IncludeRefused(path, inc.line, f"#include {shown} means {kind} {target} here but {earlier} "
                                                     "elsewhere; NVRTC knows a header by the name its include spells, "
                                                     "so give the two files different names")
            if kind == "stand-in":
                _add_standin(inc.name, by_name)
            else:
                by_name[inc.name] = files[target]
                paths[inc.name] = target
                todo.append(target)
    if any(name in LIBCUXX_STANDINS for name in by_name):
        needs_toolkit = True  # those stand-ins take libcu++'s definitions
    return Headers(by_name, needs_toolkit, paths)


def _lead(path: str, inc: Include, files: dict[str, str], include_dirs) -> tuple[str, str] | None:
    """Where an include leads: ("file", a carried path), ("stand-in", name) or ("toolkit", name);
    None: nowhere allowed."""
    target = next((c for c in _candidates(path, inc, list(include_dirs)) if c in files), None)
    if target is not None:
        return "file", target
    if inc.name in standins() and inc.name not in _STANDIN_PARTS:
        return "stand-in", inc.name
    return ("toolkit", inc.name) if is_toolkit_header(inc.name) else None


def _add_standin(name: str, by_name: dict[str, str]) -> None:
    """A stand-in and the stand-ins it includes itself."""
    if name in by_name:
        return
    by_name[name] = standins()[name]
    for inc in check_source(standins()[name]):
        if not inc.angled and inc.name in standins():
            _add_standin(inc.name, by_name)


def reached_files(folder: Path, source: str, include_dirs: list[str] = (), extra: list[str] = ()) -> dict[str, str]:
    """The files of a kernels folder a source reaches through its quoted (or include_dirs) includes,
    read from disk: what a description carries. Never leaves `folder`; a missing or refused file
    is left to `resolve`, which names it."""
    root = folder.resolve()
    files: dict[str, str] = {}
    todo = [source, *extra]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        on_disk = (root / path).resolve()
        if not on_disk.is_relative_to(root) or not on_disk.is_file():
            continue
        files[path] = on_disk.read_text(encoding="utf-8-sig")  # a byte-order mark is no part of the kernel
        try:
            includes = check_source(files[path])
        except SourceRefused:
            continue  # refused with its line when the description is checked
        for inc in includes:
            for candidate in _candidates(path, inc, list(include_dirs)):
                if (root / candidate).resolve().is_relative_to(root) and (root / candidate).is_file():
                    todo.append(candidate)
                    break
    return files


@functools.cache
def toolkit_include_dirs(nvrtc_library: str | None = None) -> tuple[str, ...]:
    """The folders of CUDA's headers matching the NVRTC in use: GEMMWATCH_CUDA_INCLUDE_DIRS, else
    those of the toolkit that holds the NVRTC library the worker pins (GEMMWATCH_NVRTC_LIBRARY),
    else the PyPI wheels' (nvidia-cuda-runtime, -crt: the same release as the NVRTC wheel), else
    the toolkit's (CUDA_HOME, /usr/local/cuda). libcu++ (`cuda/...`) lives in a `cccl` folder
    beside them, from the same place where it is there, else from the first place that has it (a
    Python environment may hold the runtime headers without nvidia-cuda-cccl)."""
    explicit = os.environ.get("GEMMWATCH_CUDA_INCLUDE_DIRS")
    if explicit:
        return tuple(d for d in explicit.split(os.pathsep) if d)
    roots = []
    if nvrtc_library:  # <toolkit>/lib64/libnvrtc.so -> <toolkit>/include (or targets/<arch>/include)
        toolkit = Path(nvrtc_library).resolve().parent.parent
        roots += [toolkit / "include", *sorted(toolkit.glob("targets/*/include"))]
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        roots += sorted(Path(location).glob("cu*/include"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            roots.append(Path(home) / "include")
    headers = next((r for r in roots if (r / "cuda_fp16.h").is_file()), None)
    cccl = next((r / "cccl" for r in ([headers] if headers else []) + roots if (r / "cccl" / "cuda").is_dir()), None)
    return tuple(str(d.resolve()) for d in (headers, cccl) if d is not None)
