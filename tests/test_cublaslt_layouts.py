"""cuBLASLt's operands for every form and a strided batch (worker/gpu/cublaslt.py's `stored_layouts`
over core/description/gemm_form.py's `cublas_gemm`): each operand's memory, read column-major as the
layouts say, at the plan's batch strides, and transposed as the plan says, multiplies into C's
memory in C's own layout. Run
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
    """a (batch, M, K) and b (batch, K, N), each matrix packed in its layout one after the other;
    C as cuBLASLt leaves it, matrix by matrix, read back in C's layout."""
    batch, m, k = a.shape
    n = b.shape[2]
    plan = cublas_gemm(form, m, n, k)
    memory = {"A": np.concatenate([stored(x, form.a) for x in a]), "B": np.concatenate([stored(x, form.b) for x in b])}
    first, second, c = cublaslt.stored_layouts(plan)
    rows, cols, ld, c_stride = c
    assert ld == rows and c_stride == rows * cols
    out = []
    for i in range(batch):
        x = read_column_major(memory[plan.first][i * first[3]:], *first[:3])
        y = read_column_major(memory[plan.second][i * second[3]:], *second[:3])
        product = (x if plan.transa == "N" else x.T) @ (y if plan.transb == "N" else y.T)
        assert product.shape == (rows, cols)
        c_memory = product.ravel(order="F")  # cuBLAS writes C column-major, packed
        out.append(c_memory.reshape((m, n), order="C" if form.c == "row" else "F"))
    return np.stack(out)


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda t: "".join(x[0] for x in t))
@pytest.mark.parametrize("size", [(7, 5, 3, 1), (1, 9, 4, 1), (6, 1, 11, 1), (13, 17, 1, 1), (7, 5, 3, 3), (4, 6, 9, 2)])
def test_every_form_reads_and_writes_its_operands_where_they_lie(layouts, size):
    m, n, k, batch = size
    rng = np.random.default_rng(m * 1000 + n * 100 + k * 10 + batch)
    a = rng.integers(-4, 5, (batch, m, k)).astype(np.float64)
    b = rng.integers(-4, 5, (batch, k, n)).astype(np.float64)
    form = GemmForm(*layouts)
    np.testing.assert_array_equal(as_cublaslt_computes(form, a, b), a @ b)
