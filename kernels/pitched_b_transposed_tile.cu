// Technique: the "common TILE kernel" of the 2016 blog post: square TILE x TILE shared tiles, one C
// element per thread, every row addressed through a byte pitch (Pitch2DMemPtr style), and the B
// tile transposed while it is staged: SubB[x][y] holds B[t + y][col x], so the inner product reads
// SubA[y][i] * SubB[x][i], both along a row.
// Why on the ladder: it is smem_tiled with that transpose as the one change, so the two measure the
// post's claim that transposing B helps. SKEW=0 (the post's layout) reads SubB with 8-way (TILE=16)
// or 32-way (TILE=32) bank conflicts; SKEW=1 pads each row by a float (2-way at most, none at 32).
// Seed: 004_d0a690938e8c7a2e.txt (MatMat with Pitch2DMemPtr and SubB[x][y]).
// Tunables: -DTILE (tile side = threads per block side), -DSKEW (0: the seed's layout, 1: padded).
#include "common.cuh"

#ifndef TILE
#define TILE 16
#endif
#ifndef SKEW
#define SKEW 0
#endif

// Element (row, col) of a row-major matrix whose rows are `pitch` bytes apart.
__device__ __forceinline__ const float* pitch_ptr(const float* base, int row, int col, size_t pitch) {
    return reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) + (size_t)row * pitch) + col;
}
__device__ __forceinline__ float* pitch_ptr(float* base, int row, int col, size_t pitch) {
    return reinterpret_cast<float*>(reinterpret_cast<char*>(base) + (size_t)row * pitch) + col;
}

extern "C" __global__ void sgemm_pitched_b_transposed_tile(int M, int N, int K, float alpha,
                                                           const float* __restrict__ A,
                                                           const float* __restrict__ B, float beta,
                                                           float* __restrict__ C) {
    __shared__ float SubA[TILE][TILE];
    __shared__ float SubB[TILE][TILE + SKEW];  // SubB[x][y] = B[t + y][block col + x]

    const size_t a_pitch = (size_t)K * sizeof(float);
    const size_t b_pitch = (size_t)N * sizeof(float);
    const size_t c_pitch = (size_t)N * sizeof(float);

    const int x = threadIdx.x, y = threadIdx.y;
    const int gx = blockIdx.x * TILE + x;  // column of C (and of B)
    const int gy = blockIdx.y * TILE + y;  // row of C (and of A)

    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        SubA[y][x] = (t + x < K && gy < M) ? *pitch_ptr(A, gy, t + x, a_pitch) : 0.0f;
        // Read coalesced along a row of B (x consecutive), stored transposed.
        SubB[x][y] = (gx < N && t + y < K) ? *pitch_ptr(B, t + y, gx, b_pitch) : 0.0f;
        __syncthreads();

#pragma unroll
        for (int i = 0; i < TILE; ++i) {
            acc += SubA[y][i] * SubB[x][i];
        }
        __syncthreads();  // the tiles are overwritten by the next iteration
    }

    if (gx < N && gy < M) store_axpby(pitch_ptr(C, gy, gx, c_pitch), acc, alpha, beta);
}
