"""Filters live in the URL so that every view is a shareable permalink.

Sizes travel as one `size=4096x4096x4096` parameter (a plain <select> in a GET form sends
it as is, no script needed); `m`, `n`, `k` are still accepted for older links.
"""

from typing import Annotated, Literal

from fastapi import HTTPException, Query

from core.description.form_keys import DEFAULT_KEY, MAX_LENGTH as FORM_MAX, is_key, label
from core.description.precision import COMPUTE_MODES, ComputeMode
from core.description.problem_size import read_dims

Size = tuple[int, int, int]
MAX_DIM = 1 << 20

Format = Annotated[Literal["html", "csv", "json"], Query(description="html page, or the view's rows as csv or json")]
Dim = Annotated[int | None, Query(ge=1, le=MAX_DIM)]
# GPU models, variants and modes are compared for equality only; the cap keeps junk out of SQL.
Name = Annotated[str | None, Query(max_length=120)]
Names = Annotated[list[str], Query(max_length=120)]
# The precisions a chart can show, one at a time (core/description/precision.py): never mixed, since each is
# measured against cuBLAS in its own precision. FP32 unless the URL asks for another.
PRECISIONS = COMPUTE_MODES
PrecisionParam = Annotated[ComputeMode, Query(description="compute mode: " + ", ".join(PRECISIONS))]


def form_param(form: Annotated[str, Query(max_length=FORM_MAX, description=(
        'GEMM form key (core/description/gemm_form.py): rrr (the default: A, B, C row-major, C = alpha·A·B + beta·C, FP32 '
        'sums), rcr+ab+acc16, ccc+batch32, ...'))] = DEFAULT_KEY) -> str:
    """A FastAPI dependency: the one form a view shows (a TN figure and an NN one are different
    GEMMs, never on one line). A "+" typed into a URL arrives as a space (a menu sends %2B), so
    spaces are read as "+"; anything else that is no key is a 422 naming the field."""
    key = form.strip().replace(" ", "+") or DEFAULT_KEY
    if not is_key(key):
        raise HTTPException(status_code=422, detail=f"form: expected a GEMM form key such as rrr or rcr+ab+acc16 "
                                                    f"(core/description/gemm_form.py), got {form!r}")
    return key


def form_options(forms: list[str], current: str) -> list[tuple[str, str]]:
    """<option> value (the key) and label (as a person reads it) for the form menu: the forms the
    data has, the chosen one even where it has none (the menu says what the chart is of), and the
    default, the way back to it."""
    keys = sorted(set(forms) | {current, DEFAULT_KEY}, key=lambda k: (k != DEFAULT_KEY, k))
    return [(k, f"{k}: {label(k)}") for k in keys]




def size_label(size: Size) -> str:
    """The size as URLs, exports and the worker spell it: 16x4096x4096 (M, N, K)."""
    return "x".join(str(d) for d in size)


def size_text(size: Size) -> str:
    """The size as pages show it: 16×4096×4096, so a skinny shape reads as one at a glance."""
    return "×".join(str(d) for d in size)


def size_options(sizes: list[Size]) -> list[tuple[str, str]]:
    """<option> value (the URL form) and label (the shown form) for a size menu."""
    return [(size_label(s), size_text(s)) for s in sizes]


def by_flops(size: Size) -> tuple:
    """Menus and the default sweep order sizes by flop count, then by M, N, K.

    In Python: M*N*K overflows a 32-bit integer product in PostgreSQL."""
    return (size[0] * size[1] * size[2], size)


def parse_size(text: str) -> Size:
    """'4096x4096x4096', or '4096' for a cube. Anything else is a 422 naming the field."""
    size = read_dims(text)
    if size is not None and all(1 <= d <= MAX_DIM for d in size):
        return size  # type: ignore[return-value]
    raise HTTPException(
        status_code=422,
        detail=f"size: expected MxNxK with each dimension in 1..{MAX_DIM} (e.g. 4096x4096x4096), got {text!r}",
    )


def size_param(
    size: Annotated[str | None, Query(max_length=40, description="MxNxK, e.g. 4096x4096x4096")] = None,
    m: Dim = None,
    n: Dim = None,
    k: Dim = None,
) -> Size | None:
    """A FastAPI dependency: the size asked for, or None to let the page pick one."""
    if size:
        return parse_size(size)
    if m and n and k:
        return (m, n, k)
    return None


def clean(values: list[str]) -> tuple[str, ...]:
    """Multi-valued filters, in the order given, without blanks or repeats."""
    return tuple(dict.fromkeys(v.strip() for v in values if v and v.strip()))
