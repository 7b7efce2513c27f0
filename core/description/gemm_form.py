"""A GEMM's form: how each operand lies in memory, what the epilogue does with alpha and beta, what
the products are summed in, and how many matrices one call multiplies.

Kernels in the wild come in more forms than C = alpha·A·B + beta·C over row-major FP32 sums: B
column-major beside a row-major A (what cuBLAS on row-major data calls "TN": the layout of x·Wᵀ in
every transformer layer, and wgmma's native K-major B), no alpha and beta at all, FP16 sums, a
batch of matrices. A kernel that is right in its own form is wrong in any other, so the form is
part of the description (core/description/kernel.py), of every result (`form`, a short key), and of the cuBLAS
call it is timed beside (`cublas_gemm`, the transposes that give the same product).

The key names a form in results, URLs and the dashboard's menus, so a TN figure never shares a
line with an NN one:
    rrr                 A, B, C row-major (row/col per operand, in the order A, B, C)
    rcr+ab+acc16        B column-major, C = A·B, FP16 accumulate
    ccc+alpha+batch32   all column-major, C = alpha·A·B, a batch of 32 per call
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Epilogue = Literal["alpha_beta", "ab_only", "alpha_only"]
Accumulate = Literal["fp32", "fp16"]
MATRICES = ("A", "B", "C")
# Rows and columns of each matrix, in M, N, K.
SHAPE = {"A": ("M", "K"), "B": ("K", "N"), "C": ("M", "N")}
_EPILOGUE_KEY = {"alpha_beta": "", "ab_only": "+ab", "alpha_only": "+alpha"}
_EPILOGUE_TEXT = {"alpha_beta": "C = alpha·A·B + beta·C", "ab_only": "C = A·B", "alpha_only": "C = alpha·A·B"}
DEFAULT_KEY = "rrr"
# The forms an FP8 kernel may take: cuBLASLt's FP8 GEMM multiplies K-major operands only, and its
# baseline call (worker/gpu/cublaslt_fp8.py) lays B out so for either.
FP8_FORMS = ("rrr", "rcr")


def epilogue_of_args(args: Sequence[str]) -> str:
    """The epilogue a kernel's parameters imply: alpha and beta among them, alpha alone, or neither.
    beta without alpha is no epilogue gemmwatch knows (ValueError)."""
    has_alpha, has_beta = "alpha" in args, "beta" in args
    if has_beta and not has_alpha:
        raise ValueError("args take beta but not alpha: no epilogue computes alpha·A·B + beta·C without alpha "
                         "(epilogues: alpha_beta, alpha_only, ab_only)")
    return "alpha_beta" if has_beta else "alpha_only" if has_alpha else "ab_only"


@dataclass(frozen=True)
class GemmForm:
    a: str = "row"  # "row" or "column", each operand its own
    b: str = "row"
    c: str = "row"
    epilogue: str = "alpha_beta"
    accumulate: str = "fp32"

    def layout(self, matrix: str) -> str:
        return {"A": self.a, "B": self.b, "C": self.c}[matrix]

    @property
    def default(self) -> bool:
        return self == GemmForm()

    @property
    def uniform_layout(self) -> str | None:
        """"row" or "column" where all three operands lie alike, else None."""
        return self.a if self.a == self.b == self.c else None

    def key(self, batch: int = 1) -> str:
        """The form's short name in results and URLs (module docstring)."""
        letters = "".join("r" if self.layout(x) == "row" else "c" for x in MATRICES)
        return (letters + _EPILOGUE_KEY[self.epilogue] + ("+acc16" if self.accumulate == "fp16" else "")
                + (f"+batch{batch}" if batch > 1 else ""))

    def describe(self, batch: int = 1) -> dict:
        """What a result records of its form (env.form)."""
        return {"key": self.key(batch), "layout": {x: self.layout(x) for x in MATRICES}, "epilogue": self.epilogue,
                "accumulate": self.accumulate, "batch": batch}

    # -- the matrices as a kernel gets them -----------------------------------------------
    def leading_dimension(self, matrix: str, m: int, n: int, k: int) -> int:
        """Elements between one row (row-major) or column (column-major) and the next, packed."""
        rows, cols = (dict(M=m, N=n, K=k)[d] for d in SHAPE[matrix])
        return cols if self.layout(matrix) == "row" else rows

    @staticmethod
    def batch_stride(matrix: str, m: int, n: int, k: int) -> int:
        """Elements between one matrix of a batch and the next, packed."""
        rows, cols = (dict(M=m, N=n, K=k)[d] for d in SHAPE[matrix])
        return rows * cols


def label(key: str) -> str:
    """A form key as a person reads it: "A row, B col, C row · C = A·B · FP16 accumulate · batch 32"."""
    letters, *rest = key.split("+")
    if len(letters) != 3 or set(letters) - {"r", "c"}:
        return key
    parts = [", ".join(f"{x} {'row' if letter == 'r' else 'col'}" for x, letter in zip(MATRICES, letters))]
    epilogue = next((e for e, suffix in _EPILOGUE_KEY.items() if suffix and suffix[1:] in rest), "alpha_beta")
    parts.append(_EPILOGUE_TEXT[epilogue])
    parts += ["FP16 accumulate" for r in rest if r == "acc16"]
    parts += [f"batch {r.removeprefix('batch')}" for r in rest if r.startswith("batch")]
    return " · ".join(parts)


@dataclass(frozen=True)
class CublasGemm:
    """One cublasGemmEx (or cublasGemmStridedBatchedEx) call computing the form's product.

    cuBLAS is column-major. A row-major C (M x N) is, read column-major, Cᵀ (N x M) = Bᵀ·Aᵀ, so
    cuBLAS's first operand is then our B and its second our A; a column-major C is C = A·B as is.
    Each operand is passed untransposed ("N") where its memory already reads as the operand cuBLAS
    wants, else transposed ("T"), with its own leading dimension."""

    transa: str  # "N" or "T", of cuBLAS's first operand
    transb: str
    m: int  # cuBLAS's m, n, k
    n: int
    k: int
    first: str  # which of our matrices is cuBLAS's A ("A" or "B")
    second: str
    lda: int
    ldb: int
    ldc: int
    stride_first: int
    stride_second: int
    stride_c: int

    def text(self) -> str:
        """The call as a result records it (env.cublas_call)."""
        return (f"op {self.transa}{self.transb}, m={self.m} n={self.n} k={self.k}, cuBLAS A = our {self.first} "
                f"(ld {self.lda}), cuBLAS B = our {self.second} (ld {self.ldb}), ldc {self.ldc}")


def cublas_gemm(form: GemmForm, m: int, n: int, k: int) -> CublasGemm:
    """The cuBLAS call of this form's product C = A·B (class docstring)."""
    ld = {x: form.leading_dimension(x, m, n, k) for x in MATRICES}
    stride = {x: GemmForm.batch_stride(x, m, n, k) for x in MATRICES}
    if form.c == "row":  # Cᵀ = Bᵀ·Aᵀ: a row-major B reads as Bᵀ (N), a column-major one needs T
        first, second, dims = "B", "A", (n, m, k)
        trans = ("N" if form.b == "row" else "T", "N" if form.a == "row" else "T")
    else:  # C = A·B: a column-major A reads as A (N), a row-major one as Aᵀ (T)
        first, second, dims = "A", "B", (m, n, k)
        trans = ("N" if form.a == "column" else "T", "N" if form.b == "column" else "T")
    return CublasGemm(trans[0], trans[1], *dims, first, second, ld[first], ld[second], ld["C"],
                      stride[first], stride[second], stride["C"])


def form_of(layout, epilogue: str | None, accumulate: str, args: Sequence[str], compute_mode: str,
            output: str) -> GemmForm:
    """A description's form, checked against the rest of it; a ValueError says what does not fit.

    `layout` is "row", "column" or {"A": ..., "B": ..., "C": ...} ("col" for "column"); the
    epilogue, where not given, is the one the args imply (epilogue_of_args)."""
    if isinstance(layout, str):
        layouts: tuple[str, ...] = (layout,) * 3
    else:
        layouts = tuple(getattr(layout, x) for x in MATRICES)
    a, b, c = ("column" if x in ("col", "column") else "row" for x in layouts)
    implied = epilogue_of_args(args)
    if epilogue is not None and epilogue != implied:
        wanted = {"alpha_beta": "alpha and beta", "alpha_only": "alpha and not beta", "ab_only": "neither alpha nor beta"}
        raise ValueError(f"epilogue {epilogue} takes {wanted[epilogue]} among the args; args {list(args)} make it "
                         f"{implied}")
    if accumulate == "fp16" and compute_mode != "fp16":
        raise ValueError(f'accumulate "fp16" is for fp16 kernels (FP16 inputs summed in FP16, C in FP16 or FP32); '
                         f"this one is {compute_mode}")
    form = GemmForm(a, b, c, epilogue=epilogue or implied, accumulate=accumulate)
    if compute_mode == "fp8" and (form.key().removesuffix(_EPILOGUE_KEY["ab_only"]) not in FP8_FORMS
                                  or form.epilogue == "alpha_only"):
        raise ValueError("fp8 kernels take A and C row-major with alpha and beta (or neither: C = A·B, inputs then "
                         "unscaled), and B row-major (the default form, rrr) or column-major (rcr, the TN form "
                         f"cuBLASLt's FP8 GEMM itself takes): their cuBLASLt baseline is made for those; this one is "
                         f"{form.key()}")
    if compute_mode == "fp8" and "batch" in args:
        raise ValueError('fp8 kernels multiply one matrix a call: "batch" among the args has no FP8 cuBLASLt '
                         "baseline to be timed beside (it would fail at every batched case)")
    if "batch" not in args and any(a.startswith("stride_") for a in args):
        raise ValueError("args take batch strides but not the batch count (\"batch\")")
    return form
