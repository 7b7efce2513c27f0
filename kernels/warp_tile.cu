// Technique: warp tiling on smem_swizzle_xor's pipeline (128x128 x BK block tile, register-staged
// global prefetch, double-buffered shared memory, XOR-swizzled transposed A, fragments one k-step
// ahead). The 256 threads form 2 x 4 warps of 64 x 32 C sub-tiles; a warp's lanes form an 8 x 4
// grid, each lane owning 8x8 outputs as 2x2 quadrants of 4x4. Only this map is the file's own.
// Why faster than smem_swizzle_xor's 16x16 threads: a warp there covers a 16 x 128 strip of C and
// pulls 16 A + 128 B floats from shared memory per k-step; a 64 x 32 warp tile pulls 64 + 32, each
// LDS.128 one conflict-free wavefront, so shared traffic per FMA falls by a third.
// Seed: Past the seeds (no seed document covers warp tiling); builds on the ladder of
// 001_adac3a76413eb491.txt and the swizzle of 003_6ba4e7f2604c6f00.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

#define WARP_M 64  // rows of C per warp (2 warps down)
#define WARP_N 32  // columns of C per warp (4 warps across)

// At BK=8 two 256-thread blocks fit an SM in 128 registers without spilling; not at BK=16.
#define MIN_BLOCKS (BK == 8 ? 2 : 1)

extern "C" __global__ void __launch_bounds__(tile128::kThreads, MIN_BLOCKS)
sgemm_warp_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps
    const int tm = lane >> 2, tn = lane & 3;  // 8 x 4 lanes per warp
    // This lane's 8 A rows: am .. am+3 and am + 32 ..; its 8 B columns: bn .. bn+3 and bn + 16 ..
    const int am = wm * WARP_M + tm * 4;
    const int bn = wn * WARP_N + tn * 4;
    tile128::gemm_double_buffered<BK, 128, tile128::XorSwizzledColumns<BK>>(
        M, N, K, alpha, A, B, beta, C, tid, am, WARP_M / 2, bn, WARP_N / 2);
}
