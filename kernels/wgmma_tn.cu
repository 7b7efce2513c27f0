// Technique: Hopper's wgmma (sm_90a) in the TN form: A row-major (M x K) and B column-major
// (stored as N rows of K, the layout of x * W^T), so both operands lie K-major, the one layout
// wgmma reads 8-bit and 32-bit types in from shared memory, and nothing is turned on the way.
// Persistent: a block per SM at most (as many as keep every block's count of tiles the same, as in
// half_wgmma_ss.cu) walks every gridDim.x-th tile of C in grouped order. Of 384
// threads, one thread of warpgroup 0 fills a STAGES-deep ring by TMA: a slab of A (128 rows x 128
// bytes of k) and one of B (kBN columns x 128 bytes of k), each one box in the 128-byte swizzle,
// counted by the full barrier's expect_tx. Warpgroups 1 and 2 each own 64 rows of the tile. The
// ring runs on across tiles, so the next tile's slabs load while C is stored.
// Two inputs, one layout of bytes:
// - FP8 (E4M3, fp8_wgmma_tn; default): 128 x 128 tiles, a slab 128 k, four m64n128k32 a slab.
//   The FP8 accumulate caveat: the tensor cores add FP8 products into FP32 with fewer bits than
//   an FADD, and the error grows with K. So each slab's products are summed from zero (scale-d 0
//   on the slab's first wgmma) and added into an FP32 total by FADD once a slab (128 of K). That
//   costs a second set of 64 registers per thread, which is why the tile is 128 wide, not 256.
//   -DFP8_BN=192 (fp8_wgmma_tn_192): 128 x 192 tiles, four m64n192k32 a slab, 96 accumulators and
//   a 96-float total (192 of the consumers' 224 registers). A slab is 40 KiB for 1.5 times the
//   multiplies of a 32 KiB one: a sixth less L2 per multiply, which pays at 4096^3 and up; below,
//   its fewer tiles leave SMs idle.
//   -DFP8_BN=176 (fp8_wgmma_tn_176): 128 x 176 tiles, four m64n176k32 a slab, 88 accumulators and an
//   88-float total. Its point is the count of tiles: at 4096^3, 192-wide tiles are 704, 6 waves on
//   132 SMs with 11 % of the slots empty; 176-wide ones are 768, 6 waves with 3 % empty.
//   -DFP8_BN=64 (fp8_wgmma_tn_64): 128 x 64 tiles, four m64n64k32 a slab, 32 accumulators and a
//   32-float total, a 24 KiB slab in an 8-deep ring: twice the tiles of 128 x 128, for 1024^3, whose
//   64 tiles of 128 x 128 leave half the SMs idle; from 2048^3 up its extra L2 per multiply costs more.
//   -DSPLIT_N=2 (the default of _192 and _176): each slab's wgmmas in two halves of the tile's
//   width (m64n96k32 or m64n88k32), two commit groups; wait_group 1 lets the left half be promoted
//   while the right half's wgmmas still run, so the tensor cores idle for half the FADDs, not all.
//   Whole slabs left 37.6 % of _192's stall samples at 8192^3 on the one wait_group 0 before the
//   promotion (Nsight Compute's SourceCounters). Three parts (m64n64k32) were slower: more waits.
//   C in BF16 (OUTPUT_FP32=1: FP32); the per-tensor scales reach the kernel folded into alpha.
// - TF32 (-DINPUT_TF32=1, tf32_wgmma_tn): 128 x 256 tiles, a slab 32 k, four m64n256k8 a slab
//   summed in place (FP32 accumulators need no promotion), the previous slab's group waited for
//   only (wait_group 1) so a slab's wgmmas stay in flight while the next are issued. The tensor
//   cores read TF32 from the FP32 bits in shared memory (the low 13 bits of the mantissa
//   ignored, as in tf32_wgmma's A). C in FP32.
// Where the TMA cannot describe a matrix (a line of K elements not a multiple of 16 bytes) the
// runner passes a map of zeros (by value), and the producer warpgroup copies both operands itself, 16 bytes
// (or byte by byte) at a time into the same swizzled places, so every size still runs.
// Why faster than fp8_wgmma: there the producer copied B as it lies (N contiguous) and turned every
// slab into K-major rows with byte permutes; that turn, not the tensor cores, set the pace. Why
// faster than tf32_wgmma: there B^T went through registers (wgmma takes an N-major 32-bit B from
// nowhere else), so each slab ended in wait_group 0.
// C is stored 16 bytes a lane where it can be (half.cuh's store_wgmma_rows). For the correctness
// gate's tests: GEMMWATCH_TEST_SKIP_SLAB leaves out the second wgmma of the first slab;
// GEMMWATCH_ROUND_TOWARD_ZERO rounds a BF16 C toward zero (half.cuh).
// Seed: Past the seeds; builds on fp8_wgmma (the FP8 wgmma and its promotion) and
// half_wgmma_ss's persistent rung (the ring across tiles, TMA from one thread).
// Tunables: -DSTAGES (ring depth), -DGROUP_M (grouped rasterisation), -DSPLIT_N (FP8: a slab in parts).
// -DFP8_BN: the FP8 tile's width.
#ifndef INPUT_TF32
#define INPUT_TF32 0
#endif
#ifndef INPUT_BF16
#define INPUT_BF16 1  // half.cuh's types: C is BF16 (the FP8 kernels' "input" output type)
#endif
#ifndef OUTPUT_FP32
#define OUTPUT_FP32 INPUT_TF32  // TF32: C in FP32
#endif
#ifndef FP8_BN
#define FP8_BN 128  // columns of an FP8 tile: 128, 192 (fp8_wgmma_tn_192), 176 (_176) or 64 (fp8_wgmma_tn_64)
#endif
#ifndef STAGES
#define STAGES 6
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef SPLIT_N
#define SPLIT_N 0  // FP8: each slab's wgmmas in parts of the tile's width (2 or 3), one promoted while the next runs
#endif

#include <cuda_fp8.h>

#include "common.cuh"
#include "half.cuh"
#include "wgmma.cuh"

namespace wtn {

#if INPUT_TF32
typedef float elem_t;
constexpr int kBN = 256;            // columns of C per tile: wgmma N
constexpr bool kPromote = false;
#else
typedef __nv_fp8_e4m3 elem_t;
constexpr int kBN = FP8_BN;
constexpr bool kPromote = true;     // each slab's sum into an FP32 total (the FP8 accumulate caveat)
#endif
constexpr int kBM = 128;            // rows of C per tile: 2 consumer warpgroups x wgmma M 64
constexpr int kRow = 128;           // bytes of k per slab row: one 128-byte swizzle row
constexpr int kBK = kRow / (int)sizeof(elem_t);  // k per slab: 128 (FP8), 32 (TF32)
constexpr int kAStage = kBM * kRow;  // bytes of one A slab
constexpr int kBStage = kBN * kRow;  // bytes of one B slab: kBN rows (columns of B) of 128 bytes
constexpr int kThreads = 384;
constexpr int kAcc = kBN / 2;       // FP32 accumulators per consumer thread (FP8: as many again in the total)
// Dynamic shared memory: the ring (an A and a B slab per stage), 2 mbarriers per stage, up to 1 KiB to align.
constexpr int kSmemBytes = STAGES * (kAStage + kBStage) + 16 * STAGES + 1024;

static_assert(STAGES >= 2, "a ring needs two slabs at least");
static_assert(kBN == 64 || kBN == 128 || kBN == 176 || kBN == 192 || kBN == 256,
              "wgmma_ss_e4m3 and wgmma_ss_tf32 are spelt for these widths");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

// One slab's four wgmmas (+32 bytes of each descriptor's address per step); `fresh`: the first
// starts the accumulators from zero.
__device__ __forceinline__ void slab_wgmmas(float (&acc)[kAcc], unsigned long long desc_a, unsigned long long desc_b,
                                            bool fresh, bool skip_second) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        if (skip_second && kk == 1) continue;  // a wrong kernel, for the correctness gate's tests
#if INPUT_TF32
        wgmma_ss_tf32(acc, desc_a + 2 * kk, desc_b + 2 * kk, !(fresh && kk == 0));
#else
        wgmma_ss_e4m3(acc, desc_a + 2 * kk, desc_b + 2 * kk, !(fresh && kk == 0));
#endif
    }
}

#if SPLIT_N
constexpr int kParts = SPLIT_N;
static_assert(kPromote && (kParts == 2 || kParts == 3) && kBN % (8 * kParts) == 0 && (kBN / kParts * kRow) % 1024 == 0,
              "SPLIT_N: an FP8 tile in 2 or 3 parts, each a multiple of 8 columns and of the swizzle's 1024-byte atom");
constexpr int kPart = kAcc / kParts;                   // accumulators of one part
constexpr unsigned long long kBPart = (kBN / kParts) * kRow >> 4;  // B's next part, in descriptor units
// One part's share of a slab: four m64n(kBN/kParts)k32 over its columns (desc_b at its first B
// row), the first from zero (every slab is promoted).
__device__ __forceinline__ void part_wgmmas(float (&acc)[kPart], unsigned long long desc_a, unsigned long long desc_b,
                                            bool skip_second) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        if (skip_second && kk == 1) continue;  // a wrong kernel, for the correctness gate's tests
        wgmma_ss_e4m3(acc, desc_a + 2 * kk, desc_b + 2 * kk, kk != 0);
    }
}
// wait_group with a count known once the loop over parts is unrolled.
__device__ __forceinline__ void wgmma_wait_at_most(int pending) {
    if (pending >= 2) wgmma_wait<2>();
    else if (pending == 1) wgmma_wait<1>();
    else wgmma_wait<0>();
}
#endif

}  // namespace wtn

// One block per SM: the ring takes most of shared memory. setmaxnreg moves registers from the
// producer (56: one thread issues the TMA copies, but at 40 the fallback's 16 copies a slab spilled
// their addresses) to the consumers (224: 128 accumulators, or 64 and a 64-float total), and asks
// no more than is given back: 128 x (168 - 56) >= 256 x (224 - 168).
extern "C" __global__ void __launch_bounds__(wtn::kThreads, 1)
gemm_wgmma_tn(int M, int N, int K, float alpha, const wtn::elem_t* __restrict__ A_in,
              const wtn::elem_t* __restrict__ B_in, float beta, out_t* __restrict__ C,
              const __grid_constant__ TmaMap A_map_v, const __grid_constant__ TmaMap B_map_v) {
    using namespace wtn;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    // Both matrices as bytes: rows of K elements, K_bytes long (B[k][n] at B[n K + k]).
    const unsigned char* A = reinterpret_cast<const unsigned char*>(A_in);
    const unsigned char* B = reinterpret_cast<const unsigned char*>(B_in);
    const int K_bytes = K * (int)sizeof(elem_t);
    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                        // STAGES A slabs, then STAGES B slabs
    const unsigned b_ring = ring + STAGES * kAStage;
    const unsigned bars = b_ring + STAGES * kBStage;     // full[STAGES], then empty[STAGES]
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    // Both maps or neither: without them (zeros) the producer warpgroup copies both operands.
    const void* const A_map = map_or_null(A_map_v);
    const void* const B_map = map_or_null(B_map_v);
    const bool by_tma = A_map != nullptr && B_map != nullptr;
    // full: the TMA thread's arrival, which also announces the slab's bytes; else each producer
    // thread, once its copies of the slab are in.
    if (threadIdx.x == 0) mbar_init_ring(bars, STAGES, by_tma ? 1 : 128);
    __syncthreads();

    const int slabs = (K + kBK - 1) / kBK;  // >= 1 (the API refuses a zero size)
    const int tiles_n = (N + kBN - 1) / kBN, tiles_m = (M + kBM - 1) / kBM, tiles = tiles_m * tiles_n;
    auto tile_origin = [&](int tile, int& bm0, int& bn0) {
        int tile_m, tile_n;
        raster_grouped_id(GROUP_M, tile, tiles_n, tiles_m, tile_m, tile_n);
        bm0 = tile_m * kBM;
        bn0 = tile_n * kBN;
    };
    const int role = threadIdx.x / 128;  // 0: producer, 1 and 2: consumers

    if (role == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
        const int tid = threadIdx.x;
        int it = 0;  // slabs this block has filled so far, over all its tiles: the ring's position
        if (by_tma) {
            // One thread issues every copy; the other 127 have nothing to do.
            if (tid == 0) {
                for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                    int bm0, bn0;
                    tile_origin(tile, bm0, bn0);
                    for (int s = 0; s < slabs; ++s, ++it) {
                        const int stage = it % STAGES;
                        if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                        // The whole boxes' bytes, zeros past the matrices' edges included (the TMA counts them).
                        mbar_arrive_expect_tx(full(stage), kAStage + kBStage);
                        tma_load_2d(a_ring + stage * kAStage, A_map, s * kBK, bm0, full(stage));
                        tma_load_2d(b_ring + stage * kBStage, B_map, s * kBK, bn0, full(stage));
                    }
                }
            }
            __syncwarp();
            return;
        }
        // A piece: 16-byte chunk c of rows r + 16 j, stored at chunk c ^ (row % 8) of its 128-byte
        // row; (r + 16 j) % 8 == r % 8, so the swizzled chunk is the same for all j. B's pieces are
        // the same pieces of B's N rows of K.
        const int c = tid & 7, r = tid >> 3;
        const int dst0 = r * kRow + ((c ^ (r & 7)) * 16);
        const bool vec_a = K_bytes % 16 == 0 && aligned16(A), vec_b = K_bytes % 16 == 0 && aligned16(B);
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            int bm0, bn0;
            tile_origin(tile, bm0, bn0);
            for (int s = 0; s < slabs; ++s, ++it) {
                const int stage = it % STAGES;
                if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                const int k0 = s * kRow;  // bytes
                const unsigned a_s = a_ring + stage * kAStage + dst0, b_s = b_ring + stage * kBStage + dst0;
                unsigned char* a_p = ring_ptr + (a_s - ring);
                unsigned char* b_p = ring_ptr + (b_s - ring);
#pragma unroll 1  // a fallback for odd K: kept small, so that 56 registers hold it without spilling
                for (int j = 0; j < kBM / 16; ++j)
                    copy16_bytes(a_s + j * 16 * kRow, a_p + j * 16 * kRow, A, M, K_bytes, bm0 + r + 16 * j, k0 + 16 * c,
                                 vec_a);
#pragma unroll 1
                for (int j = 0; j < kBN / 16; ++j)
                    copy16_bytes(b_s + j * 16 * kRow, b_p + j * 16 * kRow, B, N, K_bytes, bn0 + r + 16 * j, k0 + 16 * c,
                                 vec_b);
                mbar_arrive_when_copied(full(stage), vec_a && vec_b);
            }
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    const int wg = role - 1;  // which 64 rows of the tile
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;

    int it = 0;  // slabs this block has consumed so far, over all its tiles
#if SPLIT_N
    float acc[kParts][kPart];  // each part of the tile's width: a slab's sums
#else
    float acc[kAcc];
#endif
    float total[kPromote ? kAcc : 1];  // FP8: the FP32 total each slab's sum is added into
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int bm0, bn0;
        tile_origin(tile, bm0, bn0);
        if constexpr (kPromote) {
#pragma unroll
            for (int i = 0; i < kAcc; ++i) total[i] = 0.0f;
        }

#ifdef GEMMWATCH_TEST_SKIP_SLAB
        constexpr bool kSkipTest = true;
#else
        constexpr bool kSkipTest = false;
#endif
#if SPLIT_N
        // Each slab's wgmmas in kParts parts of the tile's width, a commit group each: a part is
        // promoted while the later parts' wgmmas still run, so the tensor cores wait for the last
        // part's FADDs only. No group stays in flight across an iteration: ptxas serialises every
        // wgmma of a loop that carries one while accumulators are read (its info C7514).
        for (int s = 0; s < slabs; ++s, ++it) {
            const int stage = it % STAGES;
            mbar_wait(full(stage), (it / STAGES) & 1);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the fallback's generic-proxy copies
            const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kAStage + wg * 64 * kRow);
            const unsigned long long desc_b = k_major_sw128_desc(b_ring + stage * kBStage);
            wgmma_fence();
#pragma unroll
            for (int p = 0; p < kParts; ++p) {
                fence_operands(acc[p]);
                part_wgmmas(acc[p], desc_a, desc_b + p * kBPart, kSkipTest && s == 0);
                wgmma_commit();
            }
#pragma unroll
            for (int p = 0; p < kParts; ++p) {
                wgmma_wait_at_most(kParts - 1 - p);  // part p's group is done
                fence_operands(acc[p]);
                if (p == kParts - 1 && lane == 0) mbar_arrive(empty(stage));  // every part is done with the slab
#pragma unroll
                for (int i = 0; i < kPart; ++i) total[p * kPart + i] += acc[p][i];
            }
        }
#else
        for (int s = 0; s < slabs; ++s, ++it) {
            const int stage = it % STAGES;
            mbar_wait(full(stage), (it / STAGES) & 1);
            // The fallback's copies were made by the generic proxy; wgmma reads through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kAStage + wg * 64 * kRow);
            const unsigned long long desc_b = k_major_sw128_desc(b_ring + stage * kBStage);
            wgmma_fence();
            fence_operands(acc);
            // FP8: every slab from zero (then promoted); TF32: the tile's first slab only.
            slab_wgmmas(acc, desc_a, desc_b, kPromote || s == 0, kSkipTest && s == 0);
            wgmma_commit();
            if constexpr (kPromote) {
                wgmma_wait<0>();
                fence_operands(acc);
                // The slab goes back to the producer (one arrival a warp) before the FADDs: it is
                // already refilling it while this warpgroup promotes and the other one's wgmmas run.
                if (lane == 0) mbar_arrive(empty(stage));
#pragma unroll
                for (int i = 0; i < kAcc; ++i) total[i] += acc[i];
            } else {
                // The previous slab's group is done once at most this one is pending: its slab goes
                // back to the producer while this one's wgmmas run.
                wgmma_wait<1>();
                fence_operands(acc);
                if (s > 0 && lane == 0) mbar_arrive(empty((it - 1) % STAGES));
            }
        }
        if constexpr (!kPromote) {
            wgmma_wait<0>();
            fence_operands(acc);
            if (lane == 0) mbar_arrive(empty((it - 1) % STAGES));  // the tile's last slab back too
        }
#endif

        // result[4 j + e] is C(row m, column n) with m = 16 warp + lane / 4 (+8 for e >= 2) in this
        // warpgroup's 64 rows, n = 8 j + 2 (lane % 4) (+1 for odd e).
        const int m0 = bm0 + wg * 64 + warp * 16 + (lane >> 2);
#if SPLIT_N
        store_wgmma_rows(C, M, N, m0, bn0, total, alpha, beta, lane & 3);
#else
        if constexpr (kPromote)
            store_wgmma_rows(C, M, N, m0, bn0, total, alpha, beta, lane & 3);
        else
            store_wgmma_rows(C, M, N, m0, bn0, acc, alpha, beta, lane & 3);
#endif
    }
}
