"""cuBLAS in FP8: cublasLtMatmul over E4M3 A and B with a per-tensor scale each, FP32 compute,
C in BF16 (or FP32), through ctypes on the libcublasLt that CuPy loads.

Neither CuPy nor its cuBLAS binding has an FP8 type or cuBLASLt, and nvmath-python takes FP8
matrices only as torch tensors; cuBLASLt's C API is small enough to call directly for the one
GEMM a baseline needs. Two rules of cuBLASLt's FP8 GEMM shape the call:
  - both operands K-major ("TN"): for row-major C = A B, cuBLAS (column-major) computes
    C^T = B^T A^T, so its first operand is B^T, which must be stored with K contiguous: the call
    gets its own transposed copy of B (N x K), made once when the call is built;
  - A's and B's leading dimensions a multiple of 16 bytes, and C's: where K or N is not a
    multiple of 16, the call multiplies copies of A and B padded with zeros to the next multiple
    (zeros add nothing to the product) into a padded C of its own. It then does up to 15 columns
    more work than M x N x K; at the sizes FP8 is timed at (multiples of 128) it pads nothing.
The scales reach cuBLASLt by device pointer (CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER), and the
algorithm is cuBLASLt's first heuristic choice for the shape with a 32 MiB workspace; what was
chosen is the call's `plan`, recorded in the result (env.cublas_plan).
"""

import ctypes
import ctypes.util
import functools
import glob
import os

from core.precision import Precision

CUDA_R_32F, CUDA_R_16BF, CUDA_R_8F_E4M3 = 0, 14, 28
OUTPUT_TYPE = {"bfloat16": CUDA_R_16BF, "float32": CUDA_R_32F}
CUBLAS_COMPUTE_32F = 68
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
# cublasLtMatmulDescAttributes_t
DESC_TRANSA, DESC_TRANSB, DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER = 3, 4, 17, 18
PREF_MAX_WORKSPACE_BYTES = 1
ALGO_CONFIG_ID, ALGO_CONFIG_TILE_ID, ALGO_CONFIG_SPLITK_NUM, ALGO_CONFIG_STAGES_ID = 0, 1, 2, 6
WORKSPACE_BYTES = 32 * 1024 * 1024


class Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class HeuristicResult(ctypes.Structure):
    _fields_ = [("algo", Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class CublasLtError(RuntimeError):
    pass


def describe(precision: Precision) -> str:
    d = precision.describe()
    return (f"cublasLtMatmul, A and B {d['input']} (per-tensor scales {d['scale_a']:g}, {d['scale_b']:g}), "
            f"C {d['output']}, CUBLAS_COMPUTE_32F (FP32 accumulate), cuBLASLt's first heuristic algorithm")


@functools.cache
def library() -> ctypes.CDLL:
    """libcublasLt: the one beside a libcublas already loaded into the process (the CUDA
    toolkit's, or the nvidia-cublas wheel's), else the loader's. CuPy loads libcublas only when it
    first needs it, so the first FP8 case of a process may find none loaded and take the loader's
    (as on the H100 image, where the loader knows the toolkit's)."""
    import cupy  # noqa: F401  (loads libcublas; CuPy is optional, gemmwatch[gpu]: imported only on a GPU)

    for lib_dir in _cuda_library_dirs():
        found = sorted(glob.glob(os.path.join(lib_dir, "libcublasLt.so*")))
        if found:
            return ctypes.CDLL(found[0])
    name = ctypes.util.find_library("cublasLt")
    if name is None:
        raise CublasLtError("libcublasLt not found: FP8's cuBLAS baseline needs cuBLASLt")
    return ctypes.CDLL(name)


def _cuda_library_dirs() -> list[str]:
    dirs = []
    with open("/proc/self/maps") as maps:  # where the loaded libcublas lies
        for line in maps:
            path = line.split()[-1]
            if "libcublas.so" in path and os.path.isabs(path):
                dirs.append(os.path.dirname(path))
    return dirs


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CublasLtError(f"{what} failed with cublasStatus_t {status}")


@functools.cache
def _handle() -> ctypes.c_void_p:
    handle = ctypes.c_void_p()
    _check(library().cublasLtCreate(ctypes.byref(handle)), "cublasLtCreate")
    return handle


def _set(setter, obj, attribute: int, value) -> None:
    _check(setter(obj, attribute, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))),
           f"{setter.__name__}({attribute})")


def _layout(kind: int, rows: int, cols: int, ld: int) -> ctypes.c_void_p:
    layout = ctypes.c_void_p()
    _check(library().cublasLtMatrixLayoutCreate(ctypes.byref(layout), kind, ctypes.c_uint64(rows),
                                                ctypes.c_uint64(cols), ctypes.c_int64(ld)), "cublasLtMatrixLayoutCreate")
    return layout


class Fp8Gemm:
    """C = scale_A scale_B (A B) for row-major E4M3 A (M x K) and B (K x N) held as uint8, into a
    row-major C of the precision's output type, on the current stream when called."""

    def __init__(self, cp, a, b, out, precision: Precision):
        lt = library()
        m, k = a.shape
        n = b.shape[1]
        kp, np_ = -(-k // 16) * 16, -(-n // 16) * 16
        self.cp, self.a, self.out = cp, a, out
        if kp != k:  # E4M3 zero is the byte 0
            self.a = cp.zeros((m, kp), dtype=cp.uint8)
            self.a[:, :k] = a
        # N x K, K contiguous: cuBLASLt's FP8 operands are K-major
        self.b_t = cp.zeros((np_, kp), dtype=cp.uint8)
        self.b_t[:n, :k] = b.T
        if np_ != n:
            self.out = cp.empty((m, np_), dtype=out.dtype)
        padded = (np_, kp) != (n, k)
        n, k = np_, kp
        # One allocation each: cuBLASLt refuses (NOT_SUPPORTED) a scale 4 bytes into another's.
        self.scale_a, self.scale_b = (cp.full(1, precision.tensor_scale, dtype=cp.float32) for _ in range(2))
        self.alpha, self.beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        out_type = OUTPUT_TYPE[precision.output_type]

        self.desc = ctypes.c_void_p()
        _check(lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate")
        setter = lt.cublasLtMatmulDescSetAttribute
        _set(setter, self.desc, DESC_TRANSA, ctypes.c_int32(CUBLAS_OP_T))
        _set(setter, self.desc, DESC_TRANSB, ctypes.c_int32(CUBLAS_OP_N))
        # cuBLAS's A is our B, its B our A.
        _set(setter, self.desc, DESC_A_SCALE_POINTER, ctypes.c_void_p(self.scale_b.data.ptr))
        _set(setter, self.desc, DESC_B_SCALE_POINTER, ctypes.c_void_p(self.scale_a.data.ptr))
        # Column-major, as cuBLAS sees them: its A is B^T stored K x N (ld K), taken transposed;
        # its B is our A, K x M (ld K); C and D are our C, N x M (ld N).
        self.a_desc = _layout(CUDA_R_8F_E4M3, k, n, k)
        self.b_desc = _layout(CUDA_R_8F_E4M3, k, m, k)
        self.c_desc = _layout(out_type, n, m, n)

        preference = ctypes.c_void_p()
        _check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)), "cublasLtMatmulPreferenceCreate")
        _set(lt.cublasLtMatmulPreferenceSetAttribute, preference, PREF_MAX_WORKSPACE_BYTES,
             ctypes.c_uint64(WORKSPACE_BYTES))
        result, found = HeuristicResult(), ctypes.c_int(0)
        status = lt.cublasLtMatmulAlgoGetHeuristic(_handle(), self.desc, self.a_desc, self.b_desc, self.c_desc,
                                                   self.c_desc, preference, 1, ctypes.byref(result), ctypes.byref(found))
        lt.cublasLtMatmulPreferenceDestroy(preference)
        if status != 0 or found.value == 0:
            raise CublasLtError(f"cuBLASLt has no FP8 GEMM for {m}x{n}x{k} here (cublasStatus_t {status}, "
                                f"{found.value} algorithms)")
        self.algo = result.algo
        self.plan = {"call": "cublasLtMatmul", "compute_type": "CUBLAS_COMPUTE_32F", "scale_type": "CUDA_R_32F",
                     "a_b_type": "CUDA_R_8F_E4M3", "c_type": {CUDA_R_16BF: "CUDA_R_16BF", CUDA_R_32F: "CUDA_R_32F"}[out_type],
                     "trans": "TN", "algo": self._algo_config(), "waves": round(result.wavesCount, 3),
                     "workspace_bytes": result.workspaceSize, **({"padded_n_k": [n, k]} if padded else {})}

    def _algo_config(self) -> dict:
        got = {}
        for name, attribute in (("id", ALGO_CONFIG_ID), ("tile_id", ALGO_CONFIG_TILE_ID),
                                ("splitk", ALGO_CONFIG_SPLITK_NUM), ("stages_id", ALGO_CONFIG_STAGES_ID)):
            value, written = ctypes.c_int32(0), ctypes.c_size_t(0)
            status = library().cublasLtMatmulAlgoConfigGetAttribute(
                ctypes.byref(self.algo), attribute, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value)),
                ctypes.byref(written))
            if status == 0:
                got[name] = value.value
        return got

    def __del__(self) -> None:
        lt = library()
        for layout in (getattr(self, name, None) for name in ("a_desc", "b_desc", "c_desc")):
            if layout:
                lt.cublasLtMatrixLayoutDestroy(layout)
        if getattr(self, "desc", None):
            lt.cublasLtMatmulDescDestroy(self.desc)

    def __call__(self) -> None:
        out = self.out.data.ptr
        _check(library().cublasLtMatmul(
            _handle(), self.desc, ctypes.byref(self.alpha), ctypes.c_void_p(self.b_t.data.ptr), self.a_desc,
            ctypes.c_void_p(self.a.data.ptr), self.b_desc, ctypes.byref(self.beta), ctypes.c_void_p(out), self.c_desc,
            ctypes.c_void_p(out), self.c_desc, ctypes.byref(self.algo), ctypes.c_void_p(self.workspace.data.ptr),
            ctypes.c_size_t(WORKSPACE_BYTES), ctypes.c_void_p(self.cp.cuda.get_current_stream().ptr)), "cublasLtMatmul")


def call(cp, a, b, out, precision: Precision) -> Fp8Gemm:
    return Fp8Gemm(cp, a, b, out, precision)
