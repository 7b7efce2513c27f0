// Technique: the textbook's first GPU SGEMM: one thread per element of C in a 16x16 block,
// operands straight from global memory, C = alpha*A*B + beta*C with C left unread when
// beta == 0. As in the textbook, threadIdx.x walks the ROWS of C (m) and threadIdx.y its columns.
// Why: this is the rung the textbook measures every later optimisation against. Its thread
// mapping is also a lesson: a warp (16 x-threads by 2 y-threads) touches 16 different rows of A
// and writes C down a column, so loads and stores are strided rather than coalesced; it should
// trail `naive` (which runs threadIdx.x along a row of C). -DCOALESCED=1 swaps the mapping to
// show how much of the gap is the mapping alone.
// Seed: 001_adac3a76413eb491.txt (gemmKernel). Adapted to the runner's grid: blockIdx.x picks
// the column tile and blockIdx.y the row tile (the tile is square, so only the mapping of
// threads inside the block changes with COALESCED).
// Tunables: -DCOALESCED (0: the textbook's threadIdx.x -> row mapping; 1: threadIdx.x -> column).

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
