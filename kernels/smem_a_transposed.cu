// Technique: smem_block_tile with the A slab stored transposed in shared memory, As[k][m]: the
// float4 a thread reads from a row of A (4 consecutive k) is scattered into 4 rows of As, so that a
// thread's 8 A values for one k sit contiguously in two float4s.
// Why faster than smem_block_tile: the A fragment costs 2 LDS.128 per k, not 8 scalar LDS, so the
// inner loop issues 4 shared loads per 64 FMAs instead of 10, and the A reads' 2-way bank conflict
// is gone.
// Seed: 001_adac3a76413eb491.txt (the transposed-A shared memory step, gemm_transpose_smem).
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

extern "C" __global__ void __launch_bounds__(tile128::kThreads)
sgemm_smem_a_transposed(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BK][tile128::kM];  // transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][tile128::kN];
    const VecFlags vec = vec_flags(N, K, A, B, C);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int bm0 = blockIdx.y * tile128::kM, bn0 = blockIdx.x * tile128::kN;

    float acc[8][8];
    zero_tile(acc);

    for (int k0 = 0; k0 < K; k0 += BK) {
        tile128::copy_slab<BK, tile128::kM, tile128::PlainColumns>(As, Bs, A, B, M, N, K, bm0, bn0, k0, tid, vec.a, vec.b);
        __syncthreads();

        // Per k-step: rows ty*4 and 64 + ty*4 of As[k], columns tx*4 and 64 + tx*4 of Bs[k],
        // each one float4, then the 64 FMAs.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[8], b[8];
            tile128::load_fragments<tile128::kM, tile128::PlainColumns>(As, Bs, k, ty * 4, 64, tx * 4, 64, a, b);
            outer_product(acc, a, b);
        }
        __syncthreads();  // the slabs are overwritten by the next iteration
    }

    store_quadrants_8x8(C, M, N, bm0 + ty * 4, 64, bn0 + tx * 4, 64, acc, alpha, beta, vec.c);
}
