"""cuBLASLt's operands for every form (worker/gpu/cublaslt.py's `stored_layouts` over
core/description/gemm_form.py's `cublas_gemm`): each operand's memory, read column-major as the
layouts say and transposed as the plan says, multiplies into C's memory in C's own layout. Run
here in NumPy, as cuBLASLt would read the same bytes; the GPU's half is tests/test_gpu_forms.py."""

import itertools

import numpy as np
import pytest

from core.description.gemm_form import GemmForm, cublas_gemm
from worker.gpu import cublaslt

LAYOUTS = list(itertools.product(["row", "column"], repeat=3))


def stored(matrix: np.ndarray, layout: str) -> np.ndarray:
    """The matrix's memory, packed, as a kernel of that layout gets it."""
    return matrix.ravel(order="C" if layout == "row" else "F")


def read_column_major(memory: np.ndarray, rows: int, cols: int, ld: int) -> np.ndarray:
    assert ld >= rows and memory.size >= ld * (cols - 1) + rows, (rows, cols, ld, memory.size)
    return np.stack([memory[j * ld:j * ld + rows] for j in range(cols)], axis=1)


def as_cublaslt_computes(form: GemmForm, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (m, k), n = a.shape, b.shape[1]
    plan = cublas_gemm(form, m, n, k)
    memory = {"A": stored(a, form.a), "B": stored(b, form.b)}
    first, second, c = cublaslt.stored_layouts(plan)
    x = read_column_major(memory[plan.first], *first)
    y = read_column_major(memory[plan.second], *second)
    product = (x if plan.transa == "N" else x.T) @ (y if plan.transb == "N" else y.T)
    rows, cols, ld = c
    assert product.shape == (rows, cols) and ld == rows
    c_memory = product.ravel(order="F")  # cuBLAS writes C column-major, packed
    return c_memory.reshape((m, n), order="C" if form.c == "row" else "F")


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda t: "".join(x[0] for x in t))
@pytest.mark.parametrize("size", [(7, 5, 3), (1, 9, 4), (6, 1, 11), (13, 17, 1)])
def test_every_form_reads_and_writes_its_operands_where_they_lie(layouts, size):
    m, n, k = size
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a, b = rng.integers(-4, 5, (m, k)).astype(np.float64), rng.integers(-4, 5, (k, n)).astype(np.float64)
    form = GemmForm(*layouts)
    np.testing.assert_array_equal(as_cublaslt_computes(form, a, b), a @ b)


def test_every_form_of_one_matrix_is_offered_candidates_and_a_batch_is_not():
    for layouts in LAYOUTS:
        for accumulate in ("fp32", "fp16"):
            assert cublaslt.offers_candidates(GemmForm(*layouts, accumulate=accumulate), 1)
    assert not cublaslt.offers_candidates(GemmForm(), 3)
