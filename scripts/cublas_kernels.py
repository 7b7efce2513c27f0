#!/usr/bin/env python3
"""Which kernels cuBLAS launches for one cupy.matmul at d^3 (FP32): run under Nsight Compute to list
them with their durations (docs/BENCHMARKS.md, issue 10: at 256^3 and 512^3 a split-K GEMM and
its reduction, two launches inside one sample).
  ncu --clock-control none --metrics gpu__time_duration.sum python3 scripts/cublas_kernels.py 256
"""

import sys

import cupy as cp


def main() -> None:
    d = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rng = cp.random.default_rng(1)
    a = rng.random((d, d), dtype=cp.float32) * 2 - 1
    b = rng.random((d, d), dtype=cp.float32) * 2 - 1
    c = cp.empty((d, d), dtype=cp.float32)
    for _ in range(3):
        cp.matmul(a, b, out=c)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
