// Technique: the "common TILE kernel" of the 2016 blog post: square TILE x TILE shared tiles,
// one C element per thread, every row addressed through a byte pitch (Pitch2DMemPtr style, as
// for cudaMallocPitch buffers), and the B tile transposed while it is staged: SubB[x][y] holds
// B[t + y][col x], so the inner product reads SubA[y][i] * SubB[x][i], both along a row.
// Why it is on the ladder: it is the post's baseline, and it tests its claim that transposing
// B in shared memory helps. It is the smem_tiled algorithm with one change, so the difference
// between the two measures the transpose alone. Our matrices are dense, so each pitch is simply
// the row length in bytes (K * 4 for A, N * 4 for B and C); the pitch arithmetic costs the same.
// What to expect: with SKEW=0 (the post's layout) the transposed tile is a bank-conflict trap.
// A warp (16 x by 2 y at TILE=16) writes SubB[x][y] at address x*TILE + y and later reads
// SubB[x][i] at x*TILE + i: TILE=16 puts 8 threads in each used bank (8-way conflict), TILE=32
// all 32 in one (32-way), on every inner-loop read. SKEW=1 pads each row by one float, making
// the row length odd so the x threads land in distinct banks (at most 2-way at TILE=16, none at
// TILE=32). The padding works here because the tile is read one float at a time.
// Seed: 004_d0a690938e8c7a2e.txt (MatMat with Pitch2DMemPtr and SubB[x][y]). Adapted:
// C = alpha*A*B + beta*C; zero-filled edges were already in the seed.
// Tunables: -DTILE (tile side = threads per block side), -DSKEW (0: the seed's layout, 1: padded).

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
