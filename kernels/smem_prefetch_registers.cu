// Technique: smem_a_transposed with the shared-memory reads software-pipelined one k-step ahead.
// The A and B fragments (8 + 8 floats) live in two register sets: while the FMAs of step k run on
// one set, the LDS.128s for step k+1 are already in flight into the other.
// Why faster than smem_a_transposed: a warp that loads and then at once multiplies stalls on the
// shared-memory latency; issuing the next step's loads before this step's 64 FMAs hides it.
// Seed: 001_adac3a76413eb491.txt (hiding shared-memory latency, gemm_hide_smem_latency).
// Tunables: -DBK (depth of the k slab staged per iteration).
#include "common.cuh"
#include "tile128.cuh"

#ifndef BK
#define BK 8
#endif

extern "C" __global__ void __launch_bounds__(tile128::kThreads)
sgemm_smem_prefetch_registers(int M, int N, int K, float alpha, const float* __restrict__ A,
                              const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BK][tile128::kM];  // transposed, as in smem_a_transposed
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

        // Two register sets: step k computes on [k & 1] while step k + 1 loads into the other.
        float a[2][8], b[2][8];
        tile128::load_fragments<tile128::kM, tile128::PlainColumns>(As, Bs, 0, ty * 4, 64, tx * 4, 64, a[0], b[0]);
        tile128::slab_fmas_prefetched<BK, tile128::kM, tile128::PlainColumns>(As, Bs, ty * 4, 64, tx * 4, 64, acc, a, b);
        __syncthreads();  // the slabs are overwritten by the next iteration
    }

    store_quadrants_8x8(C, M, N, bm0 + ty * 4, 64, bn0 + tx * 4, 64, acc, alpha, beta, vec.c);
}
