"""cuBLAS in FP16 and BF16: cublasGemmEx through CuPy's binding, FP32 compute and FP32 alpha/beta.

CuPy has no bfloat16 dtype, so cupy.matmul cannot multiply BF16; cublasGemmEx takes the matrices
by pointer and type, which serves both. With CUBLAS_COMPUTE_32F and CUBLAS_GEMM_DEFAULT it is the
call torch.matmul makes: on the H100 its outputs were bit for bit torch's and its cold medians
within 0.2 % at 4096^3 and 8192^3 (docs/BENCHMARKS.md, scripts/studies/half_cublas_vs_torch.py).
"""

import numpy as np

from core.description.precision import Precision

CUDA_TYPE = {"float32": 0, "float16": 2, "bfloat16": 14}  # CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_OP_N = 0


def describe(precision: Precision) -> str:
    d = precision.describe()
    return (f"cublasGemmEx, A and B {d['input']}, C {d['output']}, CUBLAS_COMPUTE_32F (FP32 accumulate), "
            "CUBLAS_GEMM_DEFAULT")


def call(cp, a, b, out, precision: Precision):
    """C = A B for row-major A (M x K), B (K x N), C (M x N). cuBLAS is column-major, and a
    row-major matrix is its transpose in column-major, so this computes C^T = B^T A^T: cuBLAS's
    A is our B (N x K, leading dimension N), its B our A (K x M, leading dimension K)."""
    from cupy_backends.cuda.libs import cublas  # CuPy is optional (gemmwatch[gpu]): imported on a GPU only

    m, k = a.shape
    n = b.shape[1]
    in_type, out_type = CUDA_TYPE[precision.input_type], CUDA_TYPE[precision.output_type]
    # Host scalars (cuBLAS's default pointer mode), kept alive as long as the call.
    alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
    handle = cp.cuda.device.get_cublas_handle()

    def run():
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)  # CuPy sets it per call of its own only
        cublas.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, alpha.ctypes.data, b.data.ptr, in_type, n,
                      a.data.ptr, in_type, k, beta.ctypes.data, out.data.ptr, out_type, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT)

    return run
