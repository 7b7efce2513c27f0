"""An nvbench JSON file (`--json` or `--jsonbin`) read as imported results.

nvbench writes one file per run: the devices, then per benchmark its axes and its states, one
state per point of the axes, each with summaries tagged "nv/cold/...", "nv/batch/..." (values in
seconds, as strings). A state becomes one result per measurement it holds: its cold one (each
launch alone, L2 flushed) as mode "nvbench:cold", its batch one as "nvbench:batch". With --jsonbin,
every cold sample time is in a file beside the JSON (float32 seconds, named by the summary
"nv/json/bin:nv/cold/sample_times"); where the importer sends those files, the statistics are
read from the samples themselves and the samples are kept.

The axes say M, N, K and the element type in the benchmark's own names; the mapping (m, n, k,
dtype → axis name) says which is which, once, by default the axes named M, N, K and T. Every axis
the mapping does not take names a variant of its own (`gemm_impl_cublas`).
"""

import math
import struct
from typing import Any

from core.description.timing_modes import IMPORTED_MODES
from core.exchange.imports.imported_run import (ImportedCase, ImportedGpu, ImportedRun, ImportRefused,
                                               compute_mode_of, variant_name)
from core.results.sample_stats import summarise

TOOL = "nvbench"
ROLES = ("m", "n", "k", "dtype")
DEFAULT_AXES = {"m": ("m",), "n": ("n",), "k": ("k",), "dtype": ("t", "dtype", "type", "precision")}
SAMPLES_TAG = "nv/json/bin:nv/cold/sample_times"
# Cold statistics as nvbench names them, in seconds, by the name core/results/timing_stats.py gives them.
COLD_STATS = {"median_ms": "median", "mean_ms": "mean", "min_ms": "min", "max_ms": "max", "q1_ms": "q1",
              "q3_ms": "q3", "stddev_ms": "stdev/absolute"}


def read(document: Any, *, axes: dict[str, str], dtype: str | None, form: str, file_name: str | None,
         files: dict[str, bytes], device: int | None = None) -> ImportedRun:
    """document: the parsed JSON. axes: role → axis name, over the defaults. dtype: the element type
    where no axis says it. files: the sample files by the name the JSON gives them."""
    if not isinstance(document, dict) or not isinstance(document.get("benchmarks"), list):
        raise ImportRefused("not an nvbench JSON file: it has no \"benchmarks\" list (write one with the benchmark's "
                            "--json or --jsonbin option)")
    devices = {d.get("id"): d for d in document.get("devices") or [] if isinstance(d, dict)}
    used = sorted({s["device"] for b in _benchmarks(document) for s in b.get("states") or [] if isinstance(s, dict)
                   and not s.get("is_skipped") and isinstance(s.get("device"), int)})
    if device is None and len(used) > 1:
        raise ImportRefused(f"the file holds states of devices {used}: one import is one GPU, name one "
                            "(gemmwatch import --device N)")
    device = device if device is not None else (used[0] if used else None)
    version = _version(document)
    run = ImportedRun(TOOL, _gpu(devices.get(device)), [])
    for bench in _benchmarks(document):
        roles = _roles(bench, axes, dtype)
        for state in bench.get("states") or []:
            entry = f"{bench.get('name')} [{state.get('name')}]"
            if state.get("is_skipped"):
                run.skipped.append(f"{entry}: skipped by nvbench ({state.get('skip_reason') or 'no reason given'})")
                continue
            if state.get("device") != device:
                continue
            run.cases += _cases(bench, state, roles, dtype, form, entry, version, file_name, files, run.skipped)
    return run


def _benchmarks(document: dict) -> list[dict]:
    return [b for b in document["benchmarks"] if isinstance(b, dict)]


def _version(document: dict) -> str | None:
    said = ((document.get("meta") or {}).get("version") or {}).get("nvbench") or {}
    text = " ".join(str(v) for v in (said.get("string"), f"({said['git_version']})" if said.get("git_version") else None) if v)
    return text[:80] or None


def _gpu(device: dict | None) -> ImportedGpu | None:
    if not device or not device.get("name"):
        return None
    sm = device.get("sm_version")
    return ImportedGpu(name=str(device["name"]), sm_count=device.get("number_of_sms"),
                       compute_capability=f"{sm // 100}.{sm % 100 // 10}" if isinstance(sm, int) and sm > 0 else None,
                       memory_mib=device["global_memory_size"] >> 20 if isinstance(device.get("global_memory_size"), int)
                       else None)


def _roles(bench: dict, axes: dict[str, str], dtype: str | None) -> dict[str, str]:
    """Role → the benchmark's axis name; ImportRefused naming its axes where M, N or K has none."""
    names = [a.get("name") for a in bench.get("axes") or [] if isinstance(a, dict) and a.get("name")]
    by_lower = {str(n).lower(): str(n) for n in names}
    roles = {}
    for role in ROLES:
        if role in axes:
            if axes[role] not in names:
                raise ImportRefused(f"benchmark {bench.get('name')!r} has no axis {axes[role]!r} (for {role}); its axes: "
                                    f"{', '.join(map(str, names)) or 'none'}")
            roles[role] = axes[role]
        else:
            found = next((by_lower[d] for d in DEFAULT_AXES[role] if d in by_lower), None)
            if found:
                roles[role] = found
    missing = [r for r in ("m", "n", "k") if r not in roles]
    if missing:
        raise ImportRefused(f"benchmark {bench.get('name')!r}: no axis says {', '.join(missing)} (its axes: "
                            f"{', '.join(map(str, names)) or 'none'}); map them once, e.g. --axis m=Size --axis n=Size "
                            "--axis k=Size")
    if "dtype" not in roles and dtype is None:
        raise ImportRefused(f"benchmark {bench.get('name')!r}: no axis says the element type (its axes: "
                            f"{', '.join(map(str, names))}); map one (--axis dtype=T) or give it (--dtype bf16)")
    return roles


def _cases(bench, state, roles, dtype, form, entry, version, file_name, files, skipped) -> list[ImportedCase]:
    values = {v.get("name"): v.get("value") for v in state.get("axis_values") or [] if isinstance(v, dict)}
    try:
        m, n, k = (int(str(values[roles[r]])) for r in ("m", "n", "k"))
    except (KeyError, TypeError, ValueError):
        skipped.append(f"{entry}: M, N or K is not an integer axis value")
        return []
    word = str(values.get(roles["dtype"])) if "dtype" in roles else str(dtype)
    compute_mode = compute_mode_of(word)
    if compute_mode is None:
        skipped.append(f"{entry}: element type {word!r} is none gemmwatch files (FP32, TF32, FP16, BF16, FP8 E4M3)")
        return []
    taken = set(roles.values())
    variant = variant_name(str(bench.get("name") or "nvbench"),
                           *(f"{name}_{value}" for name, value in values.items() if name not in taken))
    summaries = _summaries(state)
    common: dict[str, Any] = dict(variant=variant, m=m, n=n, k=k, compute_mode=compute_mode, form=form)
    source = {"tool": TOOL, "version": version, "file": file_name, "entry": entry[:300],
              "checked": "not checked: nvbench times a benchmark, it does not check its output"}
    out = []
    cold = _cold(summaries, files, entry)
    if cold is not None:
        stats, samples, count, figure = cold
        out.append(ImportedCase(**common, mode="nvbench:cold", stats=stats, samples_ms=samples,
                                source=source | {"timed": IMPORTED_MODES["nvbench:cold"], "figure": figure,
                                                 "samples": count}))
    batch_mean = _seconds(summaries, "nv/batch/time/gpu/mean")
    if batch_mean:
        out.append(ImportedCase(**common, mode="nvbench:batch", stats={"mean_ms": 1e3 * batch_mean},
                                source=source | {"timed": IMPORTED_MODES["nvbench:batch"], "figure": "mean",
                                                 "samples": _integer(summaries, "nv/batch/sample_size")}))
    if not out:
        skipped.append(f"{entry}: no GPU time (neither nv/cold/time/gpu nor nv/batch/time/gpu)")
    return out


def _summaries(state: dict) -> dict[str, dict[str, Any]]:
    """tag → {data name: value} of a state's summaries."""
    found: dict[str, dict[str, Any]] = {}
    for s in state.get("summaries") or []:
        if isinstance(s, dict) and isinstance(s.get("tag"), str):
            found[s["tag"]] = {str(d.get("name")): d.get("value") for d in s.get("data") or [] if isinstance(d, dict)}
    return found


def _seconds(summaries: dict, tag: str) -> float | None:
    try:
        value = float(summaries[tag]["value"])
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def _integer(summaries: dict, tag: str, name: str = "value") -> int | None:
    try:
        return int(summaries[tag][name])
    except (KeyError, TypeError, ValueError):
        return None


def _cold(summaries, files, entry):
    """(stats, samples, sample count, figure) of the cold measurement, or None where there is none.
    From its sample file where that came along, else from nvbench's own statistics."""
    sample_file = (summaries.get(SAMPLES_TAG) or {}).get("filename")
    if sample_file is not None and sample_file in files:
        samples = _samples(files[sample_file], sample_file, entry, _integer(summaries, SAMPLES_TAG, "size"))
        return dict(summarise(samples)), samples, len(samples), "median"
    stats = {name: 1e3 * s for name, tag in COLD_STATS.items() if (s := _seconds(summaries, f"nv/cold/time/gpu/{tag}"))}
    if "median_ms" not in stats and "mean_ms" not in stats:
        return None
    relative = summaries.get("nv/cold/time/gpu/stdev/relative", {}).get("value")
    try:
        noise = float(relative)
        if math.isfinite(noise) and noise >= 0:
            stats["noise"] = noise
    except (TypeError, ValueError):
        pass
    # An nvbench before 0.1 reports no median: its mean is then the figure, and the result says so.
    return stats, [], _integer(summaries, "nv/cold/sample_size"), "median" if "median_ms" in stats else "mean"


def _samples(raw: bytes, name: str, entry: str, count: int | None) -> list[float]:
    """A sample file's times in milliseconds: nvbench writes float32 seconds, little-endian."""
    if len(raw) % 4 or (count is not None and len(raw) // 4 != count):
        raise ImportRefused(f"{entry}: sample file {name} holds {len(raw)} bytes, not {count} float32 times as the JSON "
                            "says: send the files nvbench wrote beside this JSON, unchanged")
    times = [1e3 * t for t in struct.unpack(f"<{len(raw) // 4}f", raw)]
    if not times or not all(math.isfinite(t) and t > 0 for t in times):
        raise ImportRefused(f"{entry}: sample file {name} holds a time that is not a positive number")
    return times
