// Technique: raise arithmetic intensity per thread. Each thread of a 16x16 block computes a 4x4
// tile of C (the block covers 64x64). Per step of 4 along k it fetches four 4-float pieces of A
// (rows) and four of B (k rows) with 128-bit loads, then does 4x4x4 = 64 FMAs on them.
// Why faster than one thread per element: a thread that owns an m x n tile reads m + n values
// per k for 2*m*n flops (intensity 2mn/(m+n): 1 -> 4 for 4x4), and each float4 load replaces four
// scalar load instructions, so far fewer load instructions are issued per FMA. No shared memory
// yet: reuse across threads still comes from L1/L2 only.
// Seed: 001_adac3a76413eb491.txt (the float4 / 4x4 thread tile step, gemm_use_128).
// Edges and alignment: a float4 load is legal only on a 16-byte boundary. A row of A starts
// 16-byte aligned only if K % 4 == 0 (B: N % 4 == 0) and the base pointer is aligned, so those are
// checked once per kernel; otherwise, and for pieces that cross the matrix edge, the four
// elements are loaded one by one with bounds checks and zeros outside.
// Tunables: none (block 16x16, tile 64x64).

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
