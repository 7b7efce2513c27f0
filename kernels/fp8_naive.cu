// Technique: one thread per element of C, as naive.cu, on FP8 (E4M3) inputs: each product of two
// E4M3 numbers is exact in FP32 (4 significant bits each), summed in FP32, C written in BF16 (or
// FP32 with -DOUTPUT_FP32=1, FP16 with -DOUTPUT_FP16=1).
// Why: the first rung of the FP8 ladder, and the reference point for the correctness gate: a
// kernel that accumulates in true FP32, unlike Hopper's FP8 tensor cores, whose adders keep about
// 14 bits (core/description/precision.py).
// The per-tensor scales of A and B reach the kernel folded into alpha (the runner passes
// alpha x scale_A x scale_B), so it multiplies the stored E4M3 numbers as they are.
// Seed: 000_3aaa2eae4ca2accc.txt (matmul_kernel_0, as naive.cu), on E4M3 inputs.
// Tunables: -DBLOCK (threads per block side). For the correctness gate's tests:
// GEMMWATCH_TEST_SKIP_SLAB leaves k = 32..63 out; GEMMWATCH_ROUND_TOWARD_ZERO rounds a BF16 C
// toward zero, not to nearest (right, though further from the reference than cuBLAS).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#ifndef BLOCK
#define BLOCK 16
#endif
#if OUTPUT_FP32
typedef float out_t;
#elif OUTPUT_FP16
typedef __half out_t;
#else
typedef __nv_bfloat16 out_t;
#endif

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
#ifdef GEMMWATCH_ROUND_TOWARD_ZERO
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rz(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rz(v); }
#else
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
#endif

extern "C" __global__ void gemm_fp8_naive(int M, int N, int K, float alpha,
                                          const __nv_fp8_e4m3* __restrict__ A,
                                          const __nv_fp8_e4m3* __restrict__ B, float beta,
                                          out_t* __restrict__ C) {
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row >= M || col >= N) return;  // no barrier in this kernel
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
#ifdef GEMMWATCH_TEST_SKIP_SLAB
        if (k >= 32 && k < 64) continue;
#endif
        acc += static_cast<float>(A[(size_t)row * K + k]) * static_cast<float>(B[(size_t)k * N + col]);
    }
    out_t* p = C + (size_t)row * N + col;
    // BLAS convention: with beta == 0, C is write-only.
    store(p, beta == 0.0f ? alpha * acc : alpha * acc + beta * to_float(*p));
}
