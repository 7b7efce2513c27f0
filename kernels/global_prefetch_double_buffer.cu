// Technique: global-memory prefetch with double-buffered shared memory, on top of
// smem_prefetch_registers. At the top of each k iteration every thread issues the global loads
// of the NEXT slab into registers, then computes the current slab from shared memory, and only
// afterwards writes the staged registers into the other shared buffer. Two buffers mean a
// single __syncthreads per slab: the buffer being filled is the one everyone finished reading
// before the previous barrier.
// Why faster than smem_prefetch_registers: there each slab was loaded, then waited for at a
// barrier, then computed, so global latency (hundreds of cycles) sat on the critical path once
// per slab and the whole block idled at two barriers. Here the LDGs fly while each thread's
// BK*64 FMAs on the current slab run, and their results are consumed only after them (Nsight
// Compute: "stall long scoreboard", which the textbook reports dropping by two thirds).
// Seed: 001_adac3a76413eb491.txt (hiding global-memory latency, gemm_final). The textbook also
// moves the shared store before the last inner step; this keeps the plainer order.
// Tunables: -DBK (depth of the k slab staged per iteration).
// smem_padding and smem_swizzle_xor are this kernel with the A-store bank conflict removed;
// they differ from it only in A_STRIDE and a_col. The pipeline itself is
// tile128::gemm_double_buffered (tile128.cuh), shared with them and warp_tile.

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
