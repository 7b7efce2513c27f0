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

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    }
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives on bar once every cp.async this thread issued before has landed (the count was set at init).
__device__ __forceinline__ void mbar_arrive_on_copies(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// wgmma shared-memory descriptor of a K-major operand in the 128-byte swizzle: start address,
// leading offset unused (1), stride 1024 bytes between groups of 8 rows, layout type 1 (128B).
__device__ __forceinline__ unsigned long long k_major_sw128_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d[0 .. 63] += a (64 x 8, registers) * B (8 x 128, shared memory through desc_b).
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{" 
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// d[0 .. 127] += a (64 x 8, registers) * B (8 x 256, shared memory through desc_b).
__device__ __forceinline__ void wgmma_m64n256k8(float (&d)[128], const unsigned (&a)[4], unsigned long long desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{" 
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, {%128, %129, %130, %131}, %132, p, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// Pins the accumulators in place around wgmma and its waits: the compiler must not move their
// reads or writes across the asynchronous instructions.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_step(float (&d)[kAcc], const unsigned (&a)[4], unsigned long long desc) {
#if BM == 256
    wgmma_m64n256k8(d, a, desc);
#else
    wgmma_m64n128k8(d, a, desc);
#endif
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
        for (int kk = 0; kk < kBK / 8; ++kk) wgmma_step(acc, frag[kk], desc + 2 * kk);  // +32 bytes per 8 k
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
