// Technique: FP8 (E4M3) on Hopper's wgmma.mma_async (sm_90a), both operands from shared memory,
// K-major as wgmma takes 8-bit types (no transposed form): A's rows hold K contiguously as A lies
// in memory; B's rows hold N contiguously, so the producer warpgroup turns each B slab into Bt[n][k].
// Of 384 threads, warpgroup 0 copies each slab of A (128 rows x 128 k, in the 128-byte swizzle) and
// of B (128 k-rows x 128 n, as it lies) by cp.async into a STAGES-deep ring; one slab behind, it
// turns the landed B slab 4 x 4 bytes at a time (byte permutes) into the swizzled Bt slab and
// announces both. Warpgroups 1 and 2 each own 64 rows of the block's 128 x 128 tile of C: four
// m64n128k32 a slab.
// The FP8 accumulate caveat: the tensor cores add FP8 products into FP32 with fewer bits than an
// FADD, and the error grows with K. So each slab's products are summed from zero (scale-d 0 on the
// slab's first wgmma) and added into an FP32 total by FADD once a slab (128 of K).
// Why faster than fp8_mma_sync: wgmma is the H100's FP8 path at full rate; mma.sync is not, and
// there every warp turned B's bytes itself beside its own mma.sync instructions.
// The per-tensor scales reach the kernel folded into alpha (core/description/precision.py). C in BF16
// (OUTPUT_FP32=1: FP32). For the correctness gate's tests: GEMMWATCH_TEST_SKIP_SLAB leaves out
// k = 32..63; GEMMWATCH_ROUND_TOWARD_ZERO rounds a BF16 C toward zero (half.cuh).
// Seed: Past the seeds; builds on fp8_mma_sync (B's byte permutes) and half_wgmma_ss (the ring).
// Tunables: -DSTAGES (ring depth), -DGROUP_M (grouped rasterisation).
#ifndef INPUT_BF16
#define INPUT_BF16 1  // half.cuh's types: C is BF16 (the FP8 kernels' "input" output type)
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

#include <cuda_fp8.h>

#include "common.cuh"
#include "half.cuh"
#include "wgmma.cuh"

namespace f8wg {

constexpr int kBM = 128;                  // rows of C per block: 2 consumer warpgroups x wgmma M 64
constexpr int kBN = 128;                  // columns of C per block: wgmma N
constexpr int kBK = 128;                  // k per slab: one 128-byte swizzle row of 8-bit elements
constexpr int kRawPitch = kBN;            // bytes per raw B row (read 16 bytes at a time: no conflicts)
constexpr int kAStage = kBM * kBK;        // bytes of one A slab
constexpr int kBtStage = kBN * kBK;       // bytes of one Bt slab
constexpr int kRawStage = kBK * kRawPitch;
constexpr int kThreads = 384;
constexpr int kAcc = kBN / 2;             // FP32 accumulators per consumer thread (and as many in the total)
// Dynamic shared memory: the ring (A, Bt, raw B per stage), 2 mbarriers per stage, up to 1 KiB to align.
constexpr int kSmemBytes = STAGES * (kAStage + kBtStage + kRawStage) + 16 * STAGES + 1024;

static_assert(STAGES >= 3, "the producer works one slab behind its copies: three slabs at least");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

}  // namespace f8wg

// One block per SM: the ring takes most of shared memory. setmaxnreg moves registers from the
// producer (120: at 56 its copies' addresses and the turn spilled) to the consumers (192: 64
// accumulators and a 64-float total), and asks no more than is given back: 128 x (168 - 120) =
// 256 x (192 - 168).
extern "C" __global__ void __launch_bounds__(f8wg::kThreads, 1)
gemm_fp8_wgmma(int M, int N, int K, float alpha, const __nv_fp8_e4m3* __restrict__ A8,
               const __nv_fp8_e4m3* __restrict__ B8, float beta, out_t* __restrict__ C) {
    using namespace f8wg;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    const unsigned char* A = reinterpret_cast<const unsigned char*>(A8);
    const unsigned char* B = reinterpret_cast<const unsigned char*>(B8);
    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                                  // STAGES A slabs
    const unsigned bt_ring = a_ring + STAGES * kAStage;            // STAGES Bt slabs
    const unsigned raw_ring = bt_ring + STAGES * kBtStage;         // STAGES raw B slabs
    const unsigned bars = raw_ring + STAGES * kRawStage;          // full[STAGES], then empty[STAGES]
    unsigned char* a_ring_ptr = ring_ptr;
    unsigned char* raw_ring_ptr = ring_ptr + (raw_ring - ring);
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    // full: each producer thread, once its part of Bt is written.
    if (threadIdx.x == 0) mbar_init_ring(bars, STAGES, 128);
    __syncthreads();

    int tile_m, tile_n;
    raster_grouped(GROUP_M, tile_m, tile_n);
    const int bm0 = tile_m * kBM, bn0 = tile_n * kBN;
    const int slabs = (K + kBK - 1) / kBK;  // >= 1
    const int role = threadIdx.x / 128;     // 0: producer, 1 and 2: consumers

    if (role == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 120;\n" ::: "memory");
        const int tid = threadIdx.x;
        const bool vec_a = K % 16 == 0 && aligned16(A), vec_b = N % 16 == 0 && aligned16(B);
        // A piece: 16-byte chunk a_c (16 k) of rows a_r + 16 j, stored at chunk a_c ^ (row % 8) of
        // its 128-byte row (the same for every j). Raw B piece: chunk b_c (16 n) of k-rows b_r + 16 j.
        const int a_c = tid & 7, a_r = tid >> 3;
        const int a_dst0 = a_r * kBK + ((a_c ^ (a_r & 7)) * 16);
        const int b_c = tid & 7, b_r = tid >> 3;

        auto issue = [&](int s) {  // slab s's copies into its stage
            const int stage = s % STAGES, k0 = s * kBK;
            const unsigned a_s = a_ring + stage * kAStage;
            unsigned char* a_p = a_ring_ptr + stage * kAStage;
#pragma unroll
            for (int j = 0; j < kBM / 16; ++j)
                copy16_bytes(a_s + a_dst0 + j * 16 * kBK, a_p + a_dst0 + j * 16 * kBK, A, M, K, bm0 + a_r + 16 * j,
                             k0 + 16 * a_c, vec_a);
            const unsigned r_s = raw_ring + stage * kRawStage;
            unsigned char* r_p = raw_ring_ptr + stage * kRawStage;
#pragma unroll
            for (int j = 0; j < kBK / 16; ++j) {
                const int r = b_r + 16 * j;
                copy16_bytes(r_s + r * kRawPitch + 16 * b_c, r_p + r * kRawPitch + 16 * b_c, B, K, N, k0 + r,
                             bn0 + 16 * b_c, vec_b);
            }
            asm volatile("cp.async.commit_group;\n" ::: "memory");
        };
        // The turn: this thread takes k-rows 8 t_k .. 8 t_k + 7 of the raw slab's 16-byte chunk t_n
        // (columns 16 t_n .. 16 t_n + 15), four rows at a time, and writes 4 k of each column into Bt.
        // Bt's rows repeat their swizzle every 8 rows, and the 8 threads of a t_k hold columns 16
        // apart: stored in the same order, their words would all fall in the same banks. So each
        // thread stores its columns rotated by t_n (word pairs swapped by bit 2, bytes turned by
        // bits 0-1 before the 4 x 4 turn): at every step the 8 threads write 8 different n % 8.
        const int t_n = tid & 7, t_k = tid >> 3;  // 8 x 16 threads: 128 columns x 128 k-rows
        const int rot = t_n & 3;
        const bool swap = (t_n & 4) != 0;
        const unsigned rot_sel = rot | (((rot + 1) & 3) << 4) | (((rot + 2) & 3) << 8) | (((rot + 3) & 3) << 12);
        auto turn = [&](int s) {  // slab s's raw B, landed, into Bt; then the slab is announced
            const int stage = s % STAGES;
            const unsigned r_s = raw_ring + stage * kRawStage + (8 * t_k) * kRawPitch + 16 * t_n;
            const unsigned bt_s = bt_ring + stage * kBtStage;
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // k-rows 8 t_k + 4 h .. + 3
                unsigned v[4][4];
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v[i][0]), "=r"(v[i][1]), "=r"(v[i][2]), "=r"(v[i][3])
                                 : "r"(r_s + (4 * h + i) * kRawPitch) : "memory");
#pragma unroll
                for (int q = 0; q < 4; ++q) {  // columns 4 (q ^ swap) .. + 3 of the chunk
                    unsigned w[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) w[i] = __byte_perm(swap ? v[i][q ^ 1] : v[i][q], 0, rot_sel);
                    // The 4 x 4 turn: o[c] holds k-rows 0..3 of column (c + rot) % 4 of the word.
                    const unsigned t0 = __byte_perm(w[0], w[1], 0x5140), t1 = __byte_perm(w[2], w[3], 0x5140);
                    const unsigned t2 = __byte_perm(w[0], w[1], 0x7362), t3 = __byte_perm(w[2], w[3], 0x7362);
                    const unsigned o[4] = {__byte_perm(t0, t1, 0x5410), __byte_perm(t0, t1, 0x7632),
                                           __byte_perm(t2, t3, 0x5410), __byte_perm(t2, t3, 0x7632)};
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        // Bt row n (128 bytes: 128 k): k 8 t_k + 4 h .. + 3 lie in chunk t_k / 2,
                        // swizzled to (t_k / 2) ^ (n % 8), at byte 8 (t_k % 2) + 4 h of it.
                        const int n = 16 * t_n + 4 * (q ^ (swap ? 1 : 0)) + ((c + rot) & 3);
                        const unsigned at = bt_s + n * kBK + ((((t_k >> 1) ^ (n & 7)) * 16) | ((t_k & 1) * 8)) + 4 * h;
                        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(o[c]) : "memory");
                    }
                }
            }
            // The consumers' wgmmas read Bt, and A's cp.async pieces, through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            mbar_arrive(full(stage));
        };

        for (int s = 0; s < slabs; ++s) {
            if (s >= STAGES) mbar_wait(empty(s % STAGES), ((s / STAGES) + 1) & 1);
            issue(s);
            if (s > 0) {
                // Slab s - 1's copies (this thread's) have landed; the barrier makes every producer
                // thread's landed before any reads them.
                asm volatile("cp.async.wait_group 1;\n" ::: "memory");
                asm volatile("bar.sync 1, 128;\n" ::: "memory");
                turn(s - 1);
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        turn(slabs - 1);
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 192;\n" ::: "memory");
    const int wg = role - 1;  // which 64 rows of the block's C
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;

    float acc[kAcc], total[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) total[i] = 0.0f;

    for (int s = 0; s < slabs; ++s) {
        const int stage = s % STAGES;
        mbar_wait(full(stage), (s / STAGES) & 1);
        const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kAStage + wg * 64 * kBK);
        const unsigned long long desc_b = k_major_sw128_desc(bt_ring + stage * kBtStage);
        wgmma_fence();
        fence_operands(acc);
#pragma unroll
        for (int kk = 0; kk < kBK / 32; ++kk) {  // +32 bytes of each descriptor's address per 32 k
#ifdef GEMMWATCH_TEST_SKIP_SLAB
            if (s == 0 && kk == 1) continue;  // a wrong kernel (k = 32..63 left out), for the gate's tests
#endif
            wgmma_ss_e4m3(acc, desc_a + 2 * kk, desc_b + 2 * kk, kk > 0);
        }
        wgmma_commit();
        wgmma_wait<0>();
        fence_operands(acc);
        if (lane == 0) mbar_arrive(empty(stage));
#pragma unroll
        for (int i = 0; i < kAcc; ++i) total[i] += acc[i];
    }

    // total[4 j + e] is C(row m, column n) with m = 16 warp + lane / 4 (+8 for e >= 2) in this
    // warpgroup's 64 rows, n = 8 j + 2 (lane % 4) (+1 for odd e).
    const int m0 = bm0 + wg * 64 + warp * 16 + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = m0 + (e >= 2 ? 8 : 0);
            const int n = bn0 + 8 * j + 2 * t + (e & 1);
            if (m < M && n < N) store_half_axpby(C + (size_t)m * N + n, total[4 * j + e], alpha, beta);
        }
    }
}
