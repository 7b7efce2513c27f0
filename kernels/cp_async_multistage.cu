// Technique: cp.async (sm_80+) 16-byte copies global -> shared into a STAGES-deep ring: a thread
// issues the copies of slab t + STAGES - 1, one commit group per slab, and goes straight on to the
// FMAs of slab t. warp_tile's tile shape (128x128, BK = 8, 2 x 4 warps of 64 x 32, 8x8 per lane); A
// stays row-major in shared memory (cp.async cannot transpose), k-rows padded to 12 floats.
// Why it should beat warp_tile: no staging registers, STS instructions or register dependency, and
// STAGES - 1 slabs in flight give the loads 2-3 slabs of FMAs to hide behind. (On the H100 it does
// not: kernels/README.md.)
// Seed: Past the seeds (no seed document covers cp.async); the tile shape comes from warp_tile and
// the ladder of 001_adac3a76413eb491.txt.
// Tunables: -DSTAGES (slabs in the shared ring; STAGES - 1 are in flight while one is computed).
#include "common.cuh"

#ifndef STAGES
#define STAGES 4
#endif

#define THREADS 256
#define BM 128
#define BN 128
#define BK 8
#define A_ROW (BK + 4)  // padded k-row length of As[m][k]: 3 chunks of 16 bytes
#define WARP_M 64
#define WARP_N 32

#if STAGES < 2
#error "STAGES must be at least 2"
#endif
// Static shared memory: STAGES * (BM * A_ROW + BK * BN) * 4 bytes = STAGES * 10 KB <= 40 KB.

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most n of this thread's committed groups are still in flight.
template <int n>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory");
}

// Issue the copies of the slab starting at k0 into one stage of the ring. 256 threads, 256
// chunks of A (128 rows x 2) and 256 of B (8 rows x 32): one chunk of each per thread.
__device__ __forceinline__ void load_stage(float (*As)[A_ROW], float (*Bs)[BN],
                                           const float* __restrict__ A, const float* __restrict__ B,
                                           int M, int N, int K, int bm0, int bn0, int k0, int tid,
                                           bool a_vec, bool b_vec) {
    const int ar = tid >> 1, ac = (tid & 1) * 4;
    copy_piece(smem_addr(&As[ar][ac]), A, M, K, bm0 + ar, k0 + ac, a_vec);
    const int br = tid >> 5, bc = (tid & 31) * 4;
    copy_piece(smem_addr(&Bs[br][bc]), B, K, N, k0 + br, bn0 + bc, b_vec);
}

// Two blocks per SM: the kernel fits 128 registers without spilling (checked with ptxas -v).
extern "C" __global__ void __launch_bounds__(THREADS, 2)
sgemm_cp_async_multistage(int M, int N, int K, float alpha, const float* __restrict__ A,
                          const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[STAGES][BM][A_ROW];  // As[m][k], as in global memory
    __shared__ __align__(16) float Bs[STAGES][BK][BN];

    const bool a_vec = (K % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps
    const int tm = lane >> 2, tn = lane & 3;  // 8 x 4 lanes per warp
    const int am = wm * WARP_M + tm;          // this lane's rows: am + 8 * i, i = 0..7
    const int bn = wn * WARP_N + tn * 4;      // this lane's columns: bn .. bn+3, bn+16 .. bn+19
    const int bm0 = blockIdx.y * BM;
    const int bn0 = blockIdx.x * BN;
    const int slabs = (K + BK - 1) / BK;  // >= 1

    float acc[8][8];
    zero_tile(acc);

    // Prologue: slabs 0 .. STAGES-2 in flight, one commit group each (empty past the end, so the
    // group count, and with it the wait below, is the same for every K).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slabs) load_stage(As[s], Bs[s], A, B, M, N, K, bm0, bn0, s * BK, tid, a_vec, b_vec);
        cp_async_commit();
    }

    for (int t = 0; t < slabs; ++t) {
        // Groups committed so far: STAGES - 1 + t, the (t+1)-th holding slab t. Allowing
        // STAGES - 2 to remain pending means slab t has landed (for this thread's copies) ...
        cp_async_wait<STAGES - 2>();
        // ... and after the barrier for every thread's copies. The barrier also proves that all
        // warps finished computing slab t - 1, whose stage is refilled next.
        __syncthreads();

        const int next = t + STAGES - 1;
        if (next < slabs) {
            const int st = next % STAGES;  // == (t - 1) mod STAGES
            load_stage(As[st], Bs[st], A, B, M, N, K, bm0, bn0, next * BK, tid, a_vec, b_vec);
        }
        cp_async_commit();

        const int cur = t % STAGES;
#pragma unroll
        for (int k4 = 0; k4 < BK; k4 += 4) {
            float a[8][4];  // a[i][kk] = A[am + 8i][k4 + kk]
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float4 v = *reinterpret_cast<const float4*>(&As[cur][am + 8 * i][k4]);
                a[i][0] = v.x; a[i][1] = v.y; a[i][2] = v.z; a[i][3] = v.w;
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const float4 b_lo = *reinterpret_cast<const float4*>(&Bs[cur][k4 + kk][bn]);
                const float4 b_hi = *reinterpret_cast<const float4*>(&Bs[cur][k4 + kk][bn + WARP_N / 2]);
                const float b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] += a[i][kk] * b[j];
            }
        }
    }
    cp_async_wait<0>();  // nothing real is pending (only empty groups); leave no copy in flight

    const bool c_vec = (N % 4 == 0) && aligned16(C);  // computed here: one register less in the loop

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = bm0 + am + 8 * i;
        store_row4(C, M, N, r, bn0 + bn, &acc[i][0], alpha, beta, c_vec);
        store_row4(C, M, N, r, bn0 + bn + WARP_N / 2, &acc[i][4], alpha, beta, c_vec);
    }
}
