// Technique: block tiling in shared memory plus a register tile. The 256 threads of a 16x16 block
// stage a 128 x BK slab of A and a BK x 128 slab of B in shared memory (coalesced float4 loads),
// then each thread computes an 8x8 tile of the block's 128x128 piece of C from shared memory, as
// 2x2 quadrants of 4x4 (rows ty*4 and 64 + ty*4, columns tx*4 and 64 + tx*4).
// Why faster than thread_tile_8x8: each element is fetched from global memory once per block, then
// read from shared memory by the 16 threads that need it: 16x less global traffic per FMA.
// Seed: 001_adac3a76413eb491.txt (the shared-memory step, gemm_use_smem).
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

extern "C" __global__ void __launch_bounds__(tile128::kThreads)
sgemm_smem_block_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                      const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[tile128::kM][BK];  // row-major, as in global memory
    __shared__ __align__(16) float Bs[BK][tile128::kN];
    const VecFlags vec = vec_flags(N, K, A, B, C);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int bm0 = blockIdx.y * tile128::kM, bn0 = blockIdx.x * tile128::kN;

    float acc[8][8];
    zero_tile(acc);

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Each float4 stored as loaded; consecutive threads take consecutive float4 along a row,
        // so the global reads are coalesced.
#pragma unroll
        for (int l = 0; l < tile128::Slab<BK>::a_loads; ++l) {
            const int idx = tid + l * tile128::kThreads;
            int r, c;
            tile128::a_piece<BK>(idx, r, c);
            *reinterpret_cast<float4*>(&As[r][c]) = tile128::load_a4<BK>(A, M, K, bm0, k0, idx, vec.a);
        }
#pragma unroll
        for (int l = 0; l < tile128::Slab<BK>::b_loads; ++l) {
            const int idx = tid + l * tile128::kThreads;
            tile128::store_b4(Bs, idx, tile128::load_b4(B, K, N, bn0, k0, idx, vec.b));
        }
        __syncthreads();

        // The 8 A values of a k-step are 8 scalar loads down a column of As; B is two float4.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[8], b[8];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = As[ty * 4 + i][k];
                a[4 + i] = As[64 + ty * 4 + i][k];
            }
            load_pair4(&Bs[k][tx * 4], &Bs[k][64 + tx * 4], b);
            outer_product(acc, a, b);
        }
        __syncthreads();  // the slabs are overwritten by the next iteration
    }

    store_quadrants_8x8(C, M, N, bm0 + ty * 4, 64, bn0 + tx * 4, 64, acc, alpha, beta, vec.c);
}
