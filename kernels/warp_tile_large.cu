// Technique: warp_tile's pipeline with a larger, tunable block tile, BM x BN (BM 64 or 128, BN 128
// or 256): still 2 x 4 warps of 8 x 4 lanes, so a lane owns (BM/16) x (BN/16) outputs, 8 x 16 at
// the default 128 x 256. Blocks wholly inside C, on slabs wholly inside K, with 16-byte aligned
// rows load their slabs without bounds checks; blocks are rasterised in groups of block-rows.
// Why faster than warp_tile: per k-step a lane issues 6 LDS.128 per 128 FFMAs instead of 4 per 64,
// the per-slab overhead is spread over 2x-4x as many FFMAs, and an unguarded float4 load costs a
// few instructions instead of ~15.
// Seed: Past the seeds; builds on warp_tile and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DBM, -DBN (block tile), -DBK (slab depth), -DGROUP_M (block-rows per raster group, 1 =
// launch order), -DFMA_ORDER (0: i outer, 1: j outer).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 16
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef FMA_ORDER
#define FMA_ORDER 0
#endif

#define THREADS 256
#define WARPS_N (THREADS / 64)    // warps across; 2 down
#define WARP_M (BM / 2)           // rows of C per warp: 32 or 64
#define WARP_N (BN / WARPS_N)     // columns of C per warp: 32 or 64
#define TM (WARP_M / 8)           // rows per lane (8 lanes down a warp): 4 or 8
#define TN (WARP_N / 4)           // columns per lane (4 lanes across): 8 or 16
#define A_VECS (BM * BK / 4)      // float4 per A slab
#define B_VECS (BK * BN / 4)
#define A_LOADS ((A_VECS + THREADS - 1) / THREADS)  // per thread; BM=64, BK=8: half the threads
#define B_LOADS ((B_VECS + THREADS - 1) / THREADS)

#if (BK % 8) != 0 || (WARP_M % 32) != 0 || (WARP_N % 16) != 0 || TM * TN > 128
#error "BK must be a multiple of 8, BM of 64, BN of 64, and TM * TN <= 128"
#endif

// Two blocks per SM cap a thread at 128 registers: enough for 4 x 8 per lane, and for 8 x 8 at
// BK=8 (as in warp_tile); 4 x 16 or 8 x 8 at BK=16 would spill there, 8 x 16 needs ~230-255.
#define MIN_BLOCKS ((TM * TN <= 32 || (TM == 8 && TN == 8 && BK == 8)) ? 2 : 1)

typedef tile128::XorSwizzledColumns<BK> ACols;

#define A_ROWS_PER_PASS (THREADS / (BK / 4))  // rows of the A slab covered by one float4 per thread
#define B_ROWS_PER_PASS (THREADS / (BN / 4))

// Global -> registers: the slab starting at k0, coalesced, zeros outside the matrices.
// Fast path: a block wholly inside C, on a slab wholly inside K, with aligned rows,
// needs no bounds checks: plain 128-bit loads at fixed offsets from this thread's first A and B
// piece (a_base, b_base), a few instructions each instead of the ~15 of load_row4's guards.
__device__ __forceinline__ void load_slab(const float* __restrict__ A, const float* __restrict__ B,
                                          int M, int N, int K, int bm0, int bn0, int k0, int tid,
                                          VecFlags vec, bool interior, const float* __restrict__ a_base,
                                          const float* __restrict__ b_base, float4 (&a_stage)[A_LOADS],
                                          float4 (&b_stage)[B_LOADS]) {
    if (interior && k0 + BK <= K) {  // uniform across the block
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l)
            if (A_VECS % THREADS == 0 || tid + l * THREADS < A_VECS)
                a_stage[l] = __ldg(reinterpret_cast<const float4*>(a_base + (size_t)l * A_ROWS_PER_PASS * K + k0));
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l)
            if (B_VECS % THREADS == 0 || tid + l * THREADS < B_VECS)
                b_stage[l] = __ldg(reinterpret_cast<const float4*>(b_base + (size_t)(l * B_ROWS_PER_PASS + k0) * N));
        return;
    }
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        if (A_VECS % THREADS == 0 || idx < A_VECS) {  // warp-uniform
            const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
            a_stage[l] = load_row4(A, M, K, bm0 + r, k0 + c, vec.a);
        }
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        if (B_VECS % THREADS == 0 || idx < B_VECS) {
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            b_stage[l] = load_row4(B, K, N, k0 + r, bn0 + c, vec.b);
        }
    }
}

// Registers -> one shared buffer; A transposed and swizzled (4 scalar stores per float4).
__device__ __forceinline__ void store_slab(float (*As)[BM], float (*Bs)[BN], int tid,
                                           const float4 (&a_stage)[A_LOADS],
                                           const float4 (&b_stage)[B_LOADS]) {
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        if (A_VECS % THREADS == 0 || idx < A_VECS) {
            const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
            const int col = ACols::col(c, r);
            As[c + 0][col] = a_stage[l].x;
            As[c + 1][col] = a_stage[l].y;
            As[c + 2][col] = a_stage[l].z;
            As[c + 3][col] = a_stage[l].w;
        }
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        if (B_VECS % THREADS == 0 || idx < B_VECS) {
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = b_stage[l];
        }
    }
}

// Step k's fragments: rows am + 32g .. +3 (g < TM/4) and columns bn + 16h .. +3 (h < TN/4).
__device__ __forceinline__ void load_fragments(const float (*As)[BM], const float (*Bs)[BN], int k,
                                               int am, int bn, float (&a)[TM], float (&b)[TN]) {
#pragma unroll
    for (int g = 0; g < TM / 4; ++g) load4(a, g, &As[k][ACols::col(k, am + 32 * g)]);
#pragma unroll
    for (int h = 0; h < TN / 4; ++h) load4(b, h, &Bs[k][bn + 16 * h]);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_warp_tile_large(int M, int N, int K, float alpha, const float* __restrict__ A,
                      const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const VecFlags vec = vec_flags(N, K, A, B, C);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int am = (warp / WARPS_N) * WARP_M + (lane >> 2) * 4;  // first row of this lane
    const int bn = (warp % WARPS_N) * WARP_N + (lane & 3) * 4;   // first column of this lane
    int block_m, block_n;
    raster_grouped(GROUP_M, block_m, block_n);
    const int bm0 = block_m * BM;
    const int bn0 = block_n * BN;
    const int slabs = (K + BK - 1) / BK;  // >= 1

    float acc[TM][TN];
    zero_tile(acc);

    // This thread's first pieces of the A and B slabs (see load_slab); used by blocks inside C.
    const bool interior = vec.a && vec.b && bm0 + BM <= M && bn0 + BN <= N;
    const float* a_base = A + (size_t)(bm0 + tid / (BK / 4)) * K + (tid % (BK / 4)) * 4;
    const float* b_base = B + (size_t)(tid / (BN / 4)) * N + bn0 + (tid % (BN / 4)) * 4;

    float4 a_stage[A_LOADS], b_stage[B_LOADS];
    load_slab(A, B, M, N, K, bm0, bn0, 0, tid, vec, interior, a_base, b_base, a_stage, b_stage);
    store_slab(As[0], Bs[0], tid, a_stage, b_stage);
    __syncthreads();

    float a[2][TM], b[2][TN];
    load_fragments(As[0], Bs[0], 0, am, bn, a[0], b[0]);

    for (int s = 0; s < slabs; ++s) {
        const int cur = s & 1;
        const bool has_next = s + 1 < slabs;  // uniform across the block
        if (has_next) load_slab(A, B, M, N, K, bm0, bn0, (s + 1) * BK, tid, vec, interior, a_base, b_base, a_stage, b_stage);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) load_fragments(As[cur], Bs[cur], k + 1, am, bn, a[(k + 1) & 1], b[(k + 1) & 1]);
#if FMA_ORDER == 1
#pragma unroll
            for (int j = 0; j < TN; ++j)
#pragma unroll
                for (int i = 0; i < TM; ++i) acc[i][j] += a[k & 1][i] * b[k & 1][j];
#else
            outer_product(acc, a[k & 1], b[k & 1]);
#endif
        }

        if (has_next) {
            // Buffer cur ^ 1 was last read in iteration s - 1, before the barrier that ended it.
            store_slab(As[cur ^ 1], Bs[cur ^ 1], tid, a_stage, b_stage);
            __syncthreads();
            load_fragments(As[cur ^ 1], Bs[cur ^ 1], 0, am, bn, a[0], b[0]);
        }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = bm0 + am + 32 * (i / 4) + i % 4;
#pragma unroll
        for (int h = 0; h < TN / 4; ++h) store_row4(C, M, N, r, bn0 + bn + 16 * h, &acc[i][4 * h], alpha, beta, vec.c);
    }
}
