// Technique: warp tiling, on top of everything before it (128x128x BK block tile, float4
// global loads prefetched into registers a slab ahead, double-buffered shared memory with one
// barrier per slab, A transposed with the XOR swizzle, fragments read one k-step ahead). The
// 256 threads form 8 warps in a 2 x 4 grid, each warp owning a 64 x 32 sub-tile of C; inside a
// warp the 32 lanes form an 8 x 4 grid and each lane owns 8x8 outputs as 2x2 quadrants of 4x4
// (rows wm*64 + {0, 32} + tm*4, columns wn*32 + {0, 16} + tn*4).
// Why faster than the 16x16-thread layout of smem_swizzle_xor: there a warp is 2 thread-rows by
// 16 thread-columns, a 16 x 128 strip of C, so per k-step it pulls 16 distinct A floats but 128
// B floats out of shared memory (2 + 4 wavefronts of LDS.128). A 64 x 32 warp tile is far more
// square: 64 A floats and 32 B floats, each of the 4 LDS.128 instructions one conflict-free
// wavefront (A: 8 distinct float4 in one 8-chunk swizzle group; B: 4 distinct float4). Shared
// traffic per FMA falls by a third, which matters because at 8x8 per thread the kernel is close
// to the LDS bandwidth limit; the warp's register working set is unchanged.
// Seed: none of the seed documents covers warp tiling (Past the seeds); it builds on the ladder
// of 001_adac3a76413eb491.txt and the swizzle of 003_6ba4e7f2604c6f00.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).
// Code: only the thread -> sub-tile map is this file's; the pipeline and the swizzled A layout
// are tile128::gemm_double_buffered and tile128::XorSwizzledColumns (tile128.cuh).

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
