// Technique: a 4x4 register tile per thread. Each thread of a 16x16 block computes 4x4 elements of
// C (the block covers 64x64); per step of 4 along k it loads four float4 pieces of A rows and four
// of B k-rows with 128-bit loads, then does 4x4x4 = 64 FMAs on them. No shared memory yet.
// Why faster than one thread per element: a thread owning an m x n tile reads m + n values per k
// for 2*m*n flops (intensity 1 -> 4 for 4x4), and each float4 load replaces four scalar loads.
// Seed: 001_adac3a76413eb491.txt (the float4 / 4x4 thread tile step, gemm_use_128).
// Tunables: none (block 16x16, tile 64x64).
#include "common.cuh"

#define THREADS_X 16
#define THREADS_Y 16
#define TM 4
#define TN 4
#define BM (THREADS_Y * TM)
#define BN (THREADS_X * TN)

extern "C" __global__ void __launch_bounds__(THREADS_X * THREADS_Y)
sgemm_float4_thread_tile_4x4(int M, int N, int K, float alpha, const float* __restrict__ A,
                             const float* __restrict__ B, float beta, float* __restrict__ C) {
    const VecFlags vec = vec_flags(N, K, A, B, C);

    const int row0 = blockIdx.y * BM + threadIdx.y * TM;
    // threadIdx.x along N: the 16 x-threads of a warp read 16 consecutive float4 of a B row.
    const int col0 = blockIdx.x * BN + threadIdx.x * TN;

    float acc[TM][TN];
    zero_tile(acc);

    for (int k = 0; k < K; k += 4) {
        float4 a[TM], b[4];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = load_row4(A, M, K, row0 + i, k, vec.a);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) b[kk] = load_row4(B, K, N, k + kk, col0, vec.b);

#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float ak[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                acc[i][0] += ak[kk] * b[kk].x;
                acc[i][1] += ak[kk] * b[kk].y;
                acc[i][2] += ak[kk] * b[kk].z;
                acc[i][3] += ak[kk] * b[kk].w;
            }
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        store_row4(C, M, N, row0 + i, col0, &acc[i][0], alpha, beta, vec.c);
    }
}
