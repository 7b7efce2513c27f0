// Technique: global_prefetch_double_buffer with the bank conflict of the transposing A store
// removed by PADDING: each k-row of the transposed A slab is BM + 4 floats long instead of BM.
// The conflict: thread t loads A[r][c..c+3] (BK/4 threads per row r) and writes As[c+j][r]. With
// a row length of 128 floats every k-row starts in bank 0, so the threads of a warp that share
// r, differing only in c, all hit bank r % 32: 2-way at BK=8, 4-way at BK=16.
// Why 4 and not the classic +1: the inner loop reads As[k][m..m+3] as one 128-bit LDS, which
// must stay 16-byte aligned, so the row length must stay a multiple of 4 floats (the seed warns
// that padding can silently break vectorised access this way). With +4, k-row k starts in bank
// 4k, so rows c = 0 and c = 4 start 16 banks apart: the warp's 16 rows x 2 threads land in 32
// distinct banks and BK=8 is conflict-free. At BK=16 the four rows c = 0, 4, 8, 12 start at
// banks 0, 16, 0, 16, so a 2-way conflict remains: no multiple of 4 fixes it, which is the
// limit of padding that smem_swizzle_xor does not have. The cost is 4*BK*4 bytes per buffer.
// Why faster than global_prefetch_double_buffer: the A store goes from 2 (or 4) shared
// wavefronts per instruction to 1; everything else is identical, so the difference measures the
// conflict alone (small: it happens once per slab, against BK*64 FMAs per thread).
// Seed: 003_6ba4e7f2604c6f00.txt (bank conflicts removed by padding vs by swizzling), applied
// to the GEMM of 001_adac3a76413eb491.txt.
// Tunables: -DBK (depth of the k slab staged per iteration).

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
