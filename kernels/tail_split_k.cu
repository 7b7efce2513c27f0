// Technique: warp_tile_large's block tile and pipeline (128 x 256 x BK=16 by default, 8 x 16
// outputs per thread, double-buffered swizzled shared memory, register-staged global prefetch) with
// the last partial wave split along K. The whole waves of tiles (a multiple of WAVE: 132 SMs times
// the blocks per SM, one at 128 x 256) run one block per tile, in warp_tile_large's grouped order.
// Each of the `tail` tiles left over is cut into p pieces of slabs/p slabs, p chosen (tail_pieces)
// so that the pieces fill the SMs in the fewest rounds: at 4096^3, 512 tiles = 3 waves + 116 tiles,
// and 116 x 9 pieces take 8 rounds of 1/9 tile, 0.89 of a tile instead of 1; at 8192^3, 68 tail
// tiles x 11 pieces take 6 rounds of 1/11, 0.55 instead of 1. Pieces are handed out piece-major
// (piece 0 of every tail tile, then piece 1, ...), so a tile's pieces run about a round apart and
// each rarely waits for the one before it. The grid is the whole-wave tiles plus tail x p blocks
// (registry.py's tail_pieces makes the same choice with the same integer arithmetic). A piece that
// does not start at slab 0 finishes its tile through C itself, in k order: the first piece writes
// alpha * acc + beta * C, each later piece waits until the flag of its tile (a module-scope array)
// says the slabs before it are in C, adds alpha * acc and moves the flag on (released and acquired
// at GPU scope). So beta * C is applied exactly once, the order of the sum is fixed (the result
// does not depend on timing), and no workspace or second launch is needed. Flags start at zero
// (module load) and every launch leaves them at zero: the last piece of a tile clears its flag, and
// the block that draws the last ticket resets the ticket counter. Blocks take their index from that
// ticket in the order they start, so a piece only ever waits for one that is already running: no
// deadlock whatever the GPU's size. Why faster than warp_tile_large: with one block per tile the
// last wave at 4096^3 leaves 16 of 132 SMs idle for a whole tile (Nsight Compute: SMs active 5.57 M
// of 5.77 M elapsed cycles, 96.5 %), at 8192^3 64 of them. Here 5.60 M of 5.65 M (99.2 %). The
// price: each piece past the first reads and writes its tile of C once more (two rows' float4s
// loaded together, so a thread waits for L2 four times per fixup, not 32; one load, add and store
// at a time it reached 89.6 % of cuBLAS at 4096^3, below warp_tile_large, and 92.5 % after), and a
// piece's prologue overlaps nothing. Tried first, and slower than warp_tile_large at 4096^3
// (through the runner, H100): stream-K on a persistent grid of 132 blocks, each an equal run of
// tile-slabs (85.9 % of cuBLAS; its tiles in flight lay 3.9 tiles apart across C: DRAM throughput
// 13.7 % of peak against 4.4 %), then whole waves first and stream-K on the tail only (84.5 %; DRAM
// back at warp_tile_large's 0.39 GB, but the loop over a block's tiles made NVRTC 13.0's ptxas give
// an FFMA's accumulator and A fragment the same register bank in 879 of 2,072 FFMAs, against 23 of
// 2,048 in warp_tile_large: issue slots 73 % busy against 80.6 %). One tile per block keeps
// warp_tile_large's code shape.
// The registered step after it, tail_split_k_overlap, is this file built with -DLAST_K_AFTER_BARRIER=1
// (fixed in the registry): each slab's last k-step of FFMAs moved behind the slab boundary.
// Without it, a slab ends with the stores of the next slab into shared memory, the barrier,
// and the six LDS.128 of the next slab's first fragments, and the FFMAs of that slab's k-step 0
// need those loads at once: every warp of the SM waits out the barrier and then the shared-load
// latency with nothing to issue (its SASS: STS x 12, BAR.SYNC, LDS.128 x 6, branch, then FFMAs
// that depend on the LDS; Nsight Compute: short-scoreboard stalls 0.17 per issued instruction,
// issue slots 80 % busy). With it, the fragments of k-step BK-1 are already in registers (loaded
// during k-step BK-2), so its 128 FFMAs are issued after the barrier and the next slab's first
// LDS.128s (ptxas keeps that order in NVRTC 13.5's SASS on the dev machine: BAR.SYNC, LDS.128 x 6,
// FFMA x 128), and they cover the loads'
// latency. The fragment buffers do not collide: k-step BK-1 uses buffer 1, the next slab's k-step
// 0 buffer 0 (BK is even). Nothing else changes: same tiles, pieces, fixup and global loads.
// Measured through the runner on the H100 (scripts/bench_variants.py, same process, against
// cuBLAS FP32): 96.3 % of cuBLAS at 4096^3 against tail_split_k's 93.3-93.4 %, 99.2 % at 8192^3
// (96.0 %), 95.2 % at 2048^3 (92.9 %).
// Tried beside it and slower (kept out of the registry): the B slab by 16-byte cp.async into a
// 2-, 3- or 4-deep ring in dynamic shared memory (A register-staged as here): 89.4-91.2 % at
// 4096^3, below tail_split_k, with or without this change; ptxas spent the freed staging
// registers elsewhere (255 either way), and at BK=32 it spilled. See kernels/README.md.
// Tunables: -DBM, -DBN, -DBK as in warp_tile_large; -DLDG_STEP (2 or 4); -DGROUP_M groups tile-rows
// (fixed at 8 in the registry); -DLAST_K_AFTER_BARRIER (0 here, 1 for tail_split_k_overlap).
// Seed: Past the seeds (splitting K is not in any seed document); builds on warp_tile_large and the
// ladder of 001_adac3a76413eb491.txt.

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

#define MIN_BLOCKS ((TM * TN <= 32 || (TM == 8 && TN == 8 && BK == 8)) ? 2 : 1)
// Blocks resident at once on the 132 SMs of an H100 SXM (or H200): a whole wave. registry.py's
// _tail_split_wave computes the same number for the grid. On a GPU with another SM count the
// result is still right, only the tail is balanced for the wrong number.
#define WAVE (132 * MIN_BLOCKS)

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
// Integer arithmetic (720720 = lcm(1..16)) so that registry.py's tail_pieces, which sizes the
// grid, makes exactly the same choice.
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
