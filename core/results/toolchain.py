"""What built and ran a result besides its kernel: the compiler (with the header libraries it was
built against, "nvcc 13.0.88 + CUTLASS 4.2.0"), the driver, the CUDA runtime, cuBLAS (what every %
of cuBLAS is against), CuPy, and Helion and torch where Helion wrote the kernel's code, as a result's env records them, and the inputs its timed runs
multiplied. A verdict between two results whose toolchains or inputs differ says so first
(core/verdicts/baselines.py): a slower head built against another CUTLASS, or run under another driver, is
not yet the kernel's doing."""

from typing import Any

from core.results.env_reading import gpu_of, resources_of

def _itself(env: Any) -> dict[str, Any] | None:
    return env if isinstance(env, dict) else None


def _helion_of(env: Any) -> dict[str, Any] | None:
    """What wrote a Helion kernel's Triton code: Helion's release and torch's (worker/compile/helion_build.py)."""
    record = env.get("helion") if isinstance(env, dict) else None
    return record if isinstance(record, dict) else None


# (label, where in env, key). The inputs are not the toolchain's, but a change of them moves every
# figure of a card at its power limit as a driver's does (core/description/inputs.py), so a verdict says it
# first; so does the cold samples' L2 flush (GEMMWATCH_L2_FLUSH): on an H200 at its cap the same launch
# read 4-5 % slower at 4096^3 after a zero-fill than after the default read-and-write (docs/BENCHMARKS.md).
_PARTS = (("compiler", resources_of, "compiler"), ("driver", gpu_of, "driver"),
          ("CUDA runtime", gpu_of, "cuda_runtime"), ("cuBLAS", gpu_of, "cublas"), ("CuPy", gpu_of, "cupy"),
          ("Helion", _helion_of, "version"), ("torch", _helion_of, "torch"),
          ("inputs", _itself, "inputs"), ("L2 flush", _itself, "l2_flush"))


def toolchain(env: Any) -> dict[str, str]:
    """The parts of a result's toolchain its env records, by label."""
    found = {}
    for label, record_of, key in _PARTS:
        record = record_of(env) or {}
        if record.get(key) is not None:
            found[label] = str(record[key])
    return found


def toolchain_changes(base_env: Any, head_env: Any) -> list[str]:
    """What differs between two results' toolchains, in words: "driver 580.65 -> 590.10". A part
    only one of them records is no change: nothing says what the other had."""
    base, head = toolchain(base_env), toolchain(head_env)
    return [f"{label} {base[label]} -> {head[label]}" for label in base if label in head and base[label] != head[label]]


# How a verdict's reason begins when the toolchain or the inputs changed (cli/ci.py lists every such verdict).
CHANGED = "the environment changed between base and head"


def said_first(changes: list[str], reason: str) -> str:
    """A verdict's reason with the toolchain's changes before it."""
    if not changes:
        return reason
    return f"{CHANGED} ({'; '.join(changes)}): the difference may be its, not the kernel's; {reason}"
