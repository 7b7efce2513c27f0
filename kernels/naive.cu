// Technique: one thread per element of C, in a BLOCK x BLOCK thread block (32 x 32 by default).
// Why: the baseline every other step is measured against. Each thread walks a whole row of A
// and a whole column of B straight from global memory, so A is re-read N times and B M times;
// the L1/L2 caches are all that keeps it from being hopelessly memory-bound.
// threadIdx.x runs along a row of C, so a warp reads 32 consecutive B elements (coalesced) and
// one broadcast A element per step.
// Seed: 000_3aaa2eae4ca2accc.txt (matmul_kernel_0), generalised to C = alpha*A*B + beta*C.
// Tunables: -DBLOCK (threads per block side).
#include "common.cuh"

#ifndef BLOCK
#define BLOCK 32
#endif

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha,
                                       const float* __restrict__ A, const float* __restrict__ B,
                                       float beta, float* __restrict__ C) {
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row >= M || col >= N) return;  // no barrier in this kernel, so an early exit is safe

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    }
    // BLAS convention: with beta == 0, C is write-only (it may hold NaN or garbage).
    store_axpby(C + (size_t)row * N + col, acc, alpha, beta);
}
