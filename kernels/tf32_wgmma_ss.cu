// Technique: tf32_wgmma with B^T in shared memory as well, so no operand passes through registers
// and a slab's wgmmas stay in flight while the next slab's are issued (wait_group 1), as in
// half_wgmma_ss. wgmma reads TF32 from shared memory only K-major, and B is N-major in memory, so
// the producer transposes B on the way in: 4-byte cp.async copies, each lane of a warp taking one
// of 8 columns and 4 k of B, so a warp's 32 copies land in 32 different banks of the K-major,
// 128-byte-swizzled B^T slab and read 4 full 32-byte sectors of global memory.
// Block: 384 threads, warpgroup 0 fills a STAGES-deep ring of (256 x 32 A, 128 x 32 B^T) slabs;
// warpgroups 1 and 2 each own 64 columns of the block's 256 x 128 tile of C (C^T = B^T A^T, one
// m64n256k8 per 8 k, both operands through descriptors).
// Why faster than tf32_wgmma: there every slab ended in wait_group 0 (B^T's fragments in registers
// had to be consumed before the next were loaded), so each warpgroup's tensor work stopped at
// every slab boundary, and each consumer thread loaded 16 B values per slab from shared memory.
// Seed: Past the seeds; builds on tf32_wgmma, half_wgmma_ss and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DSTAGES (ring depth), -DGROUP_M (grouped rasterisation).
#include "common.cuh"
#include "tf32.cuh"
#include "wgmma.cuh"

#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

namespace tf32ss {

constexpr int kBM = 256;                // rows of C per block = wgmma N
constexpr int kBN = 128;                // columns of C per block: 2 consumer warpgroups x wgmma M 64
constexpr int kBK = 32;                 // k per slab: one 128-byte swizzle row of each slab
constexpr int kAStage = kBM * kBK * 4;  // bytes of one A slab
constexpr int kBStage = kBN * kBK * 4;  // bytes of one B^T slab: kBN rows of 128 bytes
constexpr int kThreads = 384;
constexpr int kAcc = kBM / 2;           // FP32 accumulators per consumer thread
// Dynamic shared memory: the ring, 2 mbarriers per stage, and up to 1 KiB to align the ring.
constexpr int kSmemBytes = STAGES * (kAStage + kBStage) + 16 * STAGES + 1024;

static_assert(STAGES >= 2, "a ring needs two slabs at least");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

}  // namespace tf32ss

// One block per SM. setmaxnreg moves registers from the producer (56: its 32 copies' addresses)
// to the consumers (224: 128 accumulators, no fragments).
extern "C" __global__ void __launch_bounds__(tf32ss::kThreads, 1)
sgemm_tf32_wgmma_ss(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                    float beta, float* __restrict__ C) {
    using namespace tf32ss;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    const unsigned a_ring = ring;                      // STAGES A slabs
    const unsigned b_ring = ring + STAGES * kAStage;   // STAGES B^T slabs
    const unsigned bars = b_ring + STAGES * kBStage;   // full[STAGES], then empty[STAGES]
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full(s), 128);  // each producer thread's copies
            mbar_init(empty(s), 8);   // each consumer warp, after its wgmmas on the slab are done
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    int tile_m, tile_n;
    raster_grouped(GROUP_M, tile_m, tile_n);
    const int bm0 = tile_m * kBM, bn0 = tile_n * kBN;
    const int slabs = (K + kBK - 1) / kBK;  // >= 1
    const int role = threadIdx.x / 128;     // 0: producer, 1 and 2: consumers

    if (role == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
        const int tid = threadIdx.x;
        const bool vec_a = (K % 4 == 0) && aligned16(A);
        // B^T piece: lane (nn, kk) = (lane % 8, lane / 8) of warp w copies B[k0 + 4 jk + kk][bn0 +
        // 32 w + 8 jn + nn] for jk < 8, jn < 4, to row n = 32 w + 8 jn + nn of the B^T slab, chunk
        // jk ^ (n % 8) = jk ^ nn, word kk: bank 4 (jk ^ nn) + kk, a different one for each lane.
        const int nn = tid & 7, kk = (tid >> 3) & 3, w = tid >> 5;
        const int n_first = 32 * w + nn;
        const bool b_cols_in = bn0 + kBN <= N;

        for (int s = 0; s < slabs; ++s) {
            const int stage = s % STAGES;
            if (s >= STAGES) mbar_wait(empty(stage), ((s / STAGES) + 1) & 1);
            const int k0 = s * kBK;
            copy_a_slab<kBM>(a_ring + stage * kAStage, A, M, K, bm0, k0, vec_a, tid);
            const unsigned b_dst = b_ring + stage * kBStage + n_first * 128 + kk * 4;
            if (b_cols_in && k0 + kBK <= K) {
                const float* src = B + (size_t)(k0 + kk) * N + bn0 + n_first;
#pragma unroll
                for (int jk = 0; jk < kBK / 4; ++jk)
#pragma unroll
                    for (int jn = 0; jn < 4; ++jn)
                        cp4(b_dst + jn * 8 * 128 + ((jk ^ nn) * 16), src + (size_t)jk * 4 * N + 8 * jn, 4);
            } else {
#pragma unroll 1
                for (int jk = 0; jk < kBK / 4; ++jk) {
                    const int k = k0 + 4 * jk + kk;
#pragma unroll
                    for (int jn = 0; jn < 4; ++jn) {
                        const int n = bn0 + n_first + 8 * jn;
                        const bool in = k < K && n < N;
                        cp4(b_dst + jn * 8 * 128 + ((jk ^ nn) * 16), in ? B + (size_t)k * N + n : B, in ? 4 : 0);
                    }
                }
            }
            mbar_arrive_on_copies(full(stage));
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    const int wg = role - 1;  // which 64 columns of the block's C
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;

    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

    for (int s = 0; s < slabs; ++s) {
        const int stage = s % STAGES;
        mbar_wait(full(stage), (s / STAGES) & 1);
        // The copies were made by the generic proxy; wgmma reads through the async proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        // wgmma's A: this warpgroup's 64 rows of B^T; its B: the A slab. +32 bytes per 8 k.
        const unsigned long long desc_bt = k_major_sw128_desc(b_ring + stage * kBStage + wg * 64 * 128);
        const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kAStage);
        wgmma_fence();
        fence_operands(acc);
#pragma unroll
        for (int k8 = 0; k8 < kBK / 8; ++k8) wgmma_ss_tf32(acc, desc_bt + 2 * k8, desc_a + 2 * k8);
        wgmma_commit();
        // The previous slab's group is done once at most this one is pending: its slab goes back
        // to the producer while this one's wgmmas run.
        wgmma_wait<1>();
        fence_operands(acc);
        if (s > 0 && lane == 0) mbar_arrive(empty((s - 1) % STAGES));
    }
    wgmma_wait<0>();
    fence_operands(acc);

    // acc[4 j + e] is C^T(row n, column m) with n = 64 wg + 16 warp + lane / 4 (+8 for e >= 2),
    // m = 8 j + 2 (lane % 4) (+1 for odd e).
    const int n0 = bn0 + wg * 64 + warp * 16 + (lane >> 2), t = lane & 3;
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int m = bm0 + 8 * j + 2 * t + (e & 1);
            const int n = n0 + (e >= 2 ? 8 : 0);
            if (m < M && n < N) store_axpby(C + (size_t)m * N + n, acc[4 * j + e], alpha, beta);
        }
    }
}
