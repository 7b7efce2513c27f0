"""CUDA GEMM kernels, one technique per .cu file, each described in gemmwatch.json (docs/KERNELS.md)."""
