// Technique: the optimised kernel of the 2016 blog post (from Feng Chen's book): global ->
// registers -> shared -> registers -> FMAs. A 16x16 block computes a TILE x TILE tile of C; each
// thread owns R x R elements (R = TILE / 16) spaced 16 apart, so every warp's loads and C stores
// are contiguous runs. The 16-deep A slab is stored transposed (As[k][m], the post's "AT").
// Why faster than pitched_b_transposed_tile: R*R outputs per thread raise the FMAs per shared load
// from 1/2 to R*R/(2R), and the next slab's global loads are issued BEFORE the barrier, so their
// latency overlaps the slowest warps' last FMAs instead of following them.
// Seed: 004_d0a690938e8c7a2e.txt (MatTransMulMat: register staging, interleaved thread tile).
// Tunables: -DTILE (C tile side; 16 * R, R outputs per thread per side).
#include "common.cuh"

#ifndef TILE
#define TILE 64
#endif

#define BS 16               // threads per block side, also the depth of the k slab
#define R (TILE / BS)       // outputs per thread per side
#define A_ROW (TILE + 2)    // padded row length of the transposed A slab

#if TILE % BS != 0
#error "TILE must be a multiple of 16"
#endif

extern "C" __global__ void __launch_bounds__(BS * BS)
sgemm_register_staged_at(int M, int N, int K, float alpha, const float* __restrict__ A,
                         const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float As[BS][A_ROW];  // As[k][m]: A transposed while staging
    __shared__ float Bs[BS][TILE];   // Bs[k][n]

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bm0 = blockIdx.y * TILE;
    const int bn0 = blockIdx.x * TILE;

    float acc[R][R];
    zero_tile(acc);

    for (int k0 = 0; k0 < K; k0 += BS) {
        // Global -> registers. Issued before the barrier below, so these loads are in flight
        // while slower warps finish the previous slab.
        float ra[R], rb[R];
        const int ak = k0 + tx;  // A: row bm0 + i*16 + ty, column ak
        const int bk = k0 + ty;  // B: row bk, column bn0 + i*16 + tx
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int m = bm0 + i * BS + ty;
            ra[i] = (m < M && ak < K) ? __ldg(A + (size_t)m * K + ak) : 0.0f;
            const int n = bn0 + i * BS + tx;
            rb[i] = (bk < K && n < N) ? __ldg(B + (size_t)bk * N + n) : 0.0f;
        }

        __syncthreads();  // everyone is done reading the previous slab
#pragma unroll
        for (int i = 0; i < R; ++i) {
            As[tx][i * BS + ty] = ra[i];
            Bs[ty][i * BS + tx] = rb[i];
        }
        __syncthreads();  // the new slab is complete

#pragma unroll
        for (int k = 0; k < BS; ++k) {
            float a[R], b[R];
#pragma unroll
            for (int i = 0; i < R; ++i) {
                a[i] = As[k][i * BS + ty];
                b[i] = Bs[k][i * BS + tx];
            }
            outer_product(acc, a, b);
        }
    }

    // Row i*16 + ty, column j*16 + tx: for each (i, j) a warp stores two runs of 16 floats.
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int m = bm0 + i * BS + ty;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int n = bn0 + j * BS + tx;
            if (n < N) store_axpby(C + (size_t)m * N + n, acc[i][j], alpha, beta);
        }
    }
}
