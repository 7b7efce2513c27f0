"""The built-in kernels: this project's own kernels folder (kernels/gemmwatch.json), read once,
and cuBLAS, the vendor baseline timed beside every variant and requestable on its own."""

import functools
from pathlib import Path
from typing import Any

import kernels
from core.description.kernel_description import KernelDescription
from core.description.kernel_folder import load_folder

KERNELS_DIR = Path(kernels.__file__).resolve().parent
CUBLAS = "cublas"
# cuBLAS alone, one variant per precision (the baseline a kernel of that precision is timed beside).
CUBLAS_VARIANTS = {CUBLAS: "fp32", "cublas_tf32": "tf32", "cublas_fp16": "fp16", "cublas_bf16": "bf16",
                   "cublas_fp8": "fp8"}
CUBLAS_TECHNIQUE = {
    "fp32": "vendor baseline: cuBLAS SGEMM through cupy.matmul, true FP32 (TF32 off)",
    "tf32": "vendor baseline: cuBLAS SGEMM with CUBLAS_TF32_TENSOR_OP_MATH (TF32 tensor cores)",
    "fp16": "vendor baseline: cublasGemmEx, FP16 A, B and C, CUBLAS_COMPUTE_32F",
    "bf16": "vendor baseline: cublasGemmEx, BF16 A, B and C, CUBLAS_COMPUTE_32F",
    "fp8": "vendor baseline: cublasLtMatmul, E4M3 A and B with per-tensor scales, BF16 C, CUBLAS_COMPUTE_32F",
}
CUBLAS_ENTRY = {"fp32": "cupy.matmul", "tf32": "cupy.matmul", "fp16": "cublasGemmEx", "bf16": "cublasGemmEx",
                "fp8": "cublasLtMatmul"}
CUBLAS_SUMMARIES: list[dict[str, Any]] = [{"name": name, "technique": CUBLAS_TECHNIQUE[mode], "seed": None, "source_file": None,
                     "entry": CUBLAS_ENTRY[mode], "compute_mode": mode,
                     "precision": mode, "target": None, "tunables": []} for name, mode in CUBLAS_VARIANTS.items()]


@functools.cache
def builtin_kernels() -> dict[str, KernelDescription]:
    return {d.name: d for d in load_folder(KERNELS_DIR)}


def variant_names() -> list[str]:
    return [*CUBLAS_VARIANTS, *builtin_kernels()]
