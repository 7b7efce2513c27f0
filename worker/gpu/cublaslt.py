"""cuBLASLt through ctypes, on the libcublasLt that CuPy loads: the library and its handle, a
matrix layout, the heuristic's candidate algorithms for a GEMM and each one's configuration, and
`LtGemm`, C = A B (one matrix or a strided batch) in any of a form's layouts, in FP32, TF32, FP16
or BF16 with FP32 sums (or FP16 sums), that can run any of its candidates. The FP8 baseline
(worker/gpu/cublaslt_fp8.py) and cuBLAS's best (worker/measure/cublas_best.py) are made of these.

Operands as cuBLAS (column-major) sees them: a row-major matrix is its transpose in column-major,
so a row-major C = A B is computed as C^T = B^T A^T (cuBLAS's A is our B, its B our A), and a
column-major C as C = A B; core/description/gemm_form.py's `cublas_gemm` says which, with the
transposes and leading dimensions, for cuBLAS's own calls and for these alike.
"""

import ctypes
import ctypes.util
import functools
import glob
import os

from core.description.gemm_form import CublasGemm, GemmForm, cublas_gemm
from core.description.precision import Precision
from worker.gpu.cublas_forms import (CUBLAS_COMPUTE_16F, CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_OP,
                                     compute_type)

CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF, CUDA_R_8F_E4M3 = 0, 2, 14, 28
CUDA_TYPE = {"float32": CUDA_R_32F, "float16": CUDA_R_16F, "bfloat16": CUDA_R_16BF}
TYPE_NAME = {CUDA_R_32F: "CUDA_R_32F", CUDA_R_16F: "CUDA_R_16F", CUDA_R_16BF: "CUDA_R_16BF",
             CUDA_R_8F_E4M3: "CUDA_R_8F_E4M3"}
COMPUTE_NAME = {CUBLAS_COMPUTE_16F: "CUBLAS_COMPUTE_16F", CUBLAS_COMPUTE_32F: "CUBLAS_COMPUTE_32F",
                CUBLAS_COMPUTE_32F_FAST_TF32: "CUBLAS_COMPUTE_32F_FAST_TF32"}
CUBLAS_OP_N, CUBLAS_OP_T = CUBLAS_OP["N"], CUBLAS_OP["T"]
# cublasLtMatmulDescAttributes_t
DESC_TRANSA, DESC_TRANSB, DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER = 3, 4, 17, 18
# cublasLtMatrixLayoutAttribute_t
LAYOUT_BATCH_COUNT, LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
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


@functools.cache
def library() -> ctypes.CDLL:
    """libcublasLt: the one beside a libcublas already loaded into the process (the CUDA
    toolkit's, or the nvidia-cublas wheel's), else the loader's. CuPy loads libcublas only when it
    first needs it, so the first case of a process may find none loaded and take the loader's
    (as on the H100 image, where the loader knows the toolkit's)."""
    import cupy  # noqa: F401  (loads libcublas; CuPy is optional, gemmwatch[gpu]: imported only on a GPU)

    for lib_dir in _cuda_library_dirs():
        found = sorted(glob.glob(os.path.join(lib_dir, "libcublasLt.so*")))
        if found:
            return ctypes.CDLL(found[0])
    name = ctypes.util.find_library("cublasLt")
    if name is None:
        raise CublasLtError("libcublasLt not found: the baseline needs cuBLASLt")
    return ctypes.CDLL(name)


def version() -> int:
    """cublasLtGetVersion(): a cached choice of algorithm holds for this version only."""
    lt = library()
    lt.cublasLtGetVersion.restype = ctypes.c_size_t
    return int(lt.cublasLtGetVersion())


def _cuda_library_dirs() -> list[str]:
    dirs = []
    with open("/proc/self/maps") as maps:  # where the loaded libcublas lies
        for line in maps:
            path = line.split()[-1]
            if "libcublas.so" in path and os.path.isabs(path):
                dirs.append(os.path.dirname(path))
    return dirs


def check(status: int, what: str) -> None:
    if status != 0:
        raise CublasLtError(f"{what} failed with cublasStatus_t {status}")


@functools.cache
def handle() -> ctypes.c_void_p:
    made = ctypes.c_void_p()
    check(library().cublasLtCreate(ctypes.byref(made)), "cublasLtCreate")
    return made


def set_attribute(setter, obj, attribute: int, value) -> None:
    check(setter(obj, attribute, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))),
          f"{setter.__name__}({attribute})")


def layout(kind: int, rows: int, cols: int, ld: int) -> ctypes.c_void_p:
    made = ctypes.c_void_p()
    check(library().cublasLtMatrixLayoutCreate(ctypes.byref(made), kind, ctypes.c_uint64(rows),
                                               ctypes.c_uint64(cols), ctypes.c_int64(ld)), "cublasLtMatrixLayoutCreate")
    return made


def candidates(desc, a_desc, b_desc, c_desc, count: int) -> list[HeuristicResult]:
    """cuBLASLt's heuristic list for this GEMM, best guess first, at most `count`, each fitting
    a WORKSPACE_BYTES workspace."""
    lt = library()
    preference = ctypes.c_void_p()
    check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(preference)), "cublasLtMatmulPreferenceCreate")
    set_attribute(lt.cublasLtMatmulPreferenceSetAttribute, preference, PREF_MAX_WORKSPACE_BYTES,
                  ctypes.c_uint64(WORKSPACE_BYTES))
    results, found = (HeuristicResult * count)(), ctypes.c_int(0)
    status = lt.cublasLtMatmulAlgoGetHeuristic(handle(), desc, a_desc, b_desc, c_desc, c_desc, preference, count,
                                               results, ctypes.byref(found))
    lt.cublasLtMatmulPreferenceDestroy(preference)
    if status != 0:
        raise CublasLtError(f"cublasLtMatmulAlgoGetHeuristic failed with cublasStatus_t {status}")
    return [results[i] for i in range(found.value) if results[i].state == 0]


def algo_config(algo: Algo) -> dict:
    """The algorithm's id, tile, stages and split-K, as cuBLASLt names them (its enums' values)."""
    got = {}
    for name, attribute in (("id", ALGO_CONFIG_ID), ("tile_id", ALGO_CONFIG_TILE_ID),
                            ("splitk", ALGO_CONFIG_SPLITK_NUM), ("stages_id", ALGO_CONFIG_STAGES_ID)):
        value, written = ctypes.c_int32(0), ctypes.c_size_t(0)
        status = library().cublasLtMatmulAlgoConfigGetAttribute(
            ctypes.byref(algo), attribute, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value)),
            ctypes.byref(written))
        if status == 0:
            got[name] = value.value
    return got


def stored_layouts(plan: CublasGemm) -> tuple[tuple[int, int, int, int], ...]:
    """(rows, columns, leading dimension, batch stride) of cuBLAS's A, B and C as they lie in memory,
    column-major: cuBLASLt describes each operand before its transpose, so op(A) is m x k and op(B)
    k x n; in a strided batch each matrix starts one stride after the one before."""
    first = (plan.m, plan.k) if plan.transa == "N" else (plan.k, plan.m)
    second = (plan.k, plan.n) if plan.transb == "N" else (plan.n, plan.k)
    return ((*first, plan.lda, plan.stride_first), (*second, plan.ldb, plan.stride_second),
            (plan.m, plan.n, plan.ldc, plan.stride_c))


class LtCall:
    """What every cuBLASLt GEMM here shares once its descriptor, layouts and candidates are made:
    `use(i)` runs the i-th candidate from then on (its configuration in `plan`), and a call
    multiplies on the current stream. cuBLAS's first operand is `first` (our B, or a copy of it;
    our A where C is column-major), its second `a` (our A; our B where C is column-major)."""

    candidates: list
    plan_base: dict

    @property
    def c(self):
        """The C asked for, as this call leaves it: `out`, or (FP8 at an N cuBLASLt must pad) the
        first N columns of the padded C the call writes instead."""
        return self.out

    def use(self, index: int) -> None:
        chosen = self.candidates[index]
        self.index, self.algo = index, chosen.algo
        self.plan = {**self.plan_base, "algo": algo_config(chosen.algo), "waves": round(chosen.wavesCount, 3),
                     "workspace_bytes": chosen.workspaceSize}

    def __del__(self) -> None:
        destroy(self)

    def __call__(self) -> None:
        out = self.out.data.ptr
        check(library().cublasLtMatmul(
            handle(), self.desc, ctypes.byref(self.alpha), ctypes.c_void_p(self.first.data.ptr), self.a_desc,
            ctypes.c_void_p(self.a.data.ptr), self.b_desc, ctypes.byref(self.beta), ctypes.c_void_p(out), self.c_desc,
            ctypes.c_void_p(out), self.c_desc, ctypes.byref(self.algo), ctypes.c_void_p(self.workspace.data.ptr),
            ctypes.c_size_t(WORKSPACE_BYTES), ctypes.c_void_p(self.cp.cuda.get_current_stream().ptr)), "cublasLtMatmul")


class LtGemm(LtCall):
    """C = A·B (or a strided batch of them) in the form's layouts (core/description/gemm_form.py's
    `cublas_gemm`: the same operands, transposes, leading dimensions and batch strides as the form's
    cublasGemmEx), the precision's types, FP32 sums (TF32 tensor cores where the precision is TF32)
    or FP16 sums with __half alpha and beta; on the current stream when called, with the candidate chosen by `use` (the
    heuristic's first until then)."""

    def __init__(self, cp, a, b, out, precision: Precision, form: GemmForm = GemmForm(), count: int = 8):
        lt = library()
        m, k = a.shape[-2:]
        n = b.shape[-1]
        batch = a.shape[0] if a.ndim == 3 else 1
        plan = cublas_gemm(form, m, n, k)
        operands = {"A": a, "B": b}
        self.cp, self.first, self.a, self.out = cp, operands[plan.first], operands[plan.second], out
        half_sums = precision.baseline_fp16_sums
        # __half 1 and 0 as cuBLASLt reads them where the scale type is CUDA_R_16F
        self.alpha, self.beta = (ctypes.c_uint16(0x3C00), ctypes.c_uint16(0)) if half_sums else (
            ctypes.c_float(1.0), ctypes.c_float(0.0))
        self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
        in_type, out_type = CUDA_TYPE[precision.input_type], CUDA_TYPE[precision.output_type]
        compute = compute_type(precision)
        scale = CUDA_R_16F if half_sums else CUDA_R_32F
        self.desc = ctypes.c_void_p()
        check(lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), compute, scale), "cublasLtMatmulDescCreate")
        setter = lt.cublasLtMatmulDescSetAttribute
        set_attribute(setter, self.desc, DESC_TRANSA, ctypes.c_int32(CUBLAS_OP[plan.transa]))
        set_attribute(setter, self.desc, DESC_TRANSB, ctypes.c_int32(CUBLAS_OP[plan.transb]))
        made = []
        for kind, (rows, cols, ld, stride) in zip((in_type, in_type, out_type), stored_layouts(plan)):
            made.append(layout(kind, rows, cols, ld))
            if batch > 1:  # a strided batch, each matrix packed after the one before (worker/measure/problem.py)
                set_attribute(lt.cublasLtMatrixLayoutSetAttribute, made[-1], LAYOUT_BATCH_COUNT, ctypes.c_int32(batch))
                set_attribute(lt.cublasLtMatrixLayoutSetAttribute, made[-1], LAYOUT_STRIDED_BATCH_OFFSET,
                              ctypes.c_int64(stride))
        self.a_desc, self.b_desc, self.c_desc = made
        self.candidates = candidates(self.desc, self.a_desc, self.b_desc, self.c_desc, count)
        if not self.candidates:
            raise CublasLtError(f"cuBLASLt has no algorithm for {m}x{n}x{k} in {precision.describe()['input']}")
        self.plan_base = {"call": "cublasLtMatmul", "compute_type": COMPUTE_NAME[compute],
                          "scale_type": TYPE_NAME[scale], "a_b_type": TYPE_NAME[in_type], "c_type": TYPE_NAME[out_type],
                          "trans": plan.transa + plan.transb}
        self.use(0)


def destroy(gemm) -> None:
    """A GEMM's layouts and descriptor, given back to cuBLASLt."""
    lt = library()
    for made in (getattr(gemm, name, None) for name in ("a_desc", "b_desc", "c_desc")):
        if made:
            lt.cublasLtMatrixLayoutDestroy(made)
    if getattr(gemm, "desc", None):
        lt.cublasLtMatmulDescDestroy(gemm.desc)
