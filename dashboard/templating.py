"""The Jinja2 environment every dashboard page renders with, and the filters its templates use.

Autoescaping is on (Starlette's default for .html), so any text from a request is text in the
page. The filters below read stored records through their declared shape (core/results/result_env.py),
so a value a template formats is a number or absent, never a string or a list in its place.
"""

from pathlib import Path

from fastapi.templating import Jinja2Templates

from core.description.form_keys import label as form_label
from core.profile.profile_changes import formatted
from core.results.env_reading import resources_of
from dashboard.filters import size_label, size_options, size_text

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
# A value a template prints that is absent reads as a dash, never as the word None (issue 38); a cell
# that should be empty says so with `blank`. Set before any template is compiled: Jinja bakes it in.
templates.env.finalize = lambda value: "—" if value is None else value


def with_resources(results) -> list[tuple]:
    """(result, its env.resources) for each result that recorded any."""
    out = []
    for r in results:
        res = resources_of(r.env)
        if res and any(v is not None for v in res.values()):
            out.append((r, res))
    return out


def blank(value) -> object:
    """An absent number as an empty cell, not "None"."""
    return "" if value is None else value


def cublas_against(env) -> dict:
    """Which cuBLAS a result's % is against (env.cublas_best, worker/measure/cublas_best.py): "best" or
    "default" (results from before the choice were all against the default), and the selection's
    medians where it made one."""
    chosen = (env or {}).get("cublas_best") or {}
    default, best = (chosen.get(k) or {} for k in ("default", "best"))
    medians = (f"cuBLAS default {default['median_ms']:.4g} ms, best {best['median_ms']:.4g} ms"
               if default.get("median_ms") and best.get("median_ms") else chosen.get("why") or "")
    return {"against": chosen.get("against", "default"), "medians": medians}


templates.env.filters.update(
    size=size_label,  # the URL form, for <option> values
    size_text=size_text,  # the shown form
    size_options=size_options,
    options=lambda values: [(v, v) for v in values],  # <option> value = label
    with_resources=with_resources,
    blank=blank,
    form_label=form_label,  # a GEMM form key as a person reads it
    cublas_against=cublas_against,  # what a result's % of cuBLAS is against
    profile_value=formatted,  # a profile row's value in its unit: "2,759,680 ns", "1,987 MHz"
)
