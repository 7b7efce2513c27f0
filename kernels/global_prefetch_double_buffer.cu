// Technique: global-memory prefetch with double-buffered shared memory, on smem_prefetch_registers.
// Each k iteration issues the NEXT slab's global loads into registers, computes the current slab
// from shared memory, then writes the staged registers into the other shared buffer: one
// __syncthreads per slab. The pipeline is tile128::gemm_double_buffered (tile128.cuh).
// Why faster than smem_prefetch_registers: the global loads (hundreds of cycles) fly during the
// current slab's BK*64 FMAs per thread instead of sitting on the critical path once per slab.
// Seed: 001_adac3a76413eb491.txt (hiding global-memory latency, gemm_final).
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

// At BK=8 the kernel fits in 128 registers when asked to, so two 256-thread blocks share an SM
// (16 warps to hide latency); at BK=16 the extra staging registers would spill, so one block.
#define MIN_BLOCKS (BK == 8 ? 2 : 1)

// The A slab is stored transposed, As[k][m]. Unpadded, unswizzled: the BK/4 threads that load
// one row of A write the same bank (a 2-way conflict at BK=8, 4-way at BK=16).
#define A_STRIDE 128

extern "C" __global__ void __launch_bounds__(tile128::kThreads, MIN_BLOCKS)
sgemm_global_prefetch_double_buffer(int M, int N, int K, float alpha, const float* __restrict__ A,
                                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    // 16 x 16 threads; thread (ty, tx) owns rows ty*4 and 64 + ty*4, columns tx*4 and 64 + tx*4.
    const int tx = threadIdx.x, ty = threadIdx.y;
    tile128::gemm_double_buffered<BK, A_STRIDE, tile128::PlainColumns>(
        M, N, K, alpha, A, B, beta, C, ty * 16 + tx, ty * 4, 64, tx * 4, 64);
}
