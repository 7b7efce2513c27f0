// Technique: smem_block_tile with the A slab stored transposed in shared memory, As[k][m]. The
// float4 each thread reads from a row of A (4 consecutive k) is scattered into 4 rows of As, so
// that in the inner loop a thread's 8 A values for one k sit contiguously in two float4s.
// Why faster than smem_block_tile: the A fragment now costs 2 LDS.128 per k instead of 8 scalar
// LDS, the same shape as the B fragment, so the inner loop issues 4 shared loads for 64 FMAs
// instead of 10, and the 2-way bank conflict on the A column read is gone (a warp reads 2
// distinct float4s, broadcast to 16 threads each). The textbook credits the gain to fewer
// registers and loop variables (111 vs 128 there). The price: the transposing stores are 4
// scalar STS per float4, and the BK/4 threads that share an A row write the same bank (2-way
// conflict at BK=8, 4-way at BK=16, once per slab; smem_padding and smem_swizzle_xor fix it).
// Seed: 001_adac3a76413eb491.txt (the transposed-A shared memory step, gemm_transpose_smem).
// Tunables: -DBK (depth of the k slab staged per iteration).

#ifndef BK
#define BK 8
#endif

extern "C" __global__ void __launch_bounds__(tile128::kThreads)
sgemm_smem_a_transposed(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BK][tile128::kM];  // transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][tile128::kN];
    const VecFlags vec = vec_flags(N, K, A, B, C);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int bm0 = blockIdx.y * tile128::kM, bn0 = blockIdx.x * tile128::kN;

    float acc[8][8];
    zero_tile(acc);

    for (int k0 = 0; k0 < K; k0 += BK) {
        tile128::copy_slab<BK, tile128::kM, tile128::PlainColumns>(As, Bs, A, B, M, N, K, bm0, bn0, k0, tid, vec.a, vec.b);
        __syncthreads();

        // Per k-step: rows ty*4 and 64 + ty*4 of As[k], columns tx*4 and 64 + tx*4 of Bs[k],
        // each one float4, then the 64 FMAs.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[8], b[8];
            tile128::load_fragments<tile128::kM, tile128::PlainColumns>(As, Bs, k, ty * 4, 64, tx * 4, 64, a, b);
            outer_product(acc, a, b);
        }
        __syncthreads();  // the slabs are overwritten by the next iteration
    }

    store_quadrants_8x8(C, M, N, bm0 + ty * 4, 64, bn0 + tx * 4, 64, acc, alpha, beta, vec.c);
}
