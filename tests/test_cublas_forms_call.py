"""Issue 51: cuBLAS's call in a kernel's form, checked on the CPU. worker/gpu/cublas_forms.py is run over a
stand-in for CuPy's cuBLAS binding that records each call; the recorded call is then carried out as
cuBLAS defines it (column-major, each operand through its transpose and leading dimension, alpha
read in the compute type's own scalar type) over the operands' memory, and must give the form's
product. A swapped transpose, swapped leading dimensions, or FP32 scalars under FP16 compute (which
cuBLAS reads as a __half 0) each give another C here, as they would on a GPU."""

import ctypes
import itertools
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

from core.description.gemm_form import GemmForm
from core.description.precision import Precision
from tests.fake_gpu import CpuRunner, cublas_as_called
from worker.gpu import cublas_forms
from worker.measure.cases import Case
from worker.measure.problem import Problem


class OnDevice:
    """A matrix as the call sees it: its shape, and a device pointer (here a key)."""

    def __init__(self, x):
        self.x, self.shape = x, x.shape
        self.data = SimpleNamespace(ptr=id(self))


@pytest.fixture
def recorded(monkeypatch):
    calls = []
    binding = types.ModuleType("cupy_backends.cuda.libs.cublas")
    binding.setStream = lambda handle, stream: None
    binding.gemmEx = lambda *args: calls.append(("gemmEx", args))
    binding.gemmStridedBatchedEx = lambda *args: calls.append(("gemmStridedBatchedEx", args))
    for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cublas", binding)
    monkeypatch.setattr(sys.modules["cupy_backends.cuda.libs"], "cublas", binding, raising=False)
    return calls


FAKE_CP = SimpleNamespace(cuda=SimpleNamespace(device=SimpleNamespace(get_cublas_handle=lambda: 7),
                                               get_current_stream=lambda: SimpleNamespace(ptr=0)))


def scalar(address: int, compute: int) -> float:
    """A host scalar as cuBLAS reads it: a __half under CUBLAS_COMPUTE_16F, else a float."""
    kind = ctypes.c_uint16 if compute == cublas_forms.CUBLAS_COMPUTE_16F else ctypes.c_float
    raw = kind.from_address(address).value
    return float(np.array([raw], dtype=np.uint16).view(np.float16)[0]) if kind is ctypes.c_uint16 else raw


def carried_out(call, arrays: dict, form: GemmForm, m: int, n: int, batch: int):
    """C (M x N, or batch of them) as cuBLAS computes it from the recorded arguments."""
    name, args = call
    if name == "gemmEx":
        (_h, ta, tb, cm, cn, ck, alpha, pa, _at, lda, pb, _bt, ldb, beta, pc, _ct, ldc, compute, _algo) = args
        sa = sb = sc = 0
    else:
        (_h, ta, tb, cm, cn, ck, alpha, pa, _at, lda, sa, pb, _bt, ldb, sb, beta, pc, _ct, ldc, sc, _b, compute,
         _algo) = args
    assert pc == arrays["C"].data.ptr and scalar(beta, compute) == 0.0
    by_pointer = {v.data.ptr: v.x for v in arrays.values()}
    plan = SimpleNamespace(first="first", second="second", transa="NT"[ta], transb="NT"[tb], m=cm, n=cn, k=ck,
                           lda=lda, ldb=ldb, ldc=ldc, stride_first=sa, stride_second=sb, stride_c=sc or cm * cn)
    c = cublas_as_called(plan, {"first": by_pointer[pa], "second": by_pointer[pb]}, form.c, m, n, batch)
    return scalar(alpha, compute) * c


LAYOUTS = [dict(zip("ABC", combo)) for combo in itertools.product(("row", "column"), repeat=3)]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda d: "".join(v[0] for v in d.values()))
@pytest.mark.parametrize("precision,batch", [("fp32", 1), ("fp16", 1), ("fp16_acc16", 1), ("fp16_acc16_c32", 1),
                                             ("fp32", 3)])
def test_the_call_gives_the_forms_product(recorded, layout, precision, batch):
    m, n, k = 7, 5, 6
    accumulate = "fp16" if precision.startswith("fp16_acc16") else "fp32"
    p = Precision("fp16" if precision.startswith("fp16") else "fp32", accumulate=accumulate,
                  output="fp32" if precision.endswith("c32") else "input")
    form = GemmForm(a=layout["A"], b=layout["B"], c=layout["C"], accumulate=accumulate)
    problem = Problem(CpuRunner().device, Case(0, "x", m, n, k, seed=5, kernel=None, batch=batch), form, p)
    arrays = {"A": OnDevice(problem.a_in), "B": OnDevice(problem.b_in), "C": OnDevice(problem.new_c())}
    run = cublas_forms.call(FAKE_CP, arrays["A"], arrays["B"], arrays["C"], p, form, batch)
    run()
    assert len(recorded) == 1 and recorded[0][0] == ("gemmEx" if batch == 1 else "gemmStridedBatchedEx")
    assert recorded[0][1][-2] == cublas_forms.compute_type(p)
    got = carried_out(recorded[0], arrays, form, m, n, batch)
    np.testing.assert_allclose(got, problem.a.astype(np.float64) @ problem.b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_fp16_sums_into_an_fp32_c_are_timed_beside_fp32_compute():
    """CUBLAS_COMPUTE_16F writes an FP16 C only, so a kernel of FP16 sums writing FP32 is timed beside
    cuBLAS's FP32 compute (the one GEMM writing FP32 from FP16 inputs), with float alpha and beta;
    an FP16 C keeps FP16 compute and __half scalars."""
    c32 = Precision("fp16", output="fp32", accumulate="fp16")
    assert cublas_forms.compute_type(c32) == cublas_forms.CUBLAS_COMPUTE_32F
    assert "CUBLAS_COMPUTE_32F" in cublas_forms.describe(c32) and "16F" not in cublas_forms.describe(c32)
    assert cublas_forms.compute_type(Precision("fp16", accumulate="fp16")) == cublas_forms.CUBLAS_COMPUTE_16F
