// Technique: global_prefetch_double_buffer with the bank conflict of the transposing A store
// removed by PADDING: each k-row of the transposed A slab is 128 + 4 floats long. Padding by 4, not
// the classic 1, keeps the 128-bit fragment reads 16-byte aligned; BK=8 becomes conflict-free,
// BK=16 keeps a 2-way conflict (a limit of padding that smem_swizzle_xor does not have).
// Why faster than global_prefetch_double_buffer: the A store takes 1 shared wavefront per
// instruction instead of 2 (or 4); nothing else changes, so the difference measures the conflict.
// Seed: 003_6ba4e7f2604c6f00.txt (bank conflicts removed by padding vs by swizzling), applied to
// the GEMM of 001_adac3a76413eb491.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

// At BK=8 the kernel fits in 128 registers when asked to, so two 256-thread blocks share an SM
// (16 warps to hide latency); at BK=16 the extra staging registers would spill, so one block.
#define MIN_BLOCKS (BK == 8 ? 2 : 1)

// The A slab is stored transposed, As[k][m], each k-row padded by 4 floats (see above).
#define A_STRIDE (128 + 4)

extern "C" __global__ void __launch_bounds__(tile128::kThreads, MIN_BLOCKS)
sgemm_smem_padding(int M, int N, int K, float alpha, const float* __restrict__ A,
                   const float* __restrict__ B, float beta, float* __restrict__ C) {
    // The 16 x 16 thread layout of global_prefetch_double_buffer.
    const int tx = threadIdx.x, ty = threadIdx.y;
    tile128::gemm_double_buffered<BK, A_STRIDE, tile128::PlainColumns>(
        M, N, K, alpha, A, B, beta, C, ty * 16 + tx, ty * 4, 64, tx * 4, 64);
}
