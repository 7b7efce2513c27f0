"""Where a kernel's #include may lead, decided before anything is compiled.

A kernel engineer's files include one another, CUDA's device headers and, habitually, host
headers. Each `#include` the source guard reads (core/description/source_guard.py) resolves to one of three
things, or the kernel is refused with the file and line:

1. a file the kernel itself carries (`#include "x.cuh"`: from the including file's folder, then
   the description's `include_dirs`, then the folder's root; `<x.cuh>` from `include_dirs`).
   NVRTC gets it as an in-memory header under the name as spelled: nothing is read from the
   worker's disk;
2. a stand-in for a host header (core/description/standin_headers/: <cstdio>, <cassert>, <cuda_runtime.h>, ...)
   that gives device code what it uses from it and nothing else, also in memory;
3. one of CUDA's own device headers on an allow-list (<cuda_fp16.h>, <mma.h>, <cuda/pipeline>,
   <cooperative_groups.h>, <cuda/std/...>), which NVRTC reads from the toolkit's include folders;
   the compile process may read those folders and nothing else (worker/compile/compile_sandbox.py).

A kernel built by nvcc (`"compiler": "nvcc"`) is compiled from a folder of its own files, with a
host compiler whose headers are its own: there, an include that is not a file of the kernel is a
system header (`<vector>`, `<unistd.h>`, `<mma.h>`), allowed where it is spelled plainly, and
found by nvcc's own search in the toolkit's and the host compiler's folders.

Every problem of every file is reported at once (KernelRefused), each with its file and line.
"""

import functools
import glob
import importlib.util
import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.description.python_imports import imported_paths
from core.description.source_guard import Include, Problem, SourceRefused, check_source, scan_source

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


class KernelRefused(SourceRefused):
    """Every problem of every file a kernel description reaches, the guard's and the includes'
    (`problems`, sorted by file and line), one per line of the message."""


IncludeRefused = KernelRefused  # the name callers caught before every problem came at once


@dataclass(frozen=True)
class Headers:
    """What the compiler is given for one kernel: for NVRTC, in-memory headers by the name their
    includes spell and the kernel's own path behind each spelled name (NVRTC's diagnostics say
    the spelled name; a user reads the path); for nvcc, the system headers its includes name.
    And whether the compile reads the toolkit's folders."""

    by_name: dict[str, str]
    needs_toolkit: bool
    paths: dict[str, str] = field(default_factory=dict)
    system: frozenset[str] = frozenset()


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


def include_candidates(including: str, include: Include, include_dirs: list[str]) -> list[str]:
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


def resolve(files: dict[str, str], source: str, include_dirs: Sequence[str] = (), compiler: str = "nvrtc",
            units: Sequence[str] = ()) -> Headers:
    """Check every file the source reaches (each through the source guard) and resolve every
    include for `compiler` ("nvrtc" or "nvcc"); raise KernelRefused naming every problem found,
    each with its file and line. `units`, a launcher library's other translation units (nvcc
    compiles each on its own), meet the same guard after it; the headers returned are the source's."""
    headers = _resolve_unit(files, source, include_dirs, compiler)
    for unit in units:
        _resolve_unit(files, unit, include_dirs, compiler)
    return headers


def _resolve_unit(files: dict[str, str], source: str, include_dirs: Sequence[str], compiler: str) -> Headers:
    """resolve() for one translation unit."""
    by_name: dict[str, str] = {}
    paths: dict[str, str] = {}
    system: set[str] = set()
    spelled_from: dict[str, str] = {}  # spelled name -> what it led to
    problems: list[Problem] = []
    needs_toolkit = compiler == "nvcc"  # nvcc puts cuda_runtime.h in front of every file
    todo, seen = [source], set()
    refused_one = False
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        includes, found = scan_source(files[path])
        problems += [replace(problem, file=path) for problem in found]
        for inc in sorted(includes, key=lambda i: (i.line, i.name)):
            lead = _lead(path, inc, files, include_dirs, compiler)
            if lead is None:
                # What NVRTC takes is a long list: said with the first refusal only.
                problems.append(Problem(path, inc.line, _nowhere(path, inc, include_dirs, compiler, not refused_one)))
                refused_one = True
                continue
            kind, target = lead
            if kind == "file":
                todo.append(target)
            if compiler == "nvcc":  # nvcc reads the kernel's files from their folder, by its own search
                if kind == "system":
                    system.add(target)
                continue
            if kind == "toolkit":
                needs_toolkit = True
                continue
            earlier = spelled_from.setdefault(inc.name, f"{kind} {target}")
            if earlier != f"{kind} {target}":
                problems.append(Problem(path, inc.line, f"#include {_shown(inc)} means {kind} {target} here but "
                                                        f"{earlier} elsewhere; NVRTC knows a header by the name its "
                                                        "include spells, so give the two files different names"))
            elif kind == "stand-in":
                _add_standin(inc.name, by_name)
            else:
                by_name[inc.name] = files[target]
                paths[inc.name] = target
    if problems:
        raise KernelRefused(*problems)
    if any(name in LIBCUXX_STANDINS for name in by_name):
        needs_toolkit = True  # those stand-ins take libcu++'s definitions
    return Headers(by_name, needs_toolkit, paths, frozenset(system))


def _shown(inc: Include) -> str:
    return f"<{inc.name}>" if inc.angled else f'"{inc.name}"'


def _nowhere(path: str, inc: Include, include_dirs, compiler: str, with_list: bool = True) -> str:
    """Why an include leads nowhere allowed (with the headers NVRTC takes, or pointing to where they were said)."""
    looked = ", ".join(include_candidates(path, inc, list(include_dirs)))
    if compiler == "nvcc":
        return (f"#include {_shown(inc)} is not a file of the kernel (looked for {looked}), and a system header's "
                "name may not climb with '..'")
    if inc.angled and not inc.name.endswith((".cuh", ".cu")):
        # A host header (<vector>, <torch/extension.h>, <cublas_v2.h>): what nvcc builds take.
        return (f"#include {_shown(inc)} is neither a file of the kernel (looked for {looked}) nor a header NVRTC "
                f"takes; set \"compiler\": \"nvcc\" to build the file as the repository does, host headers "
                f"included (docs/KERNELS.md, \"Building as the repository does\")"
                + (f". NVRTC takes: {allowed_system_headers()}" if with_list else ""))
    return (f"#include {_shown(inc)} is neither a file of the kernel (looked for {looked}) nor an allowed system "
            + (f"header ({allowed_system_headers()})" if with_list else "header (those NVRTC takes are listed once, in another refusal here)"))


def _lead(path: str, inc: Include, files: dict[str, str], include_dirs, compiler: str) -> tuple[str, str] | None:
    """Where an include leads: ("file", a carried path), ("stand-in", name), ("toolkit", name)
    or, for nvcc, ("system", name); None: nowhere allowed."""
    target = next((c for c in include_candidates(path, inc, list(include_dirs)) if c in files), None)
    if target is not None:
        return "file", target
    if compiler == "nvcc":
        # The guard has made the name plain (INCLUDE_NAME: not absolute, no backslash); without '..'
        # nvcc's search can only find it beneath a folder it searches, the toolkit's or the host's.
        return None if ".." in inc.name.split("/") else ("system", inc.name)
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


def reached_files(folder: Path, source: str, include_dirs: Sequence[str] = (), extra: Sequence[str] = ()) -> dict[str, str]:
    """The files of a kernels folder a source reaches through its quoted (or include_dirs) includes,
    or a Python source through its imports of the folder's files (core/description/python_imports.py),
    read from disk: what a description carries. Never leaves `folder`; a missing or refused file
    is left to `resolve`, which names it."""
    root = folder.resolve()

    def in_folder(candidate: str) -> bool:
        return (root / candidate).resolve().is_relative_to(root) and (root / candidate).is_file()

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
        # A file's problems are named when the description is checked; what it includes is read
        # all the same, so that the files it reaches are checked in the same pass.
        if path.endswith(".py"):
            todo += imported_paths(path, files[path], source, in_folder)
            continue
        includes, _ = scan_source(files[path])
        for inc in includes:
            for candidate in include_candidates(path, inc, list(include_dirs)):
                if in_folder(candidate):
                    todo.append(candidate)
                    break
    return files


# Where CUDA toolkits are installed side by side, besides CUDA_HOME and CUDA_PATH.
SYSTEM_TOOLKITS = ("/usr/local/cuda", "/usr/local/cuda-*")
_CUDART_VERSION = re.compile(r"^#define\s+CUDART_VERSION\s+(\d+)", re.M)


@functools.cache
def toolkit_include_dirs(nvrtc_library: str | None = None, version: str | None = None,
                         explicit: str | None = None) -> tuple[str, ...]:
    """The folders of CUDA's headers for the NVRTC in use: `explicit` (GEMMWATCH_CUDA_INCLUDE_DIRS,
    Settings.cuda_include_dirs: os.pathsep-separated) where set;
    else, of every folder of CUDA headers found (search_roots), one of the compiler's own release.

    A machine often holds several CUDA installs side by side (a toolkit, the NVRTC wheel's
    headers, the CUDA 12 wheels torch brought), and headers of another release can lack what the
    compiler's own include (CUDA 12's nvidia/cuda_runtime/include has no crt/mma.h, which CUDA
    13's mma.h includes). So the folder taken is the one whose CUDART_VERSION is `version`
    (NVRTC's "13.5"), else one of its major release, an older one first; among equals, one that
    holds crt/mma.h, then the first searched. libcu++ (`cuda/...`) comes from the same place:
    inside that folder, or its cccl folder, else the first cccl folder found (a Python
    environment may hold the runtime headers without nvidia-cuda-cccl)."""
    if explicit:
        return tuple(d for d in explicit.split(os.pathsep) if d)
    roots = search_roots(nvrtc_library)
    found = [r for r in roots if (r / "cuda_fp16.h").is_file()]
    if not found:
        return ()
    headers = max(found, key=functools.partial(_fitness, wanted=_release_of(version)))  # the first of equals
    if (headers / "cuda" / "std").is_dir():  # CUDA 12's layout: libcu++ among the headers
        return (str(headers),)
    cccl = next((r / "cccl" for r in [headers, *roots] if (r / "cccl" / "cuda").is_dir()), None)
    return tuple(str(d) for d in (headers, cccl) if d is not None)


def search_roots(nvrtc_library: str | None = None) -> list[Path]:
    """Every folder that may hold CUDA's headers, resolved, each once, the likeliest first: the
    toolkit of the NVRTC library the worker pins (GEMMWATCH_NVRTC_LIBRARY), the Python
    environment's CUDA wheels (nvidia/cu13/include; CUDA 12's nvidia/cuda_runtime/include ...),
    CUDA_HOME, CUDA_PATH, then the toolkits installed side by side (SYSTEM_TOOLKITS)."""
    roots = []
    if nvrtc_library:  # <toolkit>/lib64/libnvrtc.so -> <toolkit>/include (or targets/<arch>/include)
        roots += toolkit_includes(Path(nvrtc_library).resolve().parent.parent)
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        roots += sorted(Path(location).glob("cu*/include"))
    for home in toolkit_homes():
        roots += toolkit_includes(home)
    unique: dict[Path, None] = {}
    for root in roots:
        if root.is_dir():
            unique.setdefault(root.resolve(), None)
    return list(unique)


def toolkit_homes() -> list[Path]:
    """The CUDA toolkits named or installed on this machine: CUDA_HOME, CUDA_PATH, then those side by
    side (SYSTEM_TOOLKITS)."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    homes += [home for pattern in SYSTEM_TOOLKITS for home in sorted(glob.glob(pattern))]
    return [Path(home) for home in homes if home]


def toolkit_includes(toolkit: Path) -> list[Path]:
    """A toolkit's folders of headers: include/, or targets/<arch>/include in a toolkit's layout."""
    return [toolkit / "include", *sorted(toolkit.glob("targets/*/include"))]


def _release_of(version: str | None) -> tuple[int, int] | None:
    """"13.5" (or "13.5.37") -> (13, 5)."""
    if not version:
        return None
    major, _, rest = version.partition(".")
    return int(major), int(rest.partition(".")[0] or 0)


def cuda_release(include_dir: Path) -> tuple[int, int] | None:
    """The CUDA release a folder of headers belongs to, from CUDART_VERSION in its
    cuda_runtime_api.h (13050 -> (13, 5)); None where it has none."""
    try:
        m = _CUDART_VERSION.search((include_dir / "cuda_runtime_api.h").read_text(errors="replace"))
    except OSError:
        return None
    return (int(m.group(1)) // 1000, int(m.group(1)) % 1000 // 10) if m else None


def _fitness(root: Path, wanted: tuple[int, int] | None) -> tuple[bool, ...]:
    release = cuda_release(root)
    has_mma = (root / "crt" / "mma.h").is_file()
    if wanted is None or release is None:
        return False, False, False, has_mma
    same_major = release[0] == wanted[0]
    return release == wanted, same_major, same_major and release <= wanted, has_mma


def nvcc_include_dirs(nvcc_path: str) -> tuple[str, ...]:
    """The header folders of the toolkit an nvcc belongs to, as its nvcc.profile gives them to it
    (-I <toolkit>/include or targets/<arch>/include, -isystem its cccl folder): what an nvcc
    compile may read of CUDA, whatever other CUDA installs sit beside it."""
    toolkit = Path(nvcc_path).resolve().parent.parent  # <toolkit>/bin/nvcc
    found = []
    for include in toolkit_includes(toolkit):
        for folder in (include, include / "cccl"):
            if folder.is_dir() and str(folder.resolve()) not in found:
                found.append(str(folder.resolve()))
    return tuple(found)
