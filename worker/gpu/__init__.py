"""The GPU itself: the CuPy device, cuBLAS and cuBLASLt in every form, NVML's identity, the stream hold."""
