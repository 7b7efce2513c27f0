// Technique: FP16/BF16 on Hopper's wgmma.mma_async (sm_90a) with both operands in shared memory:
// A K-major and B N-major (as B lies in memory, row by row), each in the 128-byte swizzle, read by
// the tensor cores through descriptors (B's the transposed form wgmma allows 16-bit types). No
// fragment passes through registers, so a slab's wgmmas stay in flight while the next slab's are
// issued: the consumers wait for the previous group only (wait_group 1) before releasing its slab.
// Of 384 threads, warpgroup 0 fills a STAGES-deep cp.async ring; warpgroups 1 and 2 each own 64
// rows of the block's 128 x 256 tile of C (one m64n256k16 per 16 k).
// Why faster than half_wgmma: there each slab ended in wait_group 0 (the B fragments in registers
// had to be consumed before they were reloaded), so the tensor cores idled at every slab boundary.
// -DB_K_MAJOR=1 (bf16_wgmma_tn): the TN form, B column-major (x * W^T): each column's 64 k of a
// slab is one 128-byte row, copied and swizzled as A's rows are and read K-major (trans-b 0).
// -DTMA=1 (bf16_wgmma_tma, fp16_wgmma_tma): each slab of A and of B comes by TMA through the
// tensor maps the runner passes (A_map, B_map), already in the 128-byte swizzle, issued by one
// producer thread: an A slab is one box of 128 rows x 64 k, a B slab four boxes of 64 k-rows x 64
// columns (B_K_MAJOR: one box of 256 columns x 64 k), and the full barrier counts their bytes
// (expect_tx) instead of 128 threads' cp.async arrivals. Where the TMA cannot describe a matrix (K
// or N not a multiple of 8: a line not a multiple of 16 bytes) the runner passes a map of zeros (the
// maps come by value: wgmma.cuh's TmaMap) and the kernel copies both operands by cp.async as without
// TMA, so every size still runs.
// -DPAIRS=1 (bf16_wgmma_pairs, fp16_wgmma_pairs; with TMA) launches the blocks in clusters of two
// that compute horizontally adjacent tiles, the same 128 rows of C, as tf32_wgmma_pairs does: the
// pair runs on two SMs of one GPC at the same time and reads the same A slabs at about the same
// moment. Nothing passes between the two blocks; a cluster barrier starts and ends the pair.
// -DPERSISTENT=1 (bf16_wgmma_persistent, fp16_wgmma_persistent; with TMA): one block per SM (the
// description's grid) walks every gridDim.x-th tile in grouped order. The ring's position runs on
// across tiles, and the consumers release a tile's last slab before they store its C, so the
// producer is already loading the next tile while C is written: the SM no longer waits, per tile,
// for a block to end, the next to start and its ring to fill. C is stored 16 bytes a lane where it
// can be (half.cuh's store_wgmma_rows), else two columns at a time.
// Why faster than _tma: at 4096^3 each SM ran 4 tiles, each paying that start and end; the step
// took 4096^3 from 74 % to 88 % of cuBLAS, 2048^3 from 63 % to 79 %.
// The grid (the descriptions' balanced_grid) is the fewest blocks that keep the fewest waves, cdiv(tiles,
// cdiv(tiles, SM_COUNT)), at most one per SM: every block walks the same number of tiles. At 4096^3
// that is 128 blocks of 4 tiles where min(tiles, SM_COUNT) gave 132 of which 16 had 3; the time is
// the 4 tiles either way, but the 4 SMs left idle leave their power to the others at the card's cap
// (98.1-98.4 % of cuBLAS became 99.3-99.6 % on the H200).
// -DBN=128 (bf16_wgmma_persistent_128, fp16_wgmma_persistent_128; with PERSISTENT): 128 x 128
// tiles, one m64n128k16 per 16 k a consumer warpgroup, B's slab two 64-column blocks, a deeper
// ring (STAGES 6 in the same shared memory): twice the tiles, for sizes with few of them.
// -DBN=64 (bf16_wgmma_persistent_64, fp16_wgmma_persistent_64; with PERSISTENT): 128 x 64 tiles,
// one m64n64k16 per 16 k, B's slab one 64-column block: four times the tiles of 128 x 256, so
// 1024^3's 128 tiles fill 128 of the H200's 132 SMs (128 x 128 left 68 idle).
// -DSPLIT_K=1 (bf16_wgmma_split_k, fp16_wgmma_split_k; with PERSISTENT): a block on every SM, and
// where the tiles are few, each cut along K into pieces whose FP32 sums meet in global memory.
// -DLAST_HALVES=1 (a tunable of the persistent kernels at BN 256 and 128): each tile's last slab is
// issued as two groups, the left half of the tile's width and then the right half (m64n128k16 or
// m64n64k16 on the same accumulators: wgmma's layout keeps 8 columns per 4 registers, so the halves
// are the first and second half of acc). The left half's C is stored while the right half's
// wgmmas still run, so part of each tile's epilogue hides behind its last math instead of after it.
// On the H200 it took the 128 x 128 tiles from 89.7-90.3 to 93.3-93.8 % of cuBLAS at 2048^3 and
// from 87.1-87.8 to 92.3-92.6 % at 4096^3 (their default since); the 128 x 256 tiles read the same
// or a little slower (4096^3 99.4 against 99.0 %), so theirs stays whole.
// Seed: Past the seeds; builds on half_wgmma and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DSTAGES (ring depth), -DGROUP_M (grouped rasterisation), -DLAST_HALVES; -DBN (256, 128
// or 64) from the description.
#ifndef INPUT_BF16
#define INPUT_BF16 1
#endif
#ifndef OUTPUT_FP32
#define OUTPUT_FP32 0
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef B_K_MAJOR
#define B_K_MAJOR 0
#endif
#ifndef BN
#define BN 256
#endif
#ifndef TMA
#define TMA 0
#endif
#if TMA
#define GW_MAP_PARAMS , const __grid_constant__ TmaMap A_map_v, const __grid_constant__ TmaMap B_map_v
#else
#define GW_MAP_PARAMS
#endif
#ifndef PAIRS
#define PAIRS 0
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef SPLIT_K
#define SPLIT_K 0
#endif
#ifndef LAST_HALVES
#define LAST_HALVES 0
#endif
#if PAIRS
#define GW_CLUSTER_DIMS __cluster_dims__(2, 1, 1)
#else
#define GW_CLUSTER_DIMS
#endif

#include "common.cuh"
#include "half.cuh"
#include "wgmma.cuh"
#if B_K_MAJOR
#include "wgmma_kb.cuh"
#endif

namespace hss {

constexpr int kBM = 128;                 // rows of C per block: 2 consumer warpgroups x wgmma M 64
constexpr int kBN = BN;                  // columns of C per block: wgmma N (256, 128 or 64)
constexpr int kBK = 64;                  // k per slab: one 128-byte swizzle row of the A slab
constexpr int kAStage = kBM * kBK * 2;   // bytes of one A slab: kBM rows of 128 bytes
constexpr int kBBlock = kBK * 128;       // bytes of 64 columns of the B slab: kBK k-rows of 128 bytes
constexpr int kBStage = (kBN / 64) * kBBlock;  // B_K_MAJOR: kBN columns of 128 bytes, as many bytes
static_assert(kBStage == kBN * kBK * 2, "either B layout fills the same slab");
constexpr int kThreads = 384;
constexpr int kBRowsPerPass = 128 / (kBN / 8);  // B's k-rows 128 producer threads copy at once (16 bytes each)
constexpr int kAcc = kBN / 2;            // FP32 accumulators per consumer thread
// Dynamic shared memory: the ring, 2 mbarriers per stage, and up to 1 KiB to align the ring.
constexpr int kSmemBytes = STAGES * (kAStage + kBStage) + 16 * STAGES + 1024;

static_assert(STAGES >= 2, "a ring needs two slabs at least");
static_assert(BN == 256 || ((BN == 128 || BN == 64) && !B_K_MAJOR), "BN: 256, or 128 or 64 with B N-major");
static_assert(!SPLIT_K || PERSISTENT, "SPLIT_K splits the units of a persistent kernel");
static_assert(!LAST_HALVES || (PERSISTENT && !SPLIT_K && !B_K_MAJOR && (BN == 256 || BN == 128)),
              "LAST_HALVES: the persistent kernel with B N-major, 256 or 128 wide, not split along K");

#if SPLIT_K
// Split-K's FP32 partial sums, one 128 x 256 tile per split tile, each thread's 128 accumulators
// at [i / 4][consumer thread][i % 4]; and per tile the pieces added so far. Both start at zero
// (static device memory) and the last piece of each tile puts them back to zero. One workspace per
// loaded module: launches of it must not overlap (the runner's follow one another on one stream,
// as tail_split_k's flags need too). M, N, K >= 1 (the API refuses a zero size).
constexpr int kMaxSplitTiles = 128;
__device__ float4 hss_partial[kMaxSplitTiles * (kAcc / 4) * 256];
__device__ unsigned int hss_pieces[kMaxSplitTiles];
#endif
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

// d: a consumer thread's accumulators for the whole tile width (kAcc) or, LAST_HALVES, for one half
// (wgmma.cuh has the m64nN overload for each).
template <int NA>
__device__ __forceinline__ void wgmma_k16(float (&d)[NA], unsigned long long desc_a, unsigned long long desc_b) {
#if INPUT_BF16 && B_K_MAJOR
    wgmma_ss_bf16_kb(d, desc_a, desc_b);
#elif B_K_MAJOR
    wgmma_ss_f16_kb(d, desc_a, desc_b);
#elif INPUT_BF16
    wgmma_ss_bf16_nb(d, desc_a, desc_b);
#else
    wgmma_ss_f16_nb(d, desc_a, desc_b);
#endif
}

}  // namespace hss

// One block per SM: the ring takes most of shared memory. setmaxnreg moves registers from the
// producer (56: at 40 its 24 copies' addresses spilled to local memory, and the stalls on those
// loads starved the consumers) to the consumers (224).
extern "C" __global__ void __launch_bounds__(hss::kThreads, 1) GW_CLUSTER_DIMS
gemm_half_wgmma_ss(int M, int N, int K, float alpha, const in_t* __restrict__ A, const in_t* __restrict__ B,
                   float beta, out_t* __restrict__ C GW_MAP_PARAMS) {
    using namespace hss;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                                // STAGES A slabs, then STAGES B slabs
    const unsigned b_ring = ring + STAGES * kAStage;
    const unsigned bars = b_ring + STAGES * kBStage;            // full[STAGES], then empty[STAGES]
    in_t* a_ring_ptr = reinterpret_cast<in_t*>(ring_ptr);
    in_t* b_ring_ptr = reinterpret_cast<in_t*>(ring_ptr + STAGES * kAStage);
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

#if TMA
    // Both maps or neither: a map of zeros (the runner's word for "the TMA cannot describe this
    // matrix") sends both operands the cp.async way, whose pieces and swizzle are the same.
    const void* const A_map = map_or_null(A_map_v);
    const void* const B_map = map_or_null(B_map_v);
    const bool by_tma = A_map != nullptr && B_map != nullptr;
#else
    constexpr bool by_tma = false;
#endif
    // full: TMA, the one producer thread's arrival, which also announces the slab's bytes; else
    // each producer thread, once its copies of the slab are in.
    if (threadIdx.x == 0) mbar_init_ring(bars, STAGES, by_tma ? 1 : 128);
#if PAIRS
    cluster_sync();  // the barriers set up, and the pair's two blocks start their slabs together
#else
    __syncthreads();
#endif

    const int slabs = (K + kBK - 1) / kBK;  // >= 1
    // The tiles of C this block computes, in order: its own (one block per tile), or (PERSISTENT)
    // every gridDim.x-th of all tiles in grouped order. SPLIT_K: where the tiles are at most half
    // the blocks (the grid is one block per SM), each tile is cut along K into `split` pieces (a
    // unit is one piece of a tile), as many as fill the SMs while each piece keeps 16 slabs (1,024
    // of K) at least: its 128 KiB of atomics cost more than they save below that (1024^3, cut in
    // four pieces of 4 slabs, ran at 31 % of cuBLAS, uncut at 43 %).
#if PERSISTENT
    const int tiles_n = (N + kBN - 1) / kBN, tiles_m = (M + kBM - 1) / kBM, tiles = tiles_m * tiles_n;
#if SPLIT_K
    const int split = 2 * tiles <= (int)gridDim.x && tiles <= kMaxSplitTiles
                          ? max(1, min(min((int)gridDim.x / tiles, slabs / 16), 8)) : 1;
#else
    constexpr int split = 1;
#endif
    const int tile_first = blockIdx.x, tile_step = gridDim.x, tile_end = tiles * split;
#else
    const int tile_first = 0, tile_step = 1, tile_end = 1;
    constexpr int split = 1;
#endif
    // A unit's slabs, [s_begin, s_end): piece p of a tile takes [p slabs / split, (p + 1) slabs / split).
    auto slab_span = [&](int unit, int& s_begin, int& s_end) {
#if SPLIT_K
        const int piece = unit / tiles;
        s_begin = piece * slabs / split;
        s_end = (piece + 1) * slabs / split;
#else
        (void)unit;
        s_begin = 0;
        s_end = slabs;
#endif
    };
    auto tile_origin = [&](int unit, int& bm0, int& bn0) {
        int tile_m, tile_n;
#if PERSISTENT
        raster_grouped_id(GROUP_M, split > 1 ? unit % tiles : unit, tiles_n, tiles_m, tile_m, tile_n);
#elif PAIRS
        (void)unit;
        raster_grouped_pairs(GROUP_M, tile_m, tile_n);  // the grid's width is even (the description's grid)
#else
        (void)unit;
        raster_grouped(GROUP_M, tile_m, tile_n);
#endif
        bm0 = tile_m * kBM;
        bn0 = tile_n * kBN;
    };
    const int role = threadIdx.x / 128;     // 0: producer, 1 and 2: consumers

    if (role == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
        const int tid = threadIdx.x;
        int it = 0;  // slabs this block has filled so far, over all its tiles: the ring's position
#if TMA
        if (by_tma) {
            // One thread issues every copy; the other 127 have nothing to do but end with it.
            if (tid == 0) {
                for (int tile = tile_first; tile < tile_end; tile += tile_step) {
                    int bm0, bn0, s_begin, s_end;
                    tile_origin(tile, bm0, bn0);
                    slab_span(tile, s_begin, s_end);
                    for (int s = s_begin; s < s_end; ++s, ++it) {
                        const int stage = it % STAGES;
                        if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                        const int k0 = s * kBK;
                        // The whole boxes' bytes, zeros past the matrices' edges included (the TMA counts them).
                        mbar_arrive_expect_tx(full(stage), kAStage + kBStage);
                        tma_load_2d(a_ring + stage * kAStage, A_map, k0, bm0, full(stage));
#if B_K_MAJOR
                        tma_load_2d(b_ring + stage * kBStage, B_map, k0, bn0, full(stage));
#else
#pragma unroll
                        for (int j = 0; j < kBN / 64; ++j)
                            tma_load_2d(b_ring + stage * kBStage + j * kBBlock, B_map, bn0 + 64 * j, k0, full(stage));
#endif
                    }
                }
            }
            __syncwarp();  // warp 0 whole again before the cluster barrier (an aligned instruction)
#if PAIRS
            cluster_sync();  // the consumers' barrier at the end (every thread of the pair takes part)
#endif
            return;
        }
#endif
        const bool vec_a = (K % 8 == 0) && aligned16(A);
#if B_K_MAJOR
        const bool vec_b = (K % 8 == 0) && aligned16(B);  // B's columns start 16-byte aligned
#else
        const bool vec_b = (N % 8 == 0) && aligned16(B);
#endif
        // A piece: 16-byte chunk a_c (8 k) of rows a_r + 16 j, stored at chunk a_c ^ (row % 8) of its
        // 128-byte row; (a_r + 16 j) % 8 == a_r % 8, so the swizzled chunk is the same for all j.
        const int a_c = tid & 7, a_r = tid >> 3;
        const int a_dst0 = a_r * kBK + ((a_c ^ (a_r & 7)) * 8);  // elements
#if !B_K_MAJOR
        // B piece: chunk b_q (8 n) of k-rows b_r + R j (R = kBRowsPerPass: 4 at BN 256, 8 at 128, 16
        // at 64); 64 columns of N per 128-byte row, so chunk b_q lies in column block b_q / 8, at chunk
        // (b_q % 8) ^ (k-row % 8) of its row, and (b_r + R j) % 8 is b_r % 8 for even j and
        // (b_r + R) % 8 for odd j (the same at R = 8 and 16).
        const int b_q = tid & (kBN / 8 - 1), b_r = tid / (kBN / 8);  // b_r < kBRowsPerPass
        const int b_block = (b_q >> 3) * (kBBlock / 2), b_c = b_q & 7;
        const unsigned b_swz[2] = {(unsigned)((b_c ^ (b_r & 7)) * 16),
                                   (unsigned)((b_c ^ ((b_r + kBRowsPerPass) & 7)) * 16)};
#endif
        for (int tile = tile_first; tile < tile_end; tile += tile_step) {
            int bm0, bn0, s_begin, s_end;
            tile_origin(tile, bm0, bn0);
            slab_span(tile, s_begin, s_end);
            // A block and B block wholly inside their matrices: each slab but a partial last one is
            // copied with no bounds checks, from two pointers.
            const bool inside = vec_a && vec_b && bm0 + kBM <= M && bn0 + kBN <= N;
            const in_t* a_src = A + (size_t)(bm0 + a_r) * K + 8 * a_c;
#if B_K_MAJOR
            // B piece (K-major, B[k][n] at B[n K + k]): as A's, chunk a_c of columns bn0 + a_r + 16 j.
            const in_t* b_src = B + (size_t)(bn0 + a_r) * K + 8 * a_c;
#else
            const in_t* b_src = B + (size_t)b_r * N + bn0 + 8 * b_q;
#endif
            for (int s = s_begin; s < s_end; ++s, ++it) {
                const int stage = it % STAGES;
                if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                const int k0 = s * kBK;
                if (inside && k0 + kBK <= K) {
                    const unsigned a_s = a_ring + stage * kAStage + 2 * a_dst0;
                    const in_t* ap = a_src + k0;
#pragma unroll
                    for (int j = 0; j < kBM / 16; ++j) cp_async16(a_s + j * 16 * 128, ap + (size_t)j * 16 * K);
#if B_K_MAJOR
                    const unsigned b_s = b_ring + stage * kBStage + 2 * a_dst0;
                    const in_t* bp = b_src + k0;
#pragma unroll
                    for (int j = 0; j < kBN / 16; ++j) cp_async16(b_s + j * 16 * 128, bp + (size_t)j * 16 * K);
#else
                    const unsigned b_s = b_ring + stage * kBStage + 2 * b_block + b_r * 128;
                    const in_t* bp = b_src + (size_t)k0 * N;
#pragma unroll
                    for (int j = 0; j < kBK / kBRowsPerPass; ++j)
                        cp_async16(b_s + j * kBRowsPerPass * 128 + b_swz[j & 1], bp + (size_t)j * kBRowsPerPass * N);
#endif
                    mbar_arrive_on_copies(full(stage));
                    continue;
                }
                in_t* a_dst = a_ring_ptr + stage * (kAStage / 2) + a_dst0;
#pragma unroll 1
                for (int j = 0; j < kBM / 16; ++j) copy8(a_dst + j * 16 * kBK, A, M, K, bm0 + a_r + 16 * j, k0 + 8 * a_c, vec_a);
#if B_K_MAJOR
                // B as the N x K row-major matrix it is: zeros past column N - 1 and past K, as A's.
                in_t* b_dst = b_ring_ptr + stage * (kBStage / 2) + a_dst0;
#pragma unroll 1
                for (int j = 0; j < kBN / 16; ++j) copy8(b_dst + j * 16 * kBK, B, N, K, bn0 + a_r + 16 * j, k0 + 8 * a_c, vec_b);
#else
                in_t* b_dst = b_ring_ptr + stage * (kBStage / 2) + b_block;
#pragma unroll 1
                for (int j = 0; j < kBK / kBRowsPerPass; ++j) {
                    const int r = b_r + kBRowsPerPass * j;
                    copy8(b_dst + r * 64 + ((b_c ^ (r & 7)) * 8), B, K, N, k0 + r, bn0 + 8 * b_q, vec_b);
                }
#endif
                mbar_arrive_when_copied(full(stage), vec_a && vec_b);
            }
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
#if PAIRS
        cluster_sync();  // the consumers' barrier at the end (every thread of the pair takes part)
#endif
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    const int wg = role - 1;  // which 64 rows of the block's C
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    // A slab goes back to the producer once this warp's wgmmas on it are done.
    auto release = [&](int stage) {
        if (lane == 0) mbar_arrive(empty(stage));
    };

    int it = 0;  // slabs this block has consumed so far, over all its tiles
    float acc[kAcc];
#if SPLIT_K
    __shared__ bool hss_last;  // this block's piece was its tile's last to be added
#endif
    for (int tile = tile_first; tile < tile_end; tile += tile_step) {
        int bm0, bn0, s_begin, s_end;
        tile_origin(tile, bm0, bn0);
        slab_span(tile, s_begin, s_end);
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

        for (int s = s_begin; s < s_end; ++s, ++it) {
            const int stage = it % STAGES;
            mbar_wait(full(stage), (it / STAGES) & 1);
            // The copies were made by the generic proxy; wgmma reads through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            // A: this warpgroup's 64 rows; +32 bytes per 16 k inside the swizzled row. B: 16 k-rows of
            // 128 bytes per 16 k, the 4 blocks of 64 columns kBBlock apart (B_K_MAJOR: as A, 256 rows).
            const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kAStage + wg * 64 * 128);
#if B_K_MAJOR
            const unsigned long long desc_b = k_major_sw128_desc(b_ring + stage * kBStage);
            constexpr unsigned long long kBStep = 32 >> 4;
#else
            const unsigned long long desc_b = mn_major_sw128_desc(b_ring + stage * kBStage, kBBlock);
            constexpr unsigned long long kBStep = 16 * 128 >> 4;
#endif
            wgmma_fence();
            fence_operands(acc);
#if LAST_HALVES
            if (s == s_end - 1) {
                // The tile's last slab, left half then right half, a group each; the halves of
                // B's slab are kBN / 128 blocks of 64 columns apart.
                float (&left)[kAcc / 2] = *reinterpret_cast<float (*)[kAcc / 2]>(&acc[0]);
                float (&right)[kAcc / 2] = *reinterpret_cast<float (*)[kAcc / 2]>(&acc[kAcc / 2]);
                const unsigned long long desc_b_right = desc_b + ((kBN / 128) * kBBlock >> 4);
#ifdef GEMMWATCH_TEST_SKIP_SLAB
                if (s != GEMMWATCH_TEST_SKIP_SLAB)
#endif
                {
#pragma unroll
                    for (int kk = 0; kk < kBK / 16; ++kk) wgmma_k16(left, desc_a + 2 * kk, desc_b + kBStep * kk);
                }
                wgmma_commit();
#ifdef GEMMWATCH_TEST_SKIP_SLAB
                if (s != GEMMWATCH_TEST_SKIP_SLAB)
#endif
                {
#pragma unroll
                    for (int kk = 0; kk < kBK / 16; ++kk)
                        wgmma_k16(right, desc_a + 2 * kk, desc_b_right + kBStep * kk);
                }
                wgmma_commit();
                // The previous slab's group is done once at most the two halves are pending.
                wgmma_wait<2>();
                fence_operands(acc);
                if (s > s_begin) release((it - 1) % STAGES);
                continue;
            }
#endif
#ifdef GEMMWATCH_TEST_SKIP_SLAB
            if (s != GEMMWATCH_TEST_SKIP_SLAB)  // a wrong kernel, for the correctness gate's tests
#endif
            {
#pragma unroll
                for (int kk = 0; kk < kBK / 16; ++kk) wgmma_k16(acc, desc_a + 2 * kk, desc_b + kBStep * kk);
            }
            wgmma_commit();
            // The previous slab's group is done once at most this one is pending: its slab goes back
            // to the producer while this one's wgmmas run.
            wgmma_wait<1>();
            fence_operands(acc);
            if (s > s_begin) release((it - 1) % STAGES);
        }
        // acc[4 j + e] is C(row m, column n) with m = 16 warp + lane / 4 (+8 for e >= 2) in this
        // warpgroup's 64 rows, n = 8 j + 2 (lane % 4) (+1 for odd e).
        const int m0 = bm0 + wg * 64 + warp * 16 + (lane >> 2), t = lane & 3;
#if LAST_HALVES
        // The left half's group is done once at most the right half's is pending: its C goes out
        // while the right half's wgmmas run. The last slab goes back once both halves are done.
        wgmma_wait<1>();
        fence_operands(acc);
        store_wgmma_rows(C, M, N, m0, bn0, *reinterpret_cast<const float (*)[kAcc / 2]>(&acc[0]), alpha, beta, t);
        wgmma_wait<0>();
        fence_operands(acc);
        release((it - 1) % STAGES);
        store_wgmma_rows(C, M, N, m0, bn0 + kBN / 2, *reinterpret_cast<const float (*)[kAcc / 2]>(&acc[kAcc / 2]),
                         alpha, beta, t);
        continue;
#endif
        wgmma_wait<0>();
        fence_operands(acc);
#if PERSISTENT
        // The tile's last slab back too: the producer is already filling the ring for the next
        // tile while this one's C is stored.
        release((it - 1) % STAGES);
#endif
#if SPLIT_K
        if (split > 1) {
            // Every piece adds its sums into the tile's partial (FP32 vector atomics, sm_90); the
            // last to count itself in reads the whole sum back, restores the zeros and stores C once.
            const int ct = threadIdx.x - 128;  // 0..255: the consumer thread
            float4* part = hss_partial + (size_t)(tile % tiles) * (kAcc / 4) * 256 + ct;
#pragma unroll
            for (int q = 0; q < kAcc / 4; ++q)
                atomicAdd(part + q * 256, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
            __threadfence();
            asm volatile("bar.sync 1, 256;\n" ::: "memory");  // the consumers' adds all issued and fenced
            if (ct == 0) hss_last = atomicAdd(&hss_pieces[tile % tiles], 1u) == (unsigned)(split - 1);
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            if (!hss_last) continue;
            __threadfence();
#pragma unroll
            for (int q = 0; q < kAcc / 4; ++q) {
                const float4 v = __ldcg(part + q * 256);
                acc[4 * q] = v.x; acc[4 * q + 1] = v.y; acc[4 * q + 2] = v.z; acc[4 * q + 3] = v.w;
                __stcg(part + q * 256, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
            }
            if (ct == 0) hss_pieces[tile % tiles] = 0;
        }
#endif

#if PERSISTENT
        store_wgmma_rows(C, M, N, m0, bn0, acc, alpha, beta, t);  // 16 bytes a store where it can
#else
#pragma unroll
        for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = m0 + (e >= 2 ? 8 : 0);
                const int n = bn0 + 8 * j + 2 * t + (e & 1);
                if (m < M && n < N) store_half_axpby(C + (size_t)m * N + n, acc[4 * j + e], alpha, beta);
            }
        }
#endif
    }
#if PAIRS
    // The pair leaves together: its two SMs come free at the same moment for the next pair.
    cluster_sync();
#endif
}
