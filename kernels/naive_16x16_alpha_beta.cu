// Technique: the textbook's first GPU SGEMM: one thread per element of C in a 16x16 block, operands
// straight from global memory, C left unread when beta == 0. As in the textbook, threadIdx.x walks
// the ROWS of C (m) and threadIdx.y its columns.
// Why: the rung the textbook measures every later step against. The mapping makes a warp's loads
// and stores strided, not coalesced, so it trails `naive`; -DCOALESCED=1 measures that alone.
// Seed: 001_adac3a76413eb491.txt (gemmKernel), adapted to the runner's grid.
// Tunables: -DCOALESCED (0: the textbook's threadIdx.x -> row mapping; 1: threadIdx.x -> column).
#include "common.cuh"

#ifndef COALESCED
#define COALESCED 0
#endif

#define TILE 16

extern "C" __global__ void sgemm_naive_16x16_alpha_beta(int M, int N, int K, float alpha,
                                                        const float* __restrict__ A,
                                                        const float* __restrict__ B, float beta,
                                                        float* __restrict__ C) {
#if COALESCED
    const int m = blockIdx.y * TILE + threadIdx.y;
    const int n = blockIdx.x * TILE + threadIdx.x;
#else
    const int m = blockIdx.y * TILE + threadIdx.x;
    const int n = blockIdx.x * TILE + threadIdx.y;
#endif
    if (m >= M || n >= N) return;  // no barrier in this kernel, so an early exit is safe

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[(size_t)m * K + k] * B[(size_t)k * N + n];
    }
    // As in the textbook, C is read only when beta != 0: beta == 0 is write-only (C may be NaN).
    store_axpby(C + (size_t)m * N + n, acc, alpha, beta);
}
