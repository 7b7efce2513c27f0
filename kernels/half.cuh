// Shared device code of the FP16/BF16 kernels (half_mma_sync, half_wgmma): their element types,
// conversions and 16-byte copies into shared memory (ldmatrix is in common.cuh). The rules of
// common.cuh hold; it reads (never defines) two of the kernel's -D values, set before it is
// included: INPUT_BF16 (1: A and B are __nv_bfloat16; 0: __half) and OUTPUT_FP32 (1: C is float;
// 0: C is the inputs' type). GEMMWATCH_ROUND_TOWARD_ZERO makes C round toward zero, not to
// nearest: a kernel that rounds otherwise than cuBLAS, for the correctness gate's tests.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#if INPUT_BF16
typedef __nv_bfloat16 in_t;
#else
typedef __half in_t;
#endif
#if OUTPUT_FP32
typedef float out_t;
#else
typedef in_t out_t;
#endif

#ifdef GEMMWATCH_ROUND_TOWARD_ZERO
constexpr bool kTowardZero = true;
#else
constexpr bool kTowardZero = false;
#endif

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// FP32 to C's type: to nearest, as cuBLAS does (or toward zero, kTowardZero).
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) {
    return kTowardZero ? __float2half_rz(x) : __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return kTowardZero ? __float2bfloat16_rz(x) : __float2bfloat16_rn(x);
}

// One element of the epilogue in C's type: *p = alpha * acc + beta * *p, C unread when beta == 0.
__device__ __forceinline__ void store_half_axpby(out_t* p, float acc, float alpha, float beta) {
    const float v = alpha * acc;
    *p = from_float<out_t>(beta == 0.0f ? v : v + beta * to_float(*p));
}

// Two adjacent elements of a row of C (n even) at p: one 4-byte store (8 for an FP32 C) where both
// are inside C and the pair is aligned (`paired`), else each alone; C unread when beta == 0.
__device__ __forceinline__ void store_pair_axpby(out_t* p, float a0, float a1, float alpha, float beta, bool paired,
                                                 bool second_in) {
    struct alignas(2 * sizeof(out_t)) Pair { out_t x, y; };
    if (paired) {
        Pair v;
        if (beta == 0.0f) {
            v.x = from_float<out_t>(alpha * a0);
            v.y = from_float<out_t>(alpha * a1);
        } else {
            const Pair old = *reinterpret_cast<const Pair*>(p);
            v.x = from_float<out_t>(alpha * a0 + beta * to_float(old.x));
            v.y = from_float<out_t>(alpha * a1 + beta * to_float(old.y));
        }
        *reinterpret_cast<Pair*>(p) = v;
        return;
    }
    store_half_axpby(p, a0, alpha, beta);
    if (second_in) store_half_axpby(p + 1, a1, alpha, beta);
}

// The raw 16 bits of a 2-byte C element.
__device__ __forceinline__ unsigned short bits_of(__half x) { return __half_as_ushort(x); }
__device__ __forceinline__ unsigned short bits_of(__nv_bfloat16 x) { return __bfloat16_as_ushort(x); }

// The four lanes of a quad (t = lane % 4) each hold one 4-byte word of each of 4 consecutive
// 8-column groups of a row: w[q] is columns 2t, 2t + 1 of group q. Afterwards lane t holds the
// whole of group t, 16 bytes: word u is columns 2u, 2u + 1. Two rounds of shuffles within the quad
// (xor 1 swaps words between rows t and t ^ 1, xor 2 between t and t ^ 2); every lane of the warp
// must take part.
__device__ __forceinline__ uint4 quad_transpose(const unsigned (&w)[4], int t) {
    const bool b0 = t & 1, b1 = t & 2;
    const unsigned r0 = __shfl_xor_sync(0xffffffffu, b0 ? w[0] : w[1], 1);
    const unsigned r1 = __shfl_xor_sync(0xffffffffu, b0 ? w[2] : w[3], 1);
    // a[2 g + i]: column 2 (2 g + b0) .. + 1 of row (t & 2) + i
    const unsigned a0 = b0 ? r0 : w[0], a1 = b0 ? w[1] : r0, a2 = b0 ? r1 : w[2], a3 = b0 ? w[3] : r1;
    const unsigned s0 = __shfl_xor_sync(0xffffffffu, b1 ? a0 : a2, 2);
    const unsigned s1 = __shfl_xor_sync(0xffffffffu, b1 ? a1 : a3, 2);
    return make_uint4(b1 ? s0 : a0, b1 ? s1 : a1, b1 ? a2 : s0, b1 ? a3 : s1);
}

// The epilogue of one warp's rows of a wgmma tile: acc[4 j + e] is C(m0 + 8 (e / 2), n0 + 8 j +
// 2 t + e % 2), wgmma's accumulator layout (t = lane % 4; the warp's 16 rows start at m0 - lane / 4).
// Where C is 2 bytes, N a multiple of 8, C 16-byte aligned and beta 0 (what every timed call is),
// each quad turns its pairs around (quad_transpose) and stores 16 bytes a lane: a quarter of the
// stores, each filling its sectors. Otherwise two columns a store where they are aligned, else one.
template <int NA>
__device__ __forceinline__ void store_wgmma_rows(out_t* C, int M, int N, int m0, int n0, const float (&acc)[NA],
                                                 float alpha, float beta, int t) {
    if constexpr (sizeof(out_t) == 2) {
        if (beta == 0.0f && N % 8 == 0 && reinterpret_cast<size_t>(C) % 16 == 0) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int m = m0 + 8 * h;
#pragma unroll
                for (int g = 0; g < NA / 16; ++g) {  // 4 groups of 8 columns at a time
                    unsigned w[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const int i = 4 * (4 * g + q) + 2 * h;
                        w[q] = bits_of(from_float<out_t>(alpha * acc[i])) |
                               ((unsigned)bits_of(from_float<out_t>(alpha * acc[i + 1])) << 16);
                    }
                    const uint4 v = quad_transpose(w, t);
                    const int n = n0 + 8 * (4 * g + t);
                    if (m < M && n < N) *reinterpret_cast<uint4*>(C + (size_t)m * N + n) = v;
                }
                if constexpr (NA % 16 != 0) {  // a width not a multiple of 32 (176): its last groups in pairs
#pragma unroll
                    for (int j = NA / 16 * 4; j < NA / 4; ++j) {
                        const int n = n0 + 8 * j + 2 * t;
                        if (m < M && n < N)
                            store_pair_axpby(C + (size_t)m * N + n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], alpha,
                                             0.0f, true, true);
                    }
                }
            }
            return;
        }
    }
    const bool paired = N % 2 == 0 && reinterpret_cast<size_t>(C) % (2 * sizeof(out_t)) == 0;
#pragma unroll
    for (int j = 0; j < NA / 4; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + 8 * h, n = n0 + 8 * j + 2 * t;
            if (m < M && n < N)
                store_pair_axpby(C + (size_t)m * N + n, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], alpha, beta,
                                 paired && n + 1 < N, n + 1 < N);
        }
    }
}

// 16 bytes from global memory at src into shared memory at dst (a shared-window address), asynchronously.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// 8 elements (16 bytes) of a rows x cols row-major matrix at (r, c), c a multiple of 8, into
// shared memory at dst; zeros outside. vec: rows start 16-byte aligned (cols % 8 == 0, aligned
// base), so an in-bounds piece is wholly in bounds and one cp.async copies it (src_bytes 0 writes
// zeros). Otherwise the elements are stored one by one, synchronously (cp.async moves 4 bytes at
// least): a kernel that signals its copies through an mbarrier must then arrive after its stores.
__device__ __forceinline__ void copy8(in_t* dst, const in_t* P, int rows, int cols, int r, int c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                     "l"(in ? P + (size_t)r * cols + c : P), "r"(in ? 16 : 0) : "memory");
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const bool in = r < rows && c + e < cols;
            dst[e] = in ? P[(size_t)r * cols + c + e] : in_t(0.0f);
        }
    }
}

