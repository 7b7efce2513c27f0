// Technique: shared-memory tiling. The block stages a TILE x TILE tile of A and of B in shared
// memory, then every thread reads its row/column of the tile from there.
// Why faster than naive: each global element is loaded once per block instead of once per
// thread, cutting global traffic by a factor of TILE (32 by default); shared memory serves the
// TILE reuses at far higher bandwidth.
// Seed: 000_3aaa2eae4ca2accc.txt (matmul_kernel_1), corrected: the seed returns before
// __syncthreads (threads outside C would skip the barrier) and reads past the matrix edges when
// M, N or K is not a multiple of 32. Here every thread takes part in every barrier and loads
// outside the matrices are replaced by zeros, so any M, N, K >= 1 works.
// Tunables: -DTILE (tile side = threads per block side).
#include "common.cuh"

#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void sgemm_smem_tiled(int M, int N, int K, float alpha,
                                            const float* __restrict__ A, const float* __restrict__ B,
                                            float beta, float* __restrict__ C) {
    __shared__ float As[TILE][TILE];
    // +1 column is not needed: threads of a warp read As[ty][k] (broadcast) and Bs[k][tx]
    // (consecutive banks), so neither access conflicts.
    __shared__ float Bs[TILE][TILE];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int a_col = k0 + tx;
        const int b_row = k0 + ty;
        As[ty][tx] = (row < M && a_col < K) ? A[(size_t)row * K + a_col] : 0.0f;
        Bs[ty][tx] = (b_row < K && col < N) ? B[(size_t)b_row * N + col] : 0.0f;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();  // the next iteration overwrites the tiles
    }

    if (row < M && col < N) store_axpby(C + (size_t)row * N + col, acc, alpha, beta);
}
