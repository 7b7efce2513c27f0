// Technique: Hopper's wgmma.mma_async (inline PTX, sm_90a: compute capability 9.0 only) fed by a
// warp-specialised cp.async pipeline. Of 384 threads, warpgroup 0 fills a STAGES-deep mbarrier ring
// and warpgroups 1 and 2 each own 64 columns of the block's BM x 128 tile of C. wgmma reads TF32
// from shared memory only K-major, so the block computes C^T = B^T A^T: A is the shared-memory
// operand (128-byte swizzle), B^T is loaded into registers and rounded to TF32.
// Why faster than tf32_mma_sync: one wgmma does 64 x BM x 8 multiply-adds for a warpgroup, A goes
// from shared memory to the tensor cores without registers, and the copies are asynchronous, issued
// by a warpgroup that does nothing else, with 3-4 slabs in flight instead of one.
// -DSPLIT3=1 (tf32x3_wgmma) buys back FP32's accuracy: each operand x is split into a TF32 part
// and the TF32 part of what is left (x = big + small, 22 of FP32's 24 significant bits), and each
// k-step takes three products, small*big + big*small + big*big (small*small lies below FP32's
// rounding). The producer writes each A slab's two parts once its own copies have landed; the
// consumers split B^T in registers.
// -DTMA_A=1 (tf32_wgmma_tma) copies each A slab with one TMA copy through the tensor map the
// runner passes (A_map), in the 128-byte swizzle wgmma reads, in place of 128 threads' cp.async.
// -DPAIRS=1 (tf32_wgmma_pairs) launches the blocks in clusters of two that compute horizontally
// adjacent tiles, the same rows of C: the pair is placed on two SMs of one GPC at the same time,
// starts its slabs together and leaves together (cluster barriers), so both read each A slab at
// about the same moment. No data passes between the two.
// -DTWO_FRAGS=1 (tf32_wgmma_pairs_2frags) keeps two sets of B^T fragments: a slab's wgmmas read one
// while the next slab's are loaded into the other, so each consumer warpgroup waits for the previous
// slab's group only (wait_group 1) instead of ending every slab in wait_group 0. ptxas batches the
// four wgmmas of a slab either way (the SASS: one WARPGROUP.ARRIVE per four HGMMA).
// -DTMA_B=1 (tf32_wgmma_pairs_tma_b) copies B's slab by TMA too, as four 32-column boxes in the
// 128-byte swizzle, so the producer is one thread issuing five copies a slab where 128 threads issued
// eight cp.async each. The swizzle moves each 16-byte chunk of a k-row by k % 8; the columns a lane
// takes as its two B^T rows are chosen so that a warp's 32 fragment loads still fall in 32
// different banks (any order of Cᵀ's rows is the same product, as long as the stores follow it):
// lane (g, t) of warp w takes column 16 (g / 4) + 8 (w % 2) + g % 4 of its 32-column box, and the
// column 4 past it. Where B has no map (N not a multiple of 4) the producer warpgroup copies B into
// the same boxes itself.
// -DSTAGED_C=1 (tf32_wgmma_pairs_staged_c) writes C through shared memory: stored from the fragments,
// each warp store put 32 floats on four rows of C (8 sectors for 128 bytes) and a consumer thread
// issued 128 of them after its last slab, time the tensor cores stood idle. The tile goes into the
// A ring instead, then each warp writes whole rows of C, 16 bytes a lane.
// Seed: Past the seeds; builds on tf32_mma_sync and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DBM (128 or 256: rows of C per block, wgmma's N), -DSTAGES (ring depth), -DGROUP_M.
#include "common.cuh"
#include "tf32.cuh"
#include "wgmma.cuh"

#ifndef BM
#define BM 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef SPLIT3
#define SPLIT3 0
#endif
#ifndef TMA_A
#define TMA_A 0
#endif
#ifndef PAIRS
#define PAIRS 0
#endif
#ifndef TWO_FRAGS
#define TWO_FRAGS 0
#endif
#ifndef TMA_B
#define TMA_B 0
#endif
#ifndef STAGED_C
#define STAGED_C 0
#endif
#if PAIRS
#define GW_CLUSTER_DIMS __cluster_dims__(2, 1, 1)
#else
#define GW_CLUSTER_DIMS
#endif
#if TMA_A
#define GW_A_MAP_PARAM , const __grid_constant__ TmaMap A_map_v
#else
#define GW_A_MAP_PARAM
#endif
#if TMA_B
#define GW_B_MAP_PARAM , const __grid_constant__ TmaMap B_map_v
#else
#define GW_B_MAP_PARAM
#endif
// setmaxnreg's counts (immediates): the producer's split of A needs more than its copies alone.
#if SPLIT3
#define PRODUCER_REG_COUNT 56
#define CONSUMER_REG_COUNT 224
#else
#define PRODUCER_REG_COUNT 40
#define CONSUMER_REG_COUNT 232
#endif
#define GW_STRINGIFY(x) #x
#define GW_IMMEDIATE(x) GW_STRINGIFY(x)
#define PRODUCER_REGS GW_IMMEDIATE(PRODUCER_REG_COUNT)
#define CONSUMER_REGS GW_IMMEDIATE(CONSUMER_REG_COUNT)

namespace tf32wg {

constexpr int kBM = BM;                 // rows of C per block = wgmma N
constexpr int kBN = 128;                // columns of C per block: 2 consumer warpgroups x wgmma M 64
constexpr int kBK = 32;                 // k per slab: one 128-byte swizzle row of the A slab
constexpr int kBRow = TMA_B ? kBN : kBN + 8;  // floats of a B k-row in shared memory (TMA_B: spread over 4 boxes)
constexpr int kAStage = kBM * kBK * 4;  // bytes of one A slab (a multiple of 1024)
constexpr int kBStage = kBK * kBRow * 4;
constexpr int kThreads = 384;
constexpr int kAcc = kBM / 2;           // FP32 accumulators per consumer thread
constexpr int kAParts = SPLIT3 ? 2 : 1; // A slabs per stage: A, or A's big and small parts
// Dynamic shared memory: the ring, 2 mbarriers per stage, and up to 1 KiB to align the ring.
constexpr int kSmemBytes = STAGES * (kAParts * kAStage + kBStage) + 16 * STAGES + 1024;

static_assert(BM == 128 || BM == 256, "BM is wgmma's N: 128 or 256 here");
static_assert(!SPLIT3 || BM == 128, "SPLIT3 keeps two sets of accumulators: BM = 256 would need 256 registers");
static_assert(STAGES >= 2, "a ring needs two slabs at least");
// setmaxnreg moves registers within the block: the consumers can take only what the producer gives
// back from the 168 a thread the block holds at launch, or a consumer warp waits for them forever.
static_assert(128 * (168 - PRODUCER_REG_COUNT) >= 256 * (CONSUMER_REG_COUNT - 168),
              "the consumers' setmaxnreg asks more registers than the producer's gives back");
static_assert(!(SPLIT3 && TMA_A), "SPLIT3 splits the A pieces its own threads copied: not with TMA_A");
static_assert(!(SPLIT3 && TWO_FRAGS), "TWO_FRAGS keeps the plain kernel's slab in flight: not with SPLIT3's promotion");
static_assert(!TMA_B || (TMA_A && !SPLIT3), "TMA_B's producer thread is TMA_A's");
static_assert(!STAGED_C || (TMA_B && STAGES * kAStage >= kBM * kBN * 4),
              "STAGED_C's bank-free writes follow TMA_B's columns, and its tile takes the A ring's place");

// Where element (k, n) of a B slab lies, in bytes from the slab's start: k-rows of kBRow floats
// padded by 8 (no two rows of a fragment load on one bank), or TMA_B's four boxes of 32 columns,
// each 32 k-rows of 128 bytes with chunk n % 32 / 4 stored at chunk (n % 32 / 4) ^ (k % 8).
// Either way k + 8 lies kKStep8 bytes past k (k + 4 only in the padded rows).
__host__ __device__ __forceinline__ constexpr unsigned b_slab_offset(int k, int n) {
#if TMA_B
    return (n / 32) * 4096 + k * 128 + ((((n % 32) / 4) ^ (k % 8)) << 4) + (n % 4) * 4;
#else
    return (k * kBRow + n) * 4;
#endif
}
constexpr int kKStep8 = TMA_B ? 8 * 128 : 8 * kBRow * 4;
static_assert(b_slab_offset(8 + 5, 77) - b_slab_offset(5, 77) == kKStep8, "kKStep8 is 8 k-rows of the slab's layout");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

}  // namespace tf32wg

// One block per SM: the ring takes most of shared memory. 384 threads at launch give each 168
// registers; setmaxnreg then moves registers from the producer to the consumers (PRODUCER_REGS).
extern "C" __global__ void __launch_bounds__(tf32wg::kThreads, 1) GW_CLUSTER_DIMS
sgemm_tf32_wgmma(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C GW_A_MAP_PARAM GW_B_MAP_PARAM) {
    using namespace tf32wg;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                         // STAGES A slabs (SPLIT3: A's big parts)
#if SPLIT3
    const unsigned a_small_ring = ring + STAGES * kAStage;  // STAGES slabs of A's small parts
#endif
    const unsigned b_ring = ring + kAParts * STAGES * kAStage;  // STAGES B slabs
    const unsigned bars = b_ring + STAGES * kBStage;      // full[STAGES], then empty[STAGES]
    const unsigned char* b_ring_ptr = ring_ptr + kAParts * STAGES * kAStage;
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    // full: each producer thread's copies (SPLIT3: its split of them); TMA_A: and the arrival that
    // announces the TMA copy's bytes.
    if (threadIdx.x == 0) mbar_init_ring(bars, STAGES, 128 + TMA_A);
#if PAIRS
    cluster_sync();  // the barriers set up, and the pair's two blocks start their slabs together
#else
    __syncthreads();
#endif

    int tile_m, tile_n;
#if PAIRS
    raster_grouped_pairs(GROUP_M, tile_m, tile_n);  // the grid's width is even (the description's grid)
#else
    raster_grouped(GROUP_M, tile_m, tile_n);
#endif
    const int bm0 = tile_m * kBM, bn0 = tile_n * kBN;
    const int slabs = (K + kBK - 1) / kBK;  // >= 1
    const int role = threadIdx.x / 128;     // 0: producer, 1 and 2: consumers
#if TMA_A
    // No map (zeros): A's rows are not 16-byte aligned; A comes by cp.async as in tf32_wgmma.
    const void* const A_map = map_or_null(A_map_v);
    const bool a_by_tma = A_map != nullptr;
#else
    constexpr bool a_by_tma = false;
#endif
#if TMA_B
    const void* const B_map = map_or_null(B_map_v);
    const bool b_by_tma = B_map != nullptr;  // no map (zeros): N is not a multiple of 4; B comes by cp.async
#else
    constexpr bool b_by_tma = false;
#endif

    if (role == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 " PRODUCER_REGS ";\n" ::: "memory");
        const int tid = threadIdx.x;
        const bool vec_a = (K % 4 == 0) && aligned16(A);
        const bool vec_b = (N % 4 == 0) && aligned16(B);
        // B piece: chunk b_c (4 n) of k-rows b_r + 4 j.
        const int b_c = tid & 31, b_r = tid >> 5;
        // Where its pieces go in a slab: rows b_r + 4 j lie at these, the first for even j and the
        // second for odd, plus (j / 2) * kKStep8 (in the boxes, 4 rows down is not a fixed step).
        const unsigned b_dst_even = b_slab_offset(b_r, 4 * b_c), b_dst_odd = b_slab_offset(b_r + 4, 4 * b_c);
        const bool b_cols_in = bn0 + kBN <= N;
#if SPLIT3
        // Once this thread's copies of slab s have landed, its own A pieces are rewritten as their
        // big parts and their small parts are written to the other A ring, at the same offsets
        // (the swizzle is the same for both). Then the slab is announced full.
        auto split_a = [&](int s) {
            const int stage = s % STAGES;
            const unsigned a_dst = a_ring + stage * kAStage + a_piece_offset(tid);
#pragma unroll 4
            for (int j = 0; j < kBM / 16; ++j) {
                const unsigned at = a_dst + j * 16 * 128;
                float x[4];
                unsigned big[4], small[4];
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(x[0]), "=f"(x[1]), "=f"(x[2]), "=f"(x[3]) : "r"(at) : "memory");
#pragma unroll
                for (int e = 0; e < 4; ++e) split_tf32(x[e], big[e], small[e]);
                asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n"
                             ::"r"(at), "r"(big[0]), "r"(big[1]), "r"(big[2]), "r"(big[3]) : "memory");
                asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n"
                             ::"r"(a_small_ring + (at - a_ring)), "r"(small[0]), "r"(small[1]), "r"(small[2]), "r"(small[3])
                             : "memory");
            }
            // The consumers' wgmmas read these stores through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(full(stage));
        };
#endif

        for (int s = 0; s < slabs; ++s) {
            const int stage = s % STAGES;
            if (s >= STAGES) mbar_wait(empty(stage), ((s / STAGES) + 1) & 1);
            const int k0 = s * kBK;
#if TMA_B
            // Thread 0's arrival tells the barrier the bytes of the copies it issues (none, if neither
            // matrix has a map); the 128 threads' arrivals follow their own copies, if any.
            if (tid == 0) {
                mbar_arrive_expect_tx(full(stage), (a_by_tma ? kAStage : 0) + (b_by_tma ? kBStage : 0));
                if (a_by_tma) tma_load_2d(a_ring + stage * kAStage, A_map, k0, bm0, full(stage));
                if (b_by_tma) {
#pragma unroll
                    for (int box = 0; box < kBN / 32; ++box)
                        tma_load_2d(b_ring + stage * kBStage + box * 4096, B_map, bn0 + 32 * box, k0, full(stage));
                }
            }
            if (!a_by_tma) copy_a_slab<kBM>(a_ring + stage * kAStage, A, M, K, bm0, k0, vec_a, tid);
#elif TMA_A
            if (a_by_tma) {
                if (tid == 0) {  // the whole A slab by one copy; the barrier told its bytes first
                    mbar_arrive_expect_tx(full(stage), kAStage);
                    tma_load_2d(a_ring + stage * kAStage, A_map, k0, bm0, full(stage));
                }
            } else {
                copy_a_slab<kBM>(a_ring + stage * kAStage, A, M, K, bm0, k0, vec_a, tid);
                if (tid == 0) mbar_arrive(full(stage));  // no TMA bytes this slab: the arrival alone
            }
#else
            copy_a_slab<kBM>(a_ring + stage * kAStage, A, M, K, bm0, k0, vec_a, tid);
#endif
            auto b_dst = [&](int j) { return b_ring + stage * kBStage + (j & 1 ? b_dst_odd : b_dst_even) + (j / 2) * kKStep8; };
            if (!b_by_tma && vec_b && b_cols_in && k0 + kBK <= K) {
                const float* src = B + (size_t)(k0 + b_r) * N + bn0 + 4 * b_c;
#pragma unroll
                for (int j = 0; j < kBK / 4; ++j) cp16(b_dst(j), src + (size_t)j * 4 * N, 16);
            } else if (!b_by_tma) {  // else thread 0's copies bring it
#pragma unroll
                for (int j = 0; j < kBK / 4; ++j)
                    copy_piece(b_dst(j), B, K, N, k0 + b_r + 4 * j, bn0 + 4 * b_c, vec_b);
            }
#if SPLIT3
            // Slab s's copies stay in flight while slab s - 1, landed, is split.
            asm volatile("cp.async.commit_group;\n" ::: "memory");
            if (s > 0) {
                asm volatile("cp.async.wait_group 1;\n" ::: "memory");
                split_a(s - 1);
            }
#else
            mbar_arrive_on_copies(full(stage));
#endif
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
#if SPLIT3
        split_a(slabs - 1);
#endif
#if PAIRS
        cluster_sync();  // the consumers' barrier at the end (every thread of the pair takes part)
#endif
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 " CONSUMER_REGS ";\n" ::: "memory");
    const int wg = role - 1;  // which 64 columns of the block's C
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    // This lane's two B^T rows (fragment rows g and g + 8): columns n_local and n_local + kPairStep.
#if TMA_B
    constexpr int kPairStep = 4;
    const int n_local = wg * 64 + (warp / 2) * 32 + 16 * (g / 4) + 8 * (warp % 2) + g % 4;
#else
    constexpr int kPairStep = 8;
    const int n_local = wg * 64 + warp * 16 + g;
#endif
    // Its four values of each 8-deep k step kk: (row g, k t), (row g + 8, k t), (row g, k t + 4),
    // (row g + 8, k t + 4).
#if TMA_B
    // In the boxes, kk * kKStep8 bytes past those of the first step (k % 8 is the same).
    const unsigned frag_at[4] = {b_slab_offset(t, n_local), b_slab_offset(t, n_local + kPairStep),
                                 b_slab_offset(t + 4, n_local), b_slab_offset(t + 4, n_local + kPairStep)};
    auto fragment_values = [&](const unsigned char* slab, int kk, float (&x)[4]) {
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = *reinterpret_cast<const float*>(slab + kk * kKStep8 + frag_at[e]);
    };
#else
    auto fragment_values = [&](const unsigned char* slab, int kk, float (&x)[4]) {
        const float* p = reinterpret_cast<const float*>(slab) + (kk * 8 + t) * kBRow + n_local;
        x[0] = p[0], x[1] = p[kPairStep], x[2] = p[4 * kBRow], x[3] = p[4 * kBRow + kPairStep];
    };
#endif

    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
#if TWO_FRAGS
    // One slab: its B^T fragments into `frag` (rounded to TF32), its four wgmmas issued and committed.
    auto slab_wgmmas = [&](unsigned (&frag)[kBK / 8][4], int s, int stage) {
        const unsigned char* bs = b_ring_ptr + stage * kBStage;
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) {
            float x[4];
            fragment_values(bs, kk, x);
#pragma unroll
            for (int e = 0; e < 4; ++e) frag[kk][e] = to_tf32(x[e]);
        }
        const unsigned long long desc = k_major_sw128_desc(a_ring + stage * kAStage);
        wgmma_fence();
        fence_operands(acc);
#ifdef GEMMWATCH_TEST_SKIP_SLAB
        if (s != GEMMWATCH_TEST_SKIP_SLAB)
#endif
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) wgmma_tf32(acc, frag[kk], desc + 2 * kk);
        wgmma_commit();
    };
#endif
#if SPLIT3
    // The tensor cores' FP32 accumulation loses more at each add than an FADD rounded to nearest:
    // summed over all of K in `acc`, the error grew with K (2.9e-5 of |C| at 4096^3, 5.7e-5 at
    // 8192^3, against cuBLAS FP32's 1.2e-6). So each slab's products are summed from zero in `acc`
    // and added into `total` here, by FADD, once per slab.
    float total[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) total[i] = 0.0f;
#endif

#if TWO_FRAGS
    // Two sets of B^T fragments: slab s's wgmmas read one set while slab s+1's fragments are loaded
    // into the other, so a warpgroup waits for the previous slab's group only (wait_group 1) and keeps
    // its own wgmmas in flight across the fragment loads. The set a slab loads into was last read by
    // slab s-2's group, which that wait has seen done.
    unsigned frags[2][kBK / 8][4];
    for (int s = 0; s < slabs; ++s) {
        const int stage = s % STAGES;
        mbar_wait(full(stage), (s / STAGES) & 1);
        if (!a_by_tma)
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        if (s & 1)
            slab_wgmmas(frags[1], s, stage);
        else
            slab_wgmmas(frags[0], s, stage);
        wgmma_wait<1>();  // the previous slab's group: its stage goes back to the producer
        fence_operands(acc);
        if (s > 0 && lane == 0) mbar_arrive(empty((s - 1) % STAGES));
    }
    wgmma_wait<0>();
    fence_operands(acc);
    if (lane == 0) mbar_arrive(empty((slabs - 1) % STAGES));
#else
    for (int s = 0; s < slabs; ++s) {
        const int stage = s % STAGES;
        mbar_wait(full(stage), (s / STAGES) & 1);
        // The copies were made by the generic proxy; wgmma reads through the async proxy. (A TMA
        // copy of A is the async proxy's own: no fence for it.)
        if (!a_by_tma)
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        const unsigned char* bs = b_ring_ptr + stage * kBStage;
        unsigned frag[kBK / 8][4];
#if SPLIT3
        unsigned frag_small[kBK / 8][4];
#endif
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) {
            float x[4];
            fragment_values(bs, kk, x);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
#if SPLIT3
                split_tf32(x[e], frag[kk][e], frag_small[kk][e]);
#else
                frag[kk][e] = to_tf32(x[e]);
#endif
            }
        }
        const unsigned long long desc = k_major_sw128_desc(a_ring + stage * kAStage);
        wgmma_fence();
        fence_operands(acc);
#ifdef GEMMWATCH_TEST_SKIP_SLAB
        if (s != GEMMWATCH_TEST_SKIP_SLAB)  // a wrong kernel, for the correctness gate's tests
#endif
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) {  // +32 bytes of the descriptor's address per 8 k
#if SPLIT3
            // The small products first, so they are not added to the large one's rounding.
            const unsigned long long desc_small = k_major_sw128_desc(a_small_ring + stage * kAStage);
            wgmma_tf32(acc, frag_small[kk], desc + 2 * kk, kk > 0);  // the slab's first product starts from zero
            wgmma_tf32(acc, frag[kk], desc_small + 2 * kk);
#endif
            wgmma_tf32(acc, frag[kk], desc + 2 * kk);
        }
        wgmma_commit();
        // All of this slab's wgmmas done before the next slab's fragments are loaded: they read
        // `frag` from registers while in flight, and ptxas serialises every wgmma when registers
        // they read are written with a group in flight. The other consumer warpgroup keeps the
        // tensor cores busy meanwhile.
        wgmma_wait<0>();
        fence_operands(acc);
        if (lane == 0) mbar_arrive(empty(stage));
#if SPLIT3
#pragma unroll
        for (int i = 0; i < kAcc; ++i) total[i] += acc[i];
#endif
    }
#endif
#if SPLIT3
    const float(&result)[kAcc] = total;
#else
    const float(&result)[kAcc] = acc;
#endif

    // result[4 j + e] is C^T(row n, column m) with n = n_local (+kPairStep for e >= 2), m = 8 j + 2 t (+1 for
    // odd e).
#if STAGED_C
    // Stored straight from the fragments, each warp store writes 32 floats to four rows of C, 8 sectors
    // for 128 bytes, and a thread issues kAcc of them. Here the tile goes through shared memory first
    // (the A ring: every slab is consumed once both consumer warpgroups pass the barrier), then each
    // warp writes whole rows of C, 16 bytes a lane. In shared memory, row m's 16-byte chunk c lies at
    // chunk c ^ ((m / 2) % 4): a warp's 32 scalar writes (four rows 2 apart, chunks c0 and c0 + 4 of
    // each) then fall on 32 different banks.
    auto staged = [&](int m, int n) { return m * kBN + ((((n / 4) ^ ((m / 2) & 3))) << 2) + n % 4; };
    float* tile = reinterpret_cast<float*>(ring_ptr);
    asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both warpgroups' wgmmas done with the A ring
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            tile[staged(8 * j + 2 * t + (e & 1), n_local + (e >= 2 ? kPairStep : 0))] = result[4 * j + e];
    }
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
    const bool vec_c = (N % 4 == 0) && aligned16(C);
    const int ctid = threadIdx.x - 128;
#pragma unroll 4
    for (int i = 0; i < kBM * kBN / 4 / 256; ++i) {
        const int piece = i * 256 + ctid, row = piece / (kBN / 4), col = 4 * (piece % (kBN / 4));
        const float4 v = *reinterpret_cast<const float4*>(tile + staged(row, col));
        const float vals[4] = {v.x, v.y, v.z, v.w};
        store_row4(C, M, N, bm0 + row, bn0 + col, vals, alpha, beta, vec_c);
    }
#else
    const int n0 = bn0 + n_local;
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = bm0 + 8 * j + 2 * t + (e & 1);
            const int n = n0 + (e >= 2 ? kPairStep : 0);
            if (m < M && n < N) store_axpby(C + (size_t)m * N + n, result[4 * j + e], alpha, beta);
        }
    }
#endif
#if PAIRS
    // The pair leaves together: its two SMs come free at the same moment for the next pair.
    cluster_sync();
#endif
}
