"""cuBLAS's best as the baseline (issue 40): for a case's GEMM, cuBLAS's default call and each of
cuBLASLt's heuristic candidates (up to CANDIDATES) timed once, in the case's own way (cold by
default: the device's `sample`, as the kernel is timed), and the fastest kept as the call the
kernel is timed beside. The choice is cached per GPU, library version, shape, precision and
mode (a JSON file in the data folder), and made again when any of them changes. A launcher's case
runs in a confined process that may not touch the data folder: there the choice is kept in that
process only (`memo`), made in its rehearsal before the job's code is first called.

The figures say which is which: the result's env.cublas_plan holds the call that was timed
(`against`: "best" or "default"), the default's and the best's selection medians and every
candidate's, so a % of cuBLAS can be read against either.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from pathlib import Path
from typing import Callable

CANDIDATES = 8  # cuBLASLt's heuristic list, as its own autotuning samples take it
# Per candidate, after one warm-up launch: the median of five cold samples. On the H100 the
# candidates that differ differ by 3-8 % (1024^3), well beyond those medians' spread; at sizes
# where they are level, either choice is cuBLAS's best (docs/BENCHMARKS.md).
SELECTION_SAMPLES = 5


def key_digest(key: dict) -> str:
    """The choice's name, the same in the folder's file and in a process's memo."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def cache_path(folder: Path, key: dict) -> Path:
    return folder / f"{key_digest(key)}.json"


def choose(default, gemm, median_ms: Callable[[Callable[[], None]], float], folder: Path | None, key: dict,
           memo: dict | None = None) -> dict:
    """Time `default` (cuBLAS's default call) and each of `gemm`'s candidates (`gemm.use(i)`
    switches it) with `median_ms`; leave `gemm` on the fastest candidate and say which of the two
    to time. Returns the plan to record: {"against", "default", "best", "candidates", "cached"}.
    folder: where choices are cached for every process; memo: a dict that keeps them in this one."""
    path = cache_path(folder, key) if folder is not None else None
    digest = key_digest(key)
    # Either leaves `gemm` on the stored best.
    stored = _stored(path, gemm) if path is not None else _reusable(memo.get(digest), gemm) if memo is not None else None
    if stored is not None:
        return {**stored, "cached": True}
    timed = [{"index": -1, "call": "default", "median_ms": median_ms(default)}]
    for index in range(len(gemm.candidates)):
        gemm.use(index)
        try:
            timed.append({"index": index, "call": "cublasLtMatmul", "algo": gemm.plan["algo"],
                          "median_ms": median_ms(gemm)})
        except Exception as exc:  # a candidate cuBLASLt offered but cannot run here: said, not chosen
            timed.append({"index": index, "call": "cublasLtMatmul", "algo": gemm.plan["algo"], "error": str(exc)[:200]})
    ran = [t for t in timed if "median_ms" in t]
    best = min(ran, key=lambda t: t["median_ms"])
    lt_best = min((t for t in ran if t["index"] >= 0), key=lambda t: t["median_ms"], default=None)
    if lt_best is not None:
        gemm.use(lt_best["index"])
    plan = {"against": "default" if best["index"] < 0 else "best", "default": timed[0], "best": best,
            "candidates": timed}
    if path is not None:
        store(path, plan)
    if memo is not None:
        memo[digest] = plan
    return {**plan, "cached": False}


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def _stored(path: Path | None, gemm) -> dict | None:
    """A cached choice from its file (see _reusable)."""
    if path is None or not path.exists():
        return None
    try:
        return _reusable(json.loads(path.read_text()), gemm)
    except (OSError, ValueError):
        return None


def _reusable(stored: dict | None, gemm) -> dict | None:
    """A choice made before, where it still names a candidate the heuristic offers, with the same
    configuration (a new library or driver can reorder the list); `gemm` left on that candidate."""
    if stored is None:
        return None
    try:
        if stored["against"] == "best":
            index = stored["best"]["index"]
            if index >= len(gemm.candidates):
                return None
            gemm.use(index)
            if gemm.plan["algo"] != stored["best"]["algo"]:
                return None
        return stored
    except (KeyError, TypeError):
        return None


def store(path: Path, plan: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(plan))
    temporary.replace(path)
