"""Building a kernel: NVRTC, nvcc and Triton in the confined compile process, the cache, launchers' libraries."""
