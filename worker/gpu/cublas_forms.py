"""cuBLAS in a kernel's own form: each operand in its layout, FP16 sums where the kernel sums in
FP16, a strided batch in one call.

One cublasGemmEx (cublasGemmStridedBatchedEx for a batch) through CuPy's binding, with the
transposes and leading dimensions core/description/gemm_form.py derives (`cublas_gemm`). The compute type is
the kernel's: CUBLAS_COMPUTE_32F for FP32 inputs and for FP16/BF16 with FP32 sums (TF32 off, as
cuBLAS's default math mode leaves it), CUBLAS_COMPUTE_32F_FAST_TF32 for tf32, CUBLAS_COMPUTE_16F
for FP16 sums, whose alpha and beta cuBLAS then reads as __half. The runner checks this call's C
against the reference before it times anything beside it (worker/measure/runner.py).
"""

import numpy as np

from core.description.gemm_form import GemmForm, cublas_gemm
from core.description.precision import Precision

CUDA_TYPE = {"float32": 0, "float16": 2, "bfloat16": 14}  # CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
CUBLAS_COMPUTE_16F = 64
CUBLAS_COMPUTE_32F = 68
CUBLAS_COMPUTE_32F_FAST_TF32 = 77
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP = {"N": 0, "T": 1}


def compute_type(precision: Precision) -> int:
    if precision.baseline_fp16_sums:
        return CUBLAS_COMPUTE_16F
    return CUBLAS_COMPUTE_32F_FAST_TF32 if precision.compute_mode == "tf32" else CUBLAS_COMPUTE_32F


def describe(precision: Precision) -> str:
    names = {CUBLAS_COMPUTE_16F: "CUBLAS_COMPUTE_16F (FP16 accumulate, __half alpha and beta)",
             CUBLAS_COMPUTE_32F: "CUBLAS_COMPUTE_32F", CUBLAS_COMPUTE_32F_FAST_TF32: "CUBLAS_COMPUTE_32F_FAST_TF32"}
    d = precision.describe()
    return (f"cublasGemmEx / cublasGemmStridedBatchedEx in the kernel's form, A and B {d['input']}, C {d['output']}, "
            f"{names[compute_type(precision)]}, CUBLAS_GEMM_DEFAULT")


def call(cp, a, b, out, precision: Precision, form: GemmForm, batch: int):
    """C = A·B over the form's layouts, as one cuBLAS call; a, b, out as the runner lays them out
    (a batch: shape (batch, rows, cols), each matrix packed)."""
    if precision.fp8:
        raise ValueError("cuBLAS in another form than the default is not made for fp8 (cuBLASLt's FP8 call)")
    from cupy_backends.cuda.libs import cublas  # CuPy is optional (gemmwatch[gpu]): imported on a GPU only

    m, k = a.shape[-2:]
    n = b.shape[-1]
    plan = cublas_gemm(form, m, n, k)
    operands = {"A": a, "B": b}
    first, second = operands[plan.first], operands[plan.second]
    in_type, out_type = CUDA_TYPE[precision.input_type], CUDA_TYPE[precision.output_type]
    computing = compute_type(precision)
    scalar = np.float16 if computing == CUBLAS_COMPUTE_16F else np.float32
    # Host scalars (cuBLAS's default pointer mode) of the compute type, kept alive as long as the call.
    alpha, beta = np.ones(1, scalar), np.zeros(1, scalar)
    handle = cp.cuda.device.get_cublas_handle()
    transa, transb = CUBLAS_OP[plan.transa], CUBLAS_OP[plan.transb]

    def run():
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)  # CuPy sets it per call of its own only
        if batch == 1:
            cublas.gemmEx(handle, transa, transb, plan.m, plan.n, plan.k, alpha.ctypes.data, first.data.ptr, in_type,
                          plan.lda, second.data.ptr, in_type, plan.ldb, beta.ctypes.data, out.data.ptr, out_type,
                          plan.ldc, computing, CUBLAS_GEMM_DEFAULT)
        else:
            cublas.gemmStridedBatchedEx(
                handle, transa, transb, plan.m, plan.n, plan.k, alpha.ctypes.data, first.data.ptr, in_type, plan.lda,
                plan.stride_first, second.data.ptr, in_type, plan.ldb, plan.stride_second, beta.ctypes.data,
                out.data.ptr, out_type, plan.ldc, plan.stride_c, batch, computing, CUBLAS_GEMM_DEFAULT)

    run.keep = (alpha, beta)
    return run
