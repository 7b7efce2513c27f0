// Technique: global_prefetch_double_buffer with the bank conflict of the transposing A store
// removed by an XOR SWIZZLE instead of padding. The transposed A slab keeps its dense [BK][128]
// shape, but in k-row k the 4-float chunk q is stored at chunk q ^ ((k/4) * (32/BK)); reads apply
// the same map, so every float4 a thread reads stays contiguous and 16-byte aligned.
// Why faster than global_prefetch_double_buffer: the A store needs 1 shared wavefront per
// instruction instead of 2 (or 4), at BK=8 and BK=16 alike, with no wasted shared memory.
// Seed: 003_6ba4e7f2604c6f00.txt (XOR swizzling at 16-byte chunk granularity, the swizzle formula
// with a 4-float chunk), applied to the GEMM of 001_adac3a76413eb491.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

// At BK=8 the kernel fits in 128 registers when asked to, so two 256-thread blocks share an SM
// (16 warps to hide latency); at BK=16 the extra staging registers would spill, so one block.
#define MIN_BLOCKS (BK == 8 ? 2 : 1)

// The A slab is stored transposed, As[k][m], dense, with 16-byte chunks XOR-permuted per k-row
// by tile128::XorSwizzledColumns (the map above, and how it is written to keep 128 registers).

extern "C" __global__ void __launch_bounds__(tile128::kThreads, MIN_BLOCKS)
sgemm_smem_swizzle_xor(int M, int N, int K, float alpha, const float* __restrict__ A,
                       const float* __restrict__ B, float beta, float* __restrict__ C) {
    // The 16 x 16 thread layout of global_prefetch_double_buffer.
    const int tx = threadIdx.x, ty = threadIdx.y;
    tile128::gemm_double_buffered<BK, 128, tile128::XorSwizzledColumns<BK>>(
        M, N, K, alpha, A, B, beta, C, ty * 16 + tx, ty * 4, 64, tx * 4, 64);
}
