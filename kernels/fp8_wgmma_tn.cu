// Technique: FP8 (E4M3) on Hopper's wgmma (sm_90a) in the TN form: A row-major (M x K) and B
// column-major (stored as N rows of K, the layout of x * W^T and of every FP8 GEMM cuBLASLt runs),
// so both operands lie K-major, as wgmma takes 8-bit types, and no byte is turned on the way.
// Persistent: one block per SM walks every gridDim.x-th 128 x 128 tile of C in grouped order. Of
// 384 threads, one thread of warpgroup 0 fills a STAGES-deep ring by TMA (a slab of A, 128 rows x
// 128 k, and one of B, 128 columns x 128 k, each one box in the 128-byte swizzle, counted by the
// full barrier's expect_tx); warpgroups 1 and 2 each own 64 rows of the tile: four m64n128k32 a
// slab. The ring runs on across tiles, so the next tile's slabs load while C is stored.
// The FP8 accumulate caveat: the tensor cores add FP8 products into FP32 with fewer bits than an
// FADD, and the error grows with K. So each slab's products are summed from zero (scale-d 0 on the
// slab's first wgmma) and added into an FP32 total by FADD once a slab (128 of K). That costs a
// second set of 64 registers per thread, which is why the tile is 128 wide, not 256.
// Where the TMA cannot describe a matrix (K not a multiple of 16: a line not a multiple of 16
// bytes) the runner passes 0 for its map, and the producer warpgroup copies both operands itself,
// 16 bytes (or byte by byte) at a time into the same swizzled places, so every size still runs.
// Why faster than fp8_wgmma: there the producer copied B as it lies (N contiguous) and turned every
// slab into K-major rows with byte permutes; that turn, not the tensor cores, set the pace.
// The per-tensor scales reach the kernel folded into alpha (core/precision.py). C in BF16
// (OUTPUT_FP32=1: FP32), stored 16 bytes a lane where it can be (half.cuh's store_wgmma_rows).
// For the correctness gate's tests: GEMMWATCH_TEST_SKIP_SLAB leaves out k = 32..63;
// GEMMWATCH_ROUND_TOWARD_ZERO rounds a BF16 C toward zero (half.cuh).
// Seed: Past the seeds; builds on fp8_wgmma (the FP8 wgmma and its promotion) and
// half_wgmma_ss's persistent rung (the ring across tiles, TMA from one thread).
// Tunables: -DSTAGES (ring depth), -DGROUP_M (grouped rasterisation).
#ifndef INPUT_BF16
#define INPUT_BF16 1  // half.cuh's types: C is BF16 (the FP8 kernels' "input" output type)
#endif
#ifndef OUTPUT_FP32
#define OUTPUT_FP32 0
#endif
#ifndef STAGES
#define STAGES 6
#endif
#ifndef GROUP_M
#define GROUP_M 8
#endif

#include <cuda_fp8.h>

#include "common.cuh"
#include "half.cuh"
#include "wgmma.cuh"

namespace f8tn {

constexpr int kBM = 128;            // rows of C per tile: 2 consumer warpgroups x wgmma M 64
constexpr int kBN = 128;            // columns of C per tile: wgmma N
constexpr int kBK = 128;            // k per slab: one 128-byte swizzle row of 8-bit elements
constexpr int kSlab = kBM * kBK;    // bytes of one A slab, and of one B slab (kBN rows of 128 bytes)
constexpr int kThreads = 384;
constexpr int kAcc = kBN / 2;       // FP32 accumulators per consumer thread (and as many in the total)
// Dynamic shared memory: the ring (an A and a B slab per stage), 2 mbarriers per stage, up to 1 KiB to align.
constexpr int kSmemBytes = STAGES * 2 * kSlab + 16 * STAGES + 1024;

static_assert(kBM == kBN, "A's and B's slabs are copied alike");
static_assert(STAGES >= 2, "a ring needs two slabs at least");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

}  // namespace f8tn

// One block per SM: the ring takes most of shared memory. setmaxnreg moves registers from the
// producer (56: one thread issues the TMA copies, but at 40 the fallback's 16 copies a slab spilled
// their addresses) to the consumers (224: 64 accumulators and a 64-float total), and asks no more
// than is given back: 128 x (168 - 56) >= 256 x (224 - 168).
extern "C" __global__ void __launch_bounds__(f8tn::kThreads, 1)
gemm_fp8_wgmma_tn(int M, int N, int K, float alpha, const __nv_fp8_e4m3* __restrict__ A8,
                  const __nv_fp8_e4m3* __restrict__ B8, float beta, out_t* __restrict__ C, const void* A_map,
                  const void* B_map) {
    using namespace f8tn;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    const unsigned char* A = reinterpret_cast<const unsigned char*>(A8);
    const unsigned char* B = reinterpret_cast<const unsigned char*>(B8);  // B[k][n] at B[n K + k]
    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                        // STAGES A slabs, then STAGES B slabs
    const unsigned b_ring = ring + STAGES * kSlab;
    const unsigned bars = b_ring + STAGES * kSlab;       // full[STAGES], then empty[STAGES]
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (STAGES + s); };

    // Both maps or neither: without them the producer warpgroup copies both operands.
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
                tensormap_acquire(A_map);
                tensormap_acquire(B_map);
                for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                    int bm0, bn0;
                    tile_origin(tile, bm0, bn0);
                    for (int s = 0; s < slabs; ++s, ++it) {
                        const int stage = it % STAGES;
                        if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                        // The whole boxes' bytes, zeros past the matrices' edges included (the TMA counts them).
                        mbar_arrive_expect_tx(full(stage), 2 * kSlab);
                        tma_load_2d(a_ring + stage * kSlab, A_map, s * kBK, bm0, full(stage));
                        tma_load_2d(b_ring + stage * kSlab, B_map, s * kBK, bn0, full(stage));
                    }
                }
            }
            __syncwarp();
            return;
        }
        // A piece: 16-byte chunk c (16 k) of rows r + 16 j, stored at chunk c ^ (row % 8) of its
        // 128-byte row; (r + 16 j) % 8 == r % 8, so the swizzled chunk is the same for all j. B's
        // pieces are the same pieces of B's N rows of K.
        const int c = tid & 7, r = tid >> 3;
        const int dst0 = r * kBK + ((c ^ (r & 7)) * 16);
        const bool vec_a = K % 16 == 0 && aligned16(A), vec_b = K % 16 == 0 && aligned16(B);
        for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            int bm0, bn0;
            tile_origin(tile, bm0, bn0);
            for (int s = 0; s < slabs; ++s, ++it) {
                const int stage = it % STAGES;
                if (it >= STAGES) mbar_wait(empty(stage), ((it / STAGES) + 1) & 1);
                const int k0 = s * kBK;
                const unsigned a_s = a_ring + stage * kSlab + dst0, b_s = b_ring + stage * kSlab + dst0;
                unsigned char* a_p = ring_ptr + (a_s - ring);
                unsigned char* b_p = ring_ptr + (b_s - ring);
#pragma unroll 1  // a fallback for odd K: kept small, so that 56 registers hold it without spilling
                for (int j = 0; j < kBM / 16; ++j) {
                    copy16_bytes(a_s + j * 16 * kBK, a_p + j * 16 * kBK, A, M, K, bm0 + r + 16 * j, k0 + 16 * c, vec_a);
                    copy16_bytes(b_s + j * 16 * kBK, b_p + j * 16 * kBK, B, N, K, bn0 + r + 16 * j, k0 + 16 * c, vec_b);
                }
                if (vec_a && vec_b) {
                    mbar_arrive_on_copies(full(stage));
                } else {  // some pieces were stored synchronously: arrive (a release) once all are in
                    asm volatile("cp.async.wait_all;\n" ::: "memory");
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    mbar_arrive(full(stage));
                }
            }
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    const int wg = role - 1;  // which 64 rows of the tile
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;

    int it = 0;  // slabs this block has consumed so far, over all its tiles
    float acc[kAcc], total[kAcc];
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int bm0, bn0;
        tile_origin(tile, bm0, bn0);
#pragma unroll
        for (int i = 0; i < kAcc; ++i) total[i] = 0.0f;

        for (int s = 0; s < slabs; ++s, ++it) {
            const int stage = it % STAGES;
            mbar_wait(full(stage), (it / STAGES) & 1);
            // The fallback's copies were made by the generic proxy; wgmma reads through the async proxy.
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            const unsigned long long desc_a = k_major_sw128_desc(a_ring + stage * kSlab + wg * 64 * kBK);
            const unsigned long long desc_b = k_major_sw128_desc(b_ring + stage * kSlab);
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
            // The slab goes back to the producer (one arrival a warp) before the FADDs: it is
            // already refilling it while this warpgroup promotes and the other one's wgmmas run.
            if (lane == 0) mbar_arrive(empty(stage));
#pragma unroll
            for (int i = 0; i < kAcc; ++i) total[i] += acc[i];
        }

        // total[4 j + e] is C(row m, column n) with m = 16 warp + lane / 4 (+8 for e >= 2) in this
        // warpgroup's 64 rows, n = 8 j + 2 (lane % 4) (+1 for odd e).
        store_wgmma_rows(C, M, N, bm0 + wg * 64 + warp * 16 + (lane >> 2), bn0, total, alpha, beta, lane & 3);
    }
}
