// Technique: Hopper's wgmma.mma_async (inline PTX, sm_90a: compute capability 9.0 only) fed by a
// warp-specialised cp.async pipeline. Of 384 threads, warpgroup 0 fills a STAGES-deep mbarrier ring
// and warpgroups 1 and 2 each own 64 columns of the block's BM x 128 tile of C. wgmma reads TF32
// from shared memory only K-major, so the block computes C^T = B^T A^T: A is the shared-memory
// operand (128-byte swizzle), B^T is loaded into registers and rounded to TF32.
// Why faster than tf32_mma_sync: one wgmma does 64 x BM x 8 multiply-adds for a warpgroup, A goes
// from shared memory to the tensor cores without registers, and the copies are asynchronous, issued
// by a warpgroup that does nothing else, with 3-4 slabs in flight instead of one.
// Seed: Past the seeds; builds on tf32_mma_sync and the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DBM (128 or 256: rows of C per block, wgmma's N), -DSTAGES (ring depth), -DGROUP_M.
#include "common.cuh"
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

namespace tf32wg {

constexpr int kBM = BM;                 // rows of C per block = wgmma N
constexpr int kBN = 128;                // columns of C per block: 2 consumer warpgroups x wgmma M 64
constexpr int kBK = 32;                 // k per slab: one 128-byte swizzle row of the A slab
constexpr int kBRow = kBN + 8;          // floats per padded B row in shared memory
constexpr int kAStage = kBM * kBK * 4;  // bytes of one A slab (a multiple of 1024)
constexpr int kBStage = kBK * kBRow * 4;
constexpr int kThreads = 384;
constexpr int kAcc = kBM / 2;           // FP32 accumulators per consumer thread
// Dynamic shared memory: the ring, 2 mbarriers per stage, and up to 1 KiB to align the ring.
constexpr int kSmemBytes = STAGES * (kAStage + kBStage) + 16 * STAGES + 1024;

static_assert(BM == 128 || BM == 256, "BM is wgmma's N: 128 or 256 here");
static_assert(STAGES >= 2, "a ring needs two slabs at least");
#ifdef SMEM_BYTES
static_assert(SMEM_BYTES == kSmemBytes, "the description's SMEM_BYTES must be this kernel's kSmemBytes");
#endif

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}

// 16 bytes global -> shared; src_bytes 0 writes zeros (src is not read).
__device__ __forceinline__ void cp16(unsigned dst, const float* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp4(unsigned dst, const float* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// P[r][c .. c+3] of a rows x cols row-major matrix into 16 bytes of shared memory, zeros outside.
// vec: rows are 16-byte aligned (cols % 4 == 0, aligned base), so a piece is all in or all out.
__device__ __forceinline__ void copy_piece(unsigned dst, const float* P, int rows, int cols, int r, int c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols;
        cp16(dst, in ? P + (size_t)r * cols + c : P, in ? 16 : 0);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const bool in = r < rows && c + e < cols;
            cp4(dst + 4 * e, in ? P + (size_t)r * cols + c + e : P, in ? 4 : 0);
        }
    }
}

}  // namespace tf32wg

// One block per SM: the ring takes most of shared memory. 384 threads at launch give each 168
// registers; setmaxnreg then moves registers from the producer (40) to the consumers (232).
extern "C" __global__ void __launch_bounds__(tf32wg::kThreads, 1)
sgemm_tf32_wgmma(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
                 float beta, float* __restrict__ C) {
    using namespace tf32wg;
    extern __shared__ __align__(1024) unsigned char smem_raw[];

    unsigned dyn_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_bytes));
    if (dyn_bytes < (unsigned)kSmemBytes) return;  // launched without its shared memory: C stays unwritten

    // The ring starts at the first 1024-byte boundary (the swizzle repeats every 1024 bytes).
    const unsigned raw = smem_addr(smem_raw);
    const unsigned ring = (raw + 1023u) & ~1023u;
    unsigned char* ring_ptr = smem_raw + (ring - raw);
    const unsigned a_ring = ring;                         // STAGES A slabs
    const unsigned b_ring = ring + STAGES * kAStage;      // STAGES B slabs
    const unsigned bars = b_ring + STAGES * kBStage;      // full[STAGES], then empty[STAGES]
    const float* b_ring_ptr = reinterpret_cast<const float*>(ring_ptr + STAGES * kAStage);
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
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        const int tid = threadIdx.x;
        const bool vec_a = (K % 4 == 0) && aligned16(A);
        const bool vec_b = (N % 4 == 0) && aligned16(B);
        // A piece: chunk a_c (4 k) of rows a_r + 16 j; stored at chunk a_c ^ (row % 8), and
        // (a_r + 16 j) % 8 == a_r % 8, so the swizzled column is the same for all j.
        const int a_c = tid & 7, a_r = tid >> 3;
        const unsigned a_dst0 = a_r * 128 + ((a_c ^ (a_r & 7)) * 16);
        // B piece: chunk b_c (4 n) of k-rows b_r + 4 j.
        const int b_c = tid & 31, b_r = tid >> 5;
        const unsigned b_dst0 = b_r * kBRow * 4 + b_c * 16;
        const bool a_rows_in = bm0 + kBM <= M, b_cols_in = bn0 + kBN <= N;

        for (int s = 0; s < slabs; ++s) {
            const int stage = s % STAGES;
            if (s >= STAGES) mbar_wait(empty(stage), ((s / STAGES) + 1) & 1);
            const int k0 = s * kBK;
            const unsigned a_dst = a_ring + stage * kAStage + a_dst0;
            const unsigned b_dst = b_ring + stage * kBStage + b_dst0;
            const bool k_in = k0 + kBK <= K;
            if (vec_a && a_rows_in && k_in) {
                const float* src = A + (size_t)(bm0 + a_r) * K + k0 + 4 * a_c;
#pragma unroll
                for (int j = 0; j < kBM / 16; ++j) cp16(a_dst + j * 16 * 128, src + (size_t)j * 16 * K, 16);
            } else {
#pragma unroll
                for (int j = 0; j < kBM / 16; ++j)
                    copy_piece(a_dst + j * 16 * 128, A, M, K, bm0 + a_r + 16 * j, k0 + 4 * a_c, vec_a);
            }
            if (vec_b && b_cols_in && k_in) {
                const float* src = B + (size_t)(k0 + b_r) * N + bn0 + 4 * b_c;
#pragma unroll
                for (int j = 0; j < kBK / 4; ++j) cp16(b_dst + j * 4 * kBRow * 4, src + (size_t)j * 4 * N, 16);
            } else {
#pragma unroll
                for (int j = 0; j < kBK / 4; ++j)
                    copy_piece(b_dst + j * 4 * kBRow * 4, B, K, N, k0 + b_r + 4 * j, bn0 + 4 * b_c, vec_b);
            }
            mbar_arrive_on_copies(full(stage));
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");  // no thread leaves with copies in flight
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int wg = role - 1;  // which 64 columns of the block's C
    const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int n_local = wg * 64 + warp * 16 + g;  // this lane's B^T rows: n_local and n_local + 8

    float acc[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

    for (int s = 0; s < slabs; ++s) {
        const int stage = s % STAGES;
        mbar_wait(full(stage), (s / STAGES) & 1);
        // The copies were made by the generic proxy; wgmma reads through the async proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        const float* bs = b_ring_ptr + stage * (kBStage / 4);
        unsigned frag[kBK / 8][4];
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) {
            const float* p = bs + (kk * 8 + t) * kBRow + n_local;
            frag[kk][0] = to_tf32(p[0]);              // (row g,     k t)
            frag[kk][1] = to_tf32(p[8]);              // (row g + 8, k t)
            frag[kk][2] = to_tf32(p[4 * kBRow]);      // (row g,     k t + 4)
            frag[kk][3] = to_tf32(p[4 * kBRow + 8]);  // (row g + 8, k t + 4)
        }
        const unsigned long long desc = k_major_sw128_desc(a_ring + stage * kAStage);
        wgmma_fence();
        fence_operands(acc);
#pragma unroll
        for (int kk = 0; kk < kBK / 8; ++kk) wgmma_tf32(acc, frag[kk], desc + 2 * kk);  // +32 bytes per 8 k
        wgmma_commit();
        // All of this slab's wgmmas done before the next slab's fragments are loaded: they read
        // `frag` from registers while in flight, and ptxas serialises every wgmma when registers
        // they read are written with a group in flight. The other consumer warpgroup keeps the
        // tensor cores busy meanwhile.
        wgmma_wait<0>();
        fence_operands(acc);
        if (lane == 0) mbar_arrive(empty(stage));
    }

    // acc[4 j + e] is C^T(row n, column m) with n = n_local (+8 for e >= 2), m = 8 j + 2 t (+1 for odd e).
    const int n0 = bn0 + n_local;
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
