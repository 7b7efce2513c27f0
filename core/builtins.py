"""The built-in kernels: this project's own kernels folder (kernels/gemmwatch.json), read once,
and cuBLAS, the vendor baseline timed beside every variant and requestable on its own."""

import functools
from pathlib import Path

import kernels
from core.kernel import KernelDescription
from core.kernel_folder import load_folder

KERNELS_DIR = Path(kernels.__file__).resolve().parent
CUBLAS = "cublas"
CUBLAS_SUMMARY = {"name": CUBLAS, "technique": "vendor baseline: cuBLAS SGEMM through cupy.matmul, true FP32 "
                  "(TF32 off)", "seed": None, "source_file": None, "entry": "cupy.matmul", "compute_mode": "fp32",
                  "target": None, "tunables": []}


@functools.cache
def builtin_kernels() -> dict[str, KernelDescription]:
    return {d.name: d for d in load_folder(KERNELS_DIR)}


def variant_names() -> list[str]:
    return [CUBLAS, *builtin_kernels()]
