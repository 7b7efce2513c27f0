"""CUDA SGEMM kernels, one technique per .cu file, dispatched by registry.py."""
