"""A matrix handed to a launcher that takes `torch::Tensor` (LeetCUDA's `sgemm(a, b, c)`, most
torch.utils.cpp_extension repositories): the record gemmwatch's stand-in for torch reads
(worker/compile/torch_stand_in/gemmwatch/torch_stand_in.h, `TensorRecord`, field for field).

The record holds what PyTorch's tensor would tell the launcher: the data's address, the sizes and
strides in elements as the form lays the matrix out (B column-major is a (K, N) tensor with strides
(1, K), as `randn(N, K).T` is), the element type by PyTorch's own numbering, and the device. A
batch is a leading dimension. A launcher that makes C (`torch::empty({M, N}, a.options())`, then
`return c;`) gets the case's C from that call: its inputs' records point to C's.
"""

import ctypes
from dataclasses import dataclass

from core.description.description_fields import names_no_c
from core.description.gemm_form import SHAPE

MAX_DIMS = 4

# c10::ScalarType's numbers (the stand-in's enum, PyTorch's own), by gemmwatch's storage type.
SCALAR_TYPES = {"float32": 6, "float64": 7, "float16": 5, "bfloat16": 15, "float8_e4m3": 24, "float8_e5m2": 23}


class TensorRecord(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dim", ctypes.c_int64), ("sizes", ctypes.c_int64 * MAX_DIMS),
                ("strides", ctypes.c_int64 * MAX_DIMS), ("scalar_type", ctypes.c_int32),
                ("device_index", ctypes.c_int32),
                # For a launcher that makes C itself: C's record, which its torch::empty of C's sizes
                # and dtype returns (the stand-in reads it through the options of an input tensor).
                ("output", ctypes.c_void_p)]


def returns_c(arg_plan) -> bool:
    """Whether the launcher makes C itself: it takes tensors, and none of its parameters is C."""
    return (any(how in ("tensor", "&tensor") for _role, how in arg_plan.passing)
            and names_no_c(role for role, _how in arg_plan.passing))


@dataclass(frozen=True)
class MatrixView:
    """A matrix of one call as a tensor: sizes and strides in elements, and its element type."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    storage: str  # gemmwatch's storage type: float32, bfloat16, ...


def view(form, matrix: str, m: int, n: int, k: int, batch: int, storage: str) -> MatrixView:
    """The packed matrix `matrix` ("A", "B" or "C") as the form lays it out."""
    rows, cols = (dict(M=m, N=n, K=k)[d] for d in SHAPE[matrix])
    strides = (cols, 1) if form.layout(matrix) == "row" else (1, rows)
    if batch > 1:
        return MatrixView((batch, rows, cols), (rows * cols, *strides), storage)
    return MatrixView((rows, cols), strides, storage)


def record(address: int, matrix: MatrixView, device_index: int = 0) -> TensorRecord:
    rec = TensorRecord(data=address, dim=len(matrix.sizes), scalar_type=SCALAR_TYPES[matrix.storage],
                       device_index=device_index)
    for i, (size, stride) in enumerate(zip(matrix.sizes, matrix.strides)):
        rec.sizes[i], rec.strides[i] = size, stride
    return rec
