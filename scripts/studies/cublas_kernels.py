#!/usr/bin/env python3
"""Which kernels cuBLAS launches for one cupy.matmul at d^3 (FP32): run under Nsight Compute to list
them with their durations (docs/BENCHMARKS.md, issue 10: at 256^3 and 512^3 a split-K GEMM and
its reduction, two launches inside one sample).
  ncu --clock-control none --nvtx --nvtx-include "current/" --metrics gpu__time_duration.sum \
      python3 scripts/studies/cublas_kernels.py 256        # then --nvtx-include "external/"

Two call styles, each three times inside an NVTX range named after it, so ncu can list the
launches of one at a time:
- "current": on the current stream, as gemmwatch's runner calls cuBLAS;
- "external": on a stream of its own wrapped anew per call (cupy.cuda.ExternalStream), as
  tests/test_gpu_nvbench.py wraps nvbench's stream (Stream.from_external) inside its launch.
  CuPy then points the cuBLAS handle at that stream on each call, and cublasSetStream puts the
  handle's workspace back to the default pool, which may change the algorithm cuBLAS picks.
"""

import sys

import cupy as cp
from cupyx.profiler import time_range


def main() -> None:
    d = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    rng = cp.random.default_rng(1)
    a = rng.random((d, d), dtype=cp.float32) * 2 - 1
    b = rng.random((d, d), dtype=cp.float32) * 2 - 1
    c = cp.empty((d, d), dtype=cp.float32)
    with time_range("current"):
        for _ in range(3):
            cp.matmul(a, b, out=c)
        cp.cuda.Device().synchronize()
    own = cp.cuda.Stream(non_blocking=True)
    with time_range("external"):
        for _ in range(3):
            with cp.cuda.ExternalStream(own.ptr):  # a new stream object per call, as nvbench's launch gets
                cp.matmul(a, b, out=c)
        own.synchronize()


if __name__ == "__main__":
    main()
