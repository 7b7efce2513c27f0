// Technique: global_prefetch_double_buffer with the bank conflict of the transposing A store
// removed by an XOR SWIZZLE instead of padding. The transposed A slab keeps its dense [BK][128]
// shape, but within k-row k the 4-float chunks are permuted: chunk q (floats 4q..4q+3) is stored
// at chunk q ^ ((k / 4) * (32 / BK)). Reads apply the same map, so each float4 a thread reads is
// still 4 contiguous, 16-byte aligned floats, and since the map is a bijection per k-row nothing
// is lost or overwritten.
// The conflict removed: thread t loads A[r][c..c+3] (BK/4 threads per row r) and writes
// As[c+j][r]; every k-row starts in bank 0, so the threads of a warp that share r all hit bank
// r % 32 (2-way at BK=8, 4-way at BK=16). The XOR moves the rows c = 0, 4, 8, 12 to different
// 16-byte chunk groups: at BK=8 a warp's 16 rows span chunks 4w..4w+3 and c=4 flips them to the
// other half of the 8-chunk (32-bank) group; at BK=16 its 8 rows span 2 chunks and c/4 = 0..3
// spreads them over all 8 chunk positions. Either way 32 distinct banks, for both BK values,
// with no wasted shared memory and no broken alignment, which padding cannot offer at BK=16
// (see smem_padding). The read side stays conflict-free: a warp reads 2 distinct float4 of A per
// instruction, in different chunks before and after the XOR.
// Why faster than global_prefetch_double_buffer: the A store needs 1 shared wavefront per
// instruction instead of 2 (or 4); the index math is free because k is a compile-time constant
// in the unrolled loops and r's chunk is computed once.
// Seed: 003_6ba4e7f2604c6f00.txt (XOR swizzling at 16-byte chunk granularity, the swizzle
// formula with a 4-float chunk), applied to the GEMM of 001_adac3a76413eb491.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).

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
