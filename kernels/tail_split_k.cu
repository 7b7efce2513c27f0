// Technique: warp_tile_large's tile and pipeline with the last partial wave split along K. Whole
// waves of tiles (WAVE = NUM_SMS x MIN_BLOCKS) run one block per tile; each tile left over is cut
// into the p pieces (tail_pieces) that fill the SMs in the fewest rounds, and a piece past the
// first adds alpha * acc into C in k order behind a per-tile flag (beta * C once, no workspace).
// Why faster than warp_tile_large: one block per tile leaves SMs idle through the last wave (at
// 4096^3, 16 of the H100's 132 SMs for a whole tile). tail_split_k_overlap (LAST_K_AFTER_BARRIER=1)
// does a slab's last k-step after the barrier, so it covers the next slab's first shared loads.
// Seed: Past the seeds; builds on warp_tile_large and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DBM, -DBN, -DBK, -DLDG_STEP (k-step issuing the next slab's loads), -DGROUP_M,
// -DLAST_K_AFTER_BARRIER; -DNUM_SMS (the GPU's SM count) and -DMIN_BLOCKS from the description.
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
#ifndef LAST_K_AFTER_BARRIER
#define LAST_K_AFTER_BARRIER 0
#endif
#ifndef LDG_STEP
#define LDG_STEP 4  // k-step of a slab at which the next slab's global loads are issued (see below)
#endif
#ifndef MAX_PIECES
#define MAX_PIECES 16
#endif

#define THREADS 256
#define WARPS_N (THREADS / 64)
#define WARP_M (BM / 2)
#define WARP_N (BN / WARPS_N)
#define TM (WARP_M / 8)
#define TN (WARP_N / 4)
#define A_VECS (BM * BK / 4)
#define B_VECS (BK * BN / 4)
#define A_LOADS ((A_VECS + THREADS - 1) / THREADS)
#define B_LOADS ((B_VECS + THREADS - 1) / THREADS)
#define MAX_TAIL_TILES 4096  // flags: one per tile of the last partial wave (fewer than WAVE)

#if (BK % 8) != 0 || (WARP_M % 32) != 0 || (WARP_N % 16) != 0 || TM * TN > 128
#error "BK must be a multiple of 8, BM of 64, BN of 64, and TM * TN <= 128"
#endif

// A whole wave: the blocks resident at once on the GPU. Both numbers come from the kernel's
// description (gemmwatch.json), which sizes the grid with them too: NUM_SMS is the GPU's own SM
// count, read from the device; MIN_BLOCKS the blocks per SM that the tile's registers allow (two at
// 4 x 8 outputs per thread or fewer, or 8 x 8 at BK=8), also this kernel's __launch_bounds__.
#if !defined(NUM_SMS) || !defined(MIN_BLOCKS)
#error "NUM_SMS and MIN_BLOCKS come from the description: -DNUM_SMS=<the GPU's SM count> -DMIN_BLOCKS=<1 or 2>"
#endif
#define WAVE (NUM_SMS * MIN_BLOCKS)

typedef tile128::XorSwizzledColumns<BK> ACols;

#define A_ROWS_PER_PASS (THREADS / (BK / 4))
#define B_ROWS_PER_PASS (THREADS / (BN / 4))

#if LDG_STEP >= BK
#error "LDG_STEP must be a k-step of the slab"
#endif
#if WAVE > MAX_TAIL_TILES
#error "WAVE must not exceed MAX_TAIL_TILES"
#endif

__device__ unsigned int ts_ticket;                   // next block index to hand out
__device__ unsigned int ts_flag[MAX_TAIL_TILES];     // per tail tile: how many of its slabs are in C

__device__ __forceinline__ unsigned int load_acquire(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_release(unsigned int* p, unsigned int v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The slab loads, stores and fragment reads are warp_tile_large's (see its comments).
__device__ __forceinline__ void load_slab(const float* __restrict__ A, const float* __restrict__ B,
                                          int M, int N, int K, int bm0, int bn0, int k0, int k_rel, int tid,
                                          VecFlags vec, bool interior, const float* __restrict__ a_base,
                                          const float* __restrict__ b_base, float4 (&a_stage)[A_LOADS],
                                          float4 (&b_stage)[B_LOADS]) {
    if (interior && k0 + BK <= K) {
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l)
            if (A_VECS % THREADS == 0 || tid + l * THREADS < A_VECS)
                a_stage[l] = __ldg(reinterpret_cast<const float4*>(a_base + (size_t)l * A_ROWS_PER_PASS * K + k_rel));
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l)
            if (B_VECS % THREADS == 0 || tid + l * THREADS < B_VECS)
                b_stage[l] = __ldg(reinterpret_cast<const float4*>(b_base + (size_t)(l * B_ROWS_PER_PASS + k_rel) * N));
        return;
    }
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        if (A_VECS % THREADS == 0 || idx < A_VECS) {
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

__device__ __forceinline__ void load_fragments(const float (*As)[BM], const float (*Bs)[BN], int k,
                                               int am, int bn, float (&a)[TM], float (&b)[TN]) {
#pragma unroll
    for (int g = 0; g < TM / 4; ++g) load4(a, g, &As[k][ACols::col(k, am + 32 * g)]);
#pragma unroll
    for (int h = 0; h < TN / 4; ++h) load4(b, h, &Bs[k][bn + 16 * h]);
}

// C[r][c .. c+3] += alpha * acc[0..3] inside C: a later contributor of a split tile. C is read
// through L2 (ld.cg): the values were written by another SM, and this SM's L1 is not coherent.
__device__ __forceinline__ void add_row4(float* __restrict__ Cm, int rows, int cols, int r, int c,
                                         const float* acc, float alpha, bool vec) {
    if (r >= rows) return;
    float* p = Cm + (size_t)r * cols + c;
    if (vec && c < cols) {
        float4 v = __ldcg(reinterpret_cast<const float4*>(p));
        v.x += alpha * acc[0];
        v.y += alpha * acc[1];
        v.z += alpha * acc[2];
        v.w += alpha * acc[3];
        *reinterpret_cast<float4*>(p) = v;
    } else {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            if (c + q < cols) p[q] = __ldcg(p + q) + alpha * acc[q];
    }
}

// How many pieces each of the `tail` tiles of the last partial wave is cut into: the p in
// 1..MAX_PIECES that makes the tail shortest, ceil(tail * p / WAVE) rounds of 1/p of a tile each,
// plus a small charge per piece for its prologue, epilogue and fixup; ties go to fewer pieces.
// Integer arithmetic (720720 = lcm(1..16)) so that split_tail_grid (core/description/kernel_expr.py), which
// sizes the grid, makes exactly the same choice.
__device__ __forceinline__ int tail_pieces(int tail) {
    long long best_cost = -1;
    int best = 1;
    for (int p = 1; p <= MAX_PIECES; ++p) {
        const long long rounds = ((long long)tail * p + WAVE - 1) / WAVE;
        const long long cost = rounds * (720720 / p) + 2880LL * p;
        if (best_cost < 0 || cost < best_cost) {
            best_cost = cost;
            best = p;
        }
    }
    return best;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_tail_split_k(int M, int N, int K, float alpha, const float* __restrict__ A,
                   const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const VecFlags vec = vec_flags(N, K, A, B, C);
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int am = (warp / WARPS_N) * WARP_M + (lane >> 2) * 4;
    const int bn = (warp % WARPS_N) * WARP_N + (lane & 3) * 4;

    // Blocks take their index from a ticket in the order they start (through a word of the second
    // A buffer: the tiles use all 48 KB of static shared memory), so a block only ever waits for
    // one that is already running.
    if (tid == 0) {
        const unsigned int got = atomicAdd(&ts_ticket, 1u);
        if (got == gridDim.x - 1u) ts_ticket = 0;  // the last ticket: the next launch starts from zero
        As[1][0][0] = __uint_as_float(got);
    }
    __syncthreads();
    const int ticket = (int)__float_as_uint(As[1][0][0]);

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n;
    const int slabs = (K + BK - 1) / BK;  // >= 1
    const int full = tiles - tiles % WAVE;  // tiles of the whole waves: one block each
    int t, s_begin, s_end;
    if (ticket < full) {
        t = ticket;
        s_begin = 0;
        s_end = slabs;
    } else {  // a piece of a tail tile: slabs [j * slabs / p, (j + 1) * slabs / p)
        // Piece-major: piece j of every tail tile, then piece j + 1 of each, so piece j of a tile
        // starts about a round after piece j - 1 and rarely waits for it; the pieces in flight
        // at one time cover the same slabs of neighbouring tiles (shared A and B in L2).
        const int tail = tiles - full;
        const int p = tail_pieces(tail);
        const int piece = ticket - full;
        const int j = piece / tail;
        t = full + piece % tail;
        s_begin = (int)((long long)j * slabs / p);
        s_end = (int)((long long)(j + 1) * slabs / p);
    }

    if (s_begin == s_end) return;  // with fewer slabs than pieces, some pieces are empty
    {
        // Grouped tile order: GROUP_M tile-rows at a time, down then across (as raster_grouped).
        const int per_group = GROUP_M * tiles_n;
        const int first_m = (t / per_group) * GROUP_M;
        const int group_rows = min(tiles_m - first_m, GROUP_M);
        const int in_group = t % per_group;
        const int bm0 = (first_m + in_group % group_rows) * BM;
        const int bn0 = (in_group / group_rows) * BN;

        float acc[TM][TN];
        zero_tile(acc);

        const bool interior = vec.a && vec.b && bm0 + BM <= M && bn0 + BN <= N;
        // Fast-path bases start at this piece's first slab (k_rel counts from there).
        const float* a_base = A + (size_t)(bm0 + tid / (BK / 4)) * K + (tid % (BK / 4)) * 4 + s_begin * BK;
        const float* b_base = B + (size_t)(tid / (BN / 4) + s_begin * BK) * N + bn0 + (tid % (BN / 4)) * 4;

        float4 a_stage[A_LOADS], b_stage[B_LOADS];
        load_slab(A, B, M, N, K, bm0, bn0, s_begin * BK, 0, tid, vec, interior, a_base, b_base, a_stage, b_stage);
        store_slab(As[0], Bs[0], tid, a_stage, b_stage);
        __syncthreads();

        float a[2][TM], b[2][TN];
        load_fragments(As[0], Bs[0], 0, am, bn, a[0], b[0]);

        const int n_slabs = s_end - s_begin;
        for (int s = 0; s < n_slabs; ++s) {
            const int cur = s & 1;
            const bool has_next = s + 1 < n_slabs;
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                // The next slab's global loads go out after LDG_STEP k-steps. The step moves ptxas's
                // schedule and register allocation more than the loads' latency (long-scoreboard
                // stalls 0.02 per issued instruction at step 4): at 4096^3 through the runner, step
                // 0: 91.8 %, 2: 92.5 %, 4: 93.3 %, 6: 91.3 %, 8: 92.7 %, 12: 89.7 % of cuBLAS; at
                // step 1 NVRTC 13.0 gives 1,385 of 2,048 FFMAs a same-bank accumulator and A
                // fragment (14 at step 4, cuobjdump -sass). An earlier form of this file clashed in
                // 877 at step 0 and ran 75.6 %: check the SASS when the loop changes.
                if (k == LDG_STEP && has_next) load_slab(A, B, M, N, K, bm0, bn0, (s_begin + s + 1) * BK, (s + 1) * BK, tid, vec, interior, a_base, b_base, a_stage, b_stage);
#if LAST_K_AFTER_BARRIER
                if (k + 1 < BK) {
                    load_fragments(As[cur], Bs[cur], k + 1, am, bn, a[(k + 1) & 1], b[(k + 1) & 1]);
                    outer_product(acc, a[k & 1], b[k & 1]);
                }
#else
                if (k + 1 < BK) load_fragments(As[cur], Bs[cur], k + 1, am, bn, a[(k + 1) & 1], b[(k + 1) & 1]);
                outer_product(acc, a[k & 1], b[k & 1]);
#endif
            }
            // With LAST_K_AFTER_BARRIER the slab's last k-step (its fragments already in a[1], b[1])
            // is done after the barrier and the next slab's first fragment loads, so its FFMAs cover
            // the shared loads' latency instead of every warp waiting for them at the next slab's top.
            if (has_next) {
                store_slab(As[cur ^ 1], Bs[cur ^ 1], tid, a_stage, b_stage);
                __syncthreads();
                load_fragments(As[cur ^ 1], Bs[cur ^ 1], 0, am, bn, a[0], b[0]);
            }
#if LAST_K_AFTER_BARRIER
            outer_product(acc, a[(BK - 1) & 1], b[(BK - 1) & 1]);
#endif
        }

        unsigned int* flag = &ts_flag[t - full < 0 ? 0 : t - full];  // used by tail tiles only
        if (s_begin == 0) {  // the tile's first slab: C = alpha * acc + beta * C, as a whole tile would
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int r = bm0 + am + 32 * (i / 4) + i % 4;
#pragma unroll
                for (int h = 0; h < TN / 4; ++h) store_row4(C, M, N, r, bn0 + bn + 16 * h, &acc[i][4 * h], alpha, beta, vec.c);
            }
            if (s_end < slabs) {  // a piece: let the next one in
                __threadfence();
                __syncthreads();
                if (tid == 0) store_release(flag, (unsigned int)s_end);
            }
        } else {  // a later piece: wait until the slabs before it are in C, then add
            if (tid == 0)
                while (load_acquire(flag) != (unsigned int)s_begin) __nanosleep(64);
            __syncthreads();
            if (vec.c && bm0 + BM <= M && bn0 + BN <= N) {
                // Inside C: two rows' float4s loaded together, then added and stored, so a thread
                // waits for L2 TM / 2 times, not TM * TN / 4 (ptxas cannot move a load of C above
                // an earlier store to C by itself).
#pragma unroll
                for (int i0 = 0; i0 < TM; i0 += 2) {
                    float4 old[2][TN / 4];
#pragma unroll
                    for (int d = 0; d < 2; ++d)
#pragma unroll
                        for (int h = 0; h < TN / 4; ++h)
                            old[d][h] = __ldcg(reinterpret_cast<const float4*>(
                                C + (size_t)(bm0 + am + 32 * ((i0 + d) / 4) + (i0 + d) % 4) * N + bn0 + bn + 16 * h));
#pragma unroll
                    for (int d = 0; d < 2; ++d)
#pragma unroll
                        for (int h = 0; h < TN / 4; ++h) {
                            const float* v = &acc[i0 + d][4 * h];
                            const float4 out = make_float4(old[d][h].x + alpha * v[0], old[d][h].y + alpha * v[1],
                                                           old[d][h].z + alpha * v[2], old[d][h].w + alpha * v[3]);
                            *reinterpret_cast<float4*>(C + (size_t)(bm0 + am + 32 * ((i0 + d) / 4) + (i0 + d) % 4) * N +
                                                       bn0 + bn + 16 * h) = out;
                        }
                }
            } else {
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const int r = bm0 + am + 32 * (i / 4) + i % 4;
#pragma unroll
                    for (int h = 0; h < TN / 4; ++h) add_row4(C, M, N, r, bn0 + bn + 16 * h, &acc[i][4 * h], alpha, vec.c);
                }
            }
            __threadfence();
            __syncthreads();
            if (tid == 0) store_release(flag, s_end == slabs ? 0u : (unsigned int)s_end);  // the last clears it
        }
    }

}
