"""Reading a stored result's `env` for the pages and verdicts: each part they interpret typed again by
its record in core/results/result_env.py, so a row a worker wrote oddly (or an older worker wrote
otherwise) reads as absent, never as a wrong figure."""

from typing import Any

from pydantic import BaseModel, ValidationError

from core.results.result_env import AbRecord, GpuRecord, Peak, PrecisionRecord, Resources, split_unknown


def resources_of(env: Any, key: str = "resources") -> dict[str, Any] | None:
    """env.resources (or env.base_resources) as the Resources shape, or None."""
    return _record(Resources, env, key)


def ab_of(env: Any) -> dict[str, Any] | None:
    """A confirmation's base samples (env.ab), or None."""
    return _record(AbRecord, env, "ab")


def gpu_of(env: Any) -> dict[str, Any] | None:
    """env.gpu as the GpuRecord shape (clocks, memory bus, SMs), or None."""
    return _record(GpuRecord, env, "gpu")


def output_type_of(env: Any) -> str | None:
    """The type C was written in (env.precision.output), or None."""
    precision = _record(PrecisionRecord, env, "precision")
    return precision.get("output") if precision else None


def pct_of_peak_of(env: Any) -> float | None:
    """The share of the GPU's peak for its precision the runner found the result at (env.peak.pct)."""
    peak = _record(Peak, env, "peak")
    return peak.get("pct") if peak else None


def _record(model: type[BaseModel], env: Any, key: str) -> dict[str, Any] | None:
    value = env.get(key) if isinstance(env, dict) else None
    if not isinstance(value, dict):
        return None
    try:
        return model.model_validate(split_unknown(model, value, "")[0]).model_dump()
    except (ValidationError, RecursionError):
        return None
