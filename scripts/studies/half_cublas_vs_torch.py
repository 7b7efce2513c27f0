"""Study: cuBLAS FP16/BF16 GEMM through CuPy's cublasGemmEx binding against torch.matmul, cold.

Which baseline gemmwatch should time for half-precision kernels: this times cublasGemmEx (FP32
compute, FP32 alpha/beta) and torch.matmul over the same inputs, interleaved, each sample after an
L2 flush (a 2x-L2 write, as do_bench does), and reports the medians and how far the outputs differ.
Run on a GPU: python scripts/studies/half_cublas_vs_torch.py [sizes...]
"""

import statistics
import sys

import cupy as cp
import torch
from cupy_backends.cuda.libs import cublas

CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_COMPUTE_32F = 68
ALGOS = {"default": -1, "default_tensor_op": 99}


def bf16_bits(x):
    u = x.view(cp.uint32)
    return ((u + (cp.uint32(0x7FFF) + ((u >> 16) & 1))) >> 16).astype(cp.uint16)


def main(sizes):
    print("torch", torch.__version__, "cupy", cp.__version__, "preferred blas",
          getattr(torch.backends.cuda, "preferred_blas_library", lambda: "?")())
    print("gemmEx doc:", (cublas.gemmEx.__doc__ or "").splitlines()[:2])
    handle = cp.cuda.device.get_cublas_handle()
    l2 = cp.cuda.Device().attributes["L2CacheSize"]
    flush_buf = cp.empty(2 * l2 // 4, dtype=cp.float32)
    import numpy as np
    alpha, beta = np.array([1.0], np.float32), np.array([0.0], np.float32)
    # One stream for all: torch's, which CuPy joins (its events, flushes and cublasGemmEx go there).
    torch_stream = torch.cuda.Stream()
    cp.cuda.ExternalStream(torch_stream.cuda_stream).use()
    torch.cuda.set_stream(torch_stream)
    cublas.setStream(handle, torch_stream.cuda_stream)
    for kind in ("fp16", "bf16"):
        for s in sizes:
            m = n = k = s
            rng = cp.random.default_rng(1)
            a32 = rng.random((m, k), dtype=cp.float32) * 2 - 1
            b32 = rng.random((k, n), dtype=cp.float32) * 2 - 1
            if kind == "fp16":
                a, b, dt = a32.astype(cp.float16), b32.astype(cp.float16), CUDA_R_16F
                ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
            else:
                a, b, dt = bf16_bits(a32), bf16_bits(b32), CUDA_R_16BF
                ta = torch.from_dlpack(a).view(torch.bfloat16)
                tb = torch.from_dlpack(b).view(torch.bfloat16)
            c = cp.empty((m, n), dtype=a.dtype)
            tc = torch.empty((m, n), dtype=ta.dtype, device="cuda")

            def gemm_ex(algo):
                return lambda: cublas.gemmEx(handle, 0, 0, n, m, k, alpha.ctypes.data, b.data.ptr, dt, n,
                                             a.data.ptr, dt, k, beta.ctypes.data, c.data.ptr, dt, n,
                                             CUBLAS_COMPUTE_32F, algo)

            def torch_mm():
                torch.matmul(ta, tb, out=tc)

            calls = {"gemmEx/" + name: gemm_ex(algo) for name, algo in ALGOS.items()}
            calls["torch.matmul"] = torch_mm
            for fn in calls.values():
                for _ in range(20):
                    fn()
            cp.cuda.Device().synchronize()
            calls["gemmEx/default"]()
            cp.cuda.Device().synchronize()
            mine = cp.asarray(c).copy()
            torch_mm()
            torch.cuda.synchronize()
            theirs = cp.from_dlpack(tc.view(torch.int16) if kind == "bf16" else tc)
            same = float((mine.view(cp.int16) == theirs.view(cp.int16)).mean())
            times = {name: [] for name in calls}
            stream = cp.cuda.get_current_stream()
            for rep in range(300):
                for name, fn in calls.items():
                    flush_buf.fill(rep)
                    st, en = cp.cuda.Event(), cp.cuda.Event()
                    st.record(stream)
                    fn()
                    en.record(stream)
                    en.synchronize()
                    times[name].append(cp.cuda.get_elapsed_time(st, en))
            flops = 2.0 * m * n * k
            row = ", ".join(f"{name} {statistics.median(t):.4f} ms ({flops / statistics.median(t) / 1e9:.0f} TFLOPS)"
                            for name, t in times.items())
            print(f"{kind} {s}^3: {row}; bitwise-equal outputs gemmEx/default vs torch: {same:.4f}")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [4096, 8192])
