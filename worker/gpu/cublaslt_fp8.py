"""cuBLAS in FP8: cublasLtMatmul over E4M3 A and B with a per-tensor scale each, FP32 compute,
C in BF16 (or FP32 or FP16), through ctypes (worker/gpu/cublaslt.py: the library, layouts, candidates).

Neither CuPy nor its cuBLAS binding has an FP8 type or cuBLASLt, and nvmath-python takes FP8
matrices only as torch tensors; cuBLASLt's C API is small enough to call directly for the one
GEMM a baseline needs. Two rules of cuBLASLt's FP8 GEMM shape the call:
  - both operands K-major ("TN"): for row-major C = A B, cuBLAS (column-major) computes
    C^T = B^T A^T, so its first operand is B^T, which must be stored with K contiguous: for a
    row-major B the call gets its own transposed copy (N x K), made once when the call is built;
    a column-major B (an FP8 kernel in the TN form, core/description/gemm_form.py) is read as it lies;
  - A's and B's leading dimensions a multiple of 16 bytes, and C's: where K or N is not a
    multiple of 16, the call multiplies copies of A and B padded with zeros to the next multiple
    (zeros add nothing to the product) into a padded C of its own (`c`: its first N columns). It
    then does up to 15 columns more work than M x N x K; at the sizes FP8 is timed at (multiples
    of 128) it pads nothing.
The scales reach cuBLASLt by device pointer (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER). Block scales
(DeepSeek-V3's 1x128 and 128x128, core/description/precision.py) go with their scale modes
(CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE, cuBLASLt 12.9 on, Hopper), each array copied once into the
layout cuBLASLt reads (worker/arguments/block_scales.py); for them M is padded to a multiple of 4
and K to one of 512 (a multiple of 4 K-slabs), so that the scales' rows lie 16 bytes apart, as they
were seen to be read. The
algorithm is cuBLASLt's first heuristic choice for the shape with a 32 MiB workspace, or the
candidate `use` picks (worker/measure/cublas_best.py); what runs is the call's `plan`, recorded in the
result (env.cublas_plan).
"""

import ctypes

from core.description.precision import BLOCK_SCALES, SCALE_BLOCK, Precision
from worker.arguments import block_scales
from worker.gpu.cublaslt import (CUBLAS_COMPUTE_32F, CUBLAS_OP_N, CUBLAS_OP_T, CUDA_R_8F_E4M3, CUDA_R_32F, CUDA_TYPE,
                             DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER, DESC_TRANSA, DESC_TRANSB, TYPE_NAME,
                             WORKSPACE_BYTES, CublasLtError, LtCall, candidates, check, layout, library,
                             set_attribute)

# cublasLtMatmulDescAttributes_t and cublasLtMatmulMatrixScale_t (cublasLt.h, CUDA 12.9 on)
DESC_A_SCALE_MODE, DESC_B_SCALE_MODE = 31, 32
SCALE_MODE = {1: 4, SCALE_BLOCK: 5}  # by a block's rows: VEC128_32F (1x128), BLK128x128_32F (128x128)
SCALE_MODE_NAME = {4: "CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F", 5: "CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F"}


def describe(precision: Precision) -> str:
    d = precision.describe()
    if precision.block_scaled:
        a_block, b_block = BLOCK_SCALES[precision.scales]
        modes = ", ".join(f"{x} {d['scales'][x]} ({SCALE_MODE_NAME[SCALE_MODE[block[0]]].rpartition('SCALE_')[2]})"
                          for x, block in (("A", a_block), ("B", b_block)))
        return (f"cublasLtMatmul, A and B {d['input']} (block scales: {modes}), C {d['output']}, CUBLAS_COMPUTE_32F "
                "(FP32 accumulate), cuBLASLt's first heuristic algorithm")
    return (f"cublasLtMatmul, A and B {d['input']} (per-tensor scales {d['scale_a']:g}, {d['scale_b']:g}), "
            f"C {d['output']}, CUBLAS_COMPUTE_32F (FP32 accumulate), cuBLASLt's first heuristic algorithm")


class Fp8Gemm(LtCall):
    """C = scale_A scale_B (A B) for E4M3 A (M x K, row-major) and B (K x N, row- or column-major)
    held as uint8, into a row-major C of the precision's output type, on the current stream when called."""

    def __init__(self, cp, a, b, out, precision: Precision, count: int = 1, scales: dict | None = None):
        lt = library()
        m, k = a.shape
        n = b.shape[1]
        blocks = precision.block_scaled
        k_step = 4 * SCALE_BLOCK if blocks else 16  # block scales: a multiple of 4 K-slabs
        kp, np_ = -(-k // k_step) * k_step, -(-n // 16) * 16
        mp = -(-m // 4) * 4 if blocks else m
        self.cp, self.a, self.out, self.m = cp, a, out, m
        if (mp, kp) != (m, k):  # E4M3 zero is the byte 0
            self.a = cp.zeros((mp, kp), dtype=cp.uint8)
            self.a[:m, :k] = a
        # N x K, K contiguous: cuBLASLt's FP8 operands are K-major. A column-major B (the TN form)
        # already is, and is read where it lies unless it must be padded.
        if b.flags.f_contiguous and (np_, kp) == (n, k):
            self.b_t = b.T
        else:
            self.b_t = cp.zeros((np_, kp), dtype=cp.uint8)
            self.b_t[:n, :k] = b.T
        self.first = self.b_t  # cuBLAS's first operand
        self.n = n
        if (mp, np_) != (m, n):
            self.out = cp.empty((mp, np_), dtype=out.dtype)
        padded = (mp, np_, kp) != (m, n, k)
        m, n, k = mp, np_, kp
        if blocks:  # each operand's scales as cuBLASLt reads them, padded with 1s (worker/arguments/block_scales.py)
            a_block, b_block = BLOCK_SCALES[precision.scales]
            self.scale_a = block_scales.for_cublaslt(cp, scales["scale_A"], a_block, m, k // SCALE_BLOCK)
            self.scale_b = block_scales.for_cublaslt(cp, scales["scale_B"], b_block, n, k // SCALE_BLOCK)
        else:  # one allocation each: cuBLASLt refuses (NOT_SUPPORTED) a scale 4 bytes into another's
            self.scale_a, self.scale_b = (cp.full(1, precision.tensor_scale, dtype=cp.float32) for _ in range(2))
        self.alpha, self.beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        out_type = CUDA_TYPE[precision.output_type]  # cuBLASLt's FP8 GEMM writes BF16, FP16 or FP32

        self.desc = ctypes.c_void_p()
        check(lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), CUBLAS_COMPUTE_32F, CUDA_R_32F),
              "cublasLtMatmulDescCreate")
        setter = lt.cublasLtMatmulDescSetAttribute
        set_attribute(setter, self.desc, DESC_TRANSA, ctypes.c_int32(CUBLAS_OP_T))
        set_attribute(setter, self.desc, DESC_TRANSB, ctypes.c_int32(CUBLAS_OP_N))
        # cuBLAS's A is our B, its B our A.
        set_attribute(setter, self.desc, DESC_A_SCALE_POINTER, ctypes.c_void_p(self.scale_b.data.ptr))
        set_attribute(setter, self.desc, DESC_B_SCALE_POINTER, ctypes.c_void_p(self.scale_a.data.ptr))
        modes = {}
        if blocks:
            modes = {"a_scale_mode": SCALE_MODE[b_block[0]], "b_scale_mode": SCALE_MODE[a_block[0]]}
            set_attribute(setter, self.desc, DESC_A_SCALE_MODE, ctypes.c_int32(modes["a_scale_mode"]))
            set_attribute(setter, self.desc, DESC_B_SCALE_MODE, ctypes.c_int32(modes["b_scale_mode"]))
        # Column-major, as cuBLAS sees them: its A is B^T stored K x N (ld K), taken transposed;
        # its B is our A, K x M (ld K); C and D are our C, N x M (ld N).
        self.a_desc = layout(CUDA_R_8F_E4M3, k, n, k)
        self.b_desc = layout(CUDA_R_8F_E4M3, k, m, k)
        self.c_desc = layout(out_type, n, m, n)
        self.candidates = candidates(self.desc, self.a_desc, self.b_desc, self.c_desc, count)
        if not self.candidates:
            raise CublasLtError(f"cuBLASLt has no FP8 GEMM for {m}x{n}x{k} here")
        self.plan_base = {"call": "cublasLtMatmul", "compute_type": "CUBLAS_COMPUTE_32F", "scale_type": "CUDA_R_32F",
                          "a_b_type": "CUDA_R_8F_E4M3", "c_type": TYPE_NAME[out_type], "trans": "TN",
                          **{name: SCALE_MODE_NAME[mode] for name, mode in modes.items()},
                          **({"padded_m_n_k" if blocks else "padded_n_k": [m, n, k] if blocks else [n, k]}
                             if padded else {})}
        self.use(0)

    @property
    def c(self):
        return self.out[:self.m, :self.n]


def call(cp, a, b, out, precision: Precision, count: int = 1, scales: dict | None = None) -> Fp8Gemm:
    return Fp8Gemm(cp, a, b, out, precision, count, scales)
