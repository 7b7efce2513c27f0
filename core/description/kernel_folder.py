"""A kernels folder: `gemmwatch.json` beside the CUDA files it describes.

The manifest is a JSON list of kernel descriptions (core/description/kernel.py), or an object holding that
list as "kernels" beside fields every kernel of the folder shares ("timing"), in which `files` may be
left out: each kernel carries its `source` and every file that source reaches through #include,
read from the folder (never from outside it). `files` may also list paths of further files to
carry (a header reached only through a macro, say). This project's own `kernels/` is such a
folder, and so is any kernel engineer's repository with a manifest added.

Every problem is reported before anything is posted, naming the kernel and the field.
"""

import json
import os
from pathlib import Path

from pydantic import ValidationError

from core.description.kernel_description import KernelDescription, explain
from core.description.kernel_includes import include_candidates, is_toolkit_header, reached_files
from core.description.source_guard import scan_source

MANIFEST = "gemmwatch.json"


class FolderError(ValueError):
    """A kernels folder that cannot be read or described; the message names the kernel and field."""


def load_folder(folder: Path, names: list[str] | None = None) -> list[KernelDescription]:
    """The folder's kernels (of those named, the ones it describes), each checked as the API would."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise FolderError(f"{folder}: no {MANIFEST} describes its kernels (docs/KERNELS.md shows one)")
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8-sig"))  # as some editors save it
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FolderError(f"{manifest}: not JSON ({exc})") from None
    entries = folder_defaults(manifest, entries)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise FolderError(f"{manifest}: a list of kernel descriptions ({{\"name\": ..., \"source\": ...}}) is expected, "
                          'or {"timing": ..., "kernels": [...]}')
    if names:  # a name the folder does not describe may be a built-in: the server judges it
        entries = [e for e in entries if e.get("name") in names]
    out, problems = [], []
    # Kernels refused for the same reasons (seven launchers sharing one Makefile line and its one refused
    # flag): the reasons are spelled out under the first, and each other names that one.
    first_with: dict[str, str] = {}
    for index, entry in enumerate(entries):
        who = f"{manifest.name}: kernel {entry.get('name')!r} (entry {index + 1})"
        try:
            out.append(KernelDescription.model_validate(with_files(folder, entry)))
            continue
        except ValidationError as exc:
            # A refused source names each of its problems on a line of its own: indented under the kernel.
            said = "\n".join(line if line.startswith(who) else f"  {line}" for line in explain(exc, who).splitlines())
        except FolderError as exc:
            said = f"{who}: {exc}"
        first = first_with.setdefault(said.replace(who, ""), who)
        problems.append(said if first == who else f"{who}: refused as {first.split(': ', 1)[1]} is, above")
    if problems:
        raise FolderError("\n".join(problems))
    seen = [d.name for d in out]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise FolderError(f"{manifest}: {', '.join(twice)} described more than once")
    return out


# What the object form of a manifest may say for every kernel of the folder, each kernel's own
# field first: {"timing": "burst", "inputs": "uniform(0,1)", "kernels": [...]}, the folder's runner being
# a quick loop over curand's uniform inputs. The folder's `build`, `compiler`, `flags` and `include_dirs` are
# how its C++ kernels are built, one nvcc line for every source as torch.utils.cpp_extension.load gives its
# `extra_cuda_cflags` to all of them; they go to those kernels alone: a Triton or Helion kernel beside them
# has no nvcc line, and a C++ kernel left on NVRTC is told to name nvcc rather than quietly built without
# the build. `libraries` (CUTLASS's headers) is part of that line. What the folder's kernels compute, where a
# repository's kernels all share it (cute-gemm-101's: A row-major, B and C column-major, FP16 sums), may be
# said once too: `layout`, `compute_mode`, `accumulate`; and so may `args`, where every C++ kernel or launcher
# of the folder is called alike (gemm-zoo's kernel functors: `(a, b, c, d, alpha, beta, stream)`). `args` goes to
# C++ kernels alone, as the build does: a Triton kernel's parameters are its own.
CPP_FIELDS = ("build", "compiler", "flags", "include_dirs", "libraries", "args")
FORM_FIELDS = ("layout", "compute_mode", "accumulate")
FOLDER_FIELDS = ("timing", "inputs", *FORM_FIELDS, *CPP_FIELDS)


def folder_defaults(manifest: Path, entries):
    """The kernels of a manifest in its object form, each given the folder's fields it does not set
    itself; a list is returned as it is."""
    if not isinstance(entries, dict):
        return entries
    unknown = sorted(set(entries) - {"kernels", *FOLDER_FIELDS})
    if unknown or not isinstance(entries.get("kernels"), list):
        raise FolderError(f"{manifest}: the object form holds \"kernels\" (a list of kernel descriptions) and "
                          f"{', '.join(repr(f) for f in FOLDER_FIELDS)} for all of them"
                          + (f"; not {', '.join(repr(u) for u in unknown)}" if unknown else ""))
    shared = {f: entries[f] for f in FOLDER_FIELDS if f in entries}

    def given(entry: dict) -> dict:
        python = entry.get("language") in ("triton", "helion")
        fields = {name: value for name, value in shared.items() if name not in CPP_FIELDS or not python}
        return {**fields, **entry}

    return [given(e) if isinstance(e, dict) else e for e in entries["kernels"]]


def with_files(folder: Path, entry: dict) -> dict:
    """The entry with `files` filled from the folder: its source, what that includes, and any
    paths `files` lists. A dict of texts is taken as it is."""
    given = entry.get("files")
    if isinstance(given, dict):
        return entry
    if given is not None and not (isinstance(given, list) and all(isinstance(p, str) for p in given)):
        raise FolderError("files: a list of paths in the folder (or leave it out)")
    source = entry.get("source")
    if not isinstance(source, str):
        return {**entry, "files": {}}  # the missing or wrong source is reported by the schema
    listed = entry.get("units")
    units = [u for u in listed if isinstance(u, str)] if isinstance(listed, list) else []
    root = folder.resolve()
    for path in [source, *(given or []), *units]:
        on_disk = (root / path).resolve()
        if not on_disk.is_relative_to(root):
            raise FolderError(f"{path}: outside the kernels folder")
        if not on_disk.is_file():
            raise FolderError(f"{path}: no such file in {folder}")
    include_dirs = [d for d in entry.get("include_dirs") or [] if isinstance(d, str)]
    try:
        files = reached_files(folder, source, include_dirs, [*(given or []), *units])
    except UnicodeDecodeError as exc:
        raise FolderError(f"a file is not UTF-8 text ({exc})") from None
    # A kernel on the worker's header libraries (CUTLASS) has folders on its include path that are not the
    # folder's: a copy of the library vendored beside it is not what it builds with.
    off_path = [] if entry.get("libraries") else off_the_include_path(folder, files, include_dirs)
    if off_path:
        raise FolderError("; ".join(off_path))
    return {**entry, "files": files}


# A folder is walked for a missed header at most this far: a repository, not a disk.
WALK_LIMIT = 20_000


def _repository_header(inc) -> bool:
    """An include that only the repository's own include path can satisfy: a quoted one, or an
    angled plain name that neither the CUDA toolkit nor the host's /usr/include holds
    (cuda-samples' `#include <helper_cuda.h>`, from its Common/)."""
    if not inc.angled:
        return True
    return "/" not in inc.name and not is_toolkit_header(inc.name) and not (Path("/usr/include") / inc.name).exists()


def off_the_include_path(folder: Path, files: dict[str, str], include_dirs: list[str]) -> list[str]:
    """Each include of the repository's own that leads to none of the files but names a file the
    folder holds in a folder off the include path: h100_gemm's `#include "utils.h"` from
    src/kernels/hopper/, the file at src/utils.h, its CMake's include_directories(src). Its build
    would fail (nvcc: "No such file"); said now, with the folder to name in include_dirs."""
    missed: dict[str, tuple[str, int, str]] = {}
    for path, text in files.items():
        includes, _ = scan_source(text)
        for inc in sorted(includes, key=lambda i: i.line):
            if _repository_header(inc) and not any(c in files for c in include_candidates(path, inc, include_dirs)):
                missed.setdefault(inc.name, (path, inc.line, f"<{inc.name}>" if inc.angled else f'"{inc.name}"'))
    if not missed:
        return []
    held: dict[str, list[str]] = {}
    for walked, (where, subdirs, names) in enumerate(os.walk(folder)):
        if walked > WALK_LIMIT:
            break
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        rel = Path(where).relative_to(folder).as_posix()
        for name in missed:
            head, _, tail = name.rpartition("/")
            if tail in names and (head == "" or rel == head or rel.endswith("/" + head)):
                holder = rel.removesuffix(head).rstrip("/") if head else rel
                held.setdefault(name, []).append(holder or ".")
    return [f"{missed[name][0]}:{missed[name][1]} includes {missed[name][2]}, which this folder holds in {', '.join(dirs)} "
            f"(as {dirs[0]}/{name}) off the include path: name \"{dirs[0]}\" in include_dirs, as the repository's build "
            "puts it on its include path" for name, dirs in held.items()]
