// Technique: FP8 (E4M3) tensor cores through mma.sync m16n8k32 (sm_89 and later), FP32
// accumulators: 128 x 128 tiles of C, 64-deep slabs of K, 8 warps of 64 x 32, two smem buffers.
// A's rows hold K contiguously, as the instruction's A fragment wants them: cp.async copies them
// and ldmatrix reads them. B's rows hold N contiguously, but its fragment wants 4 consecutive k of
// one column in a register: each thread loads a 4 x 4 block of B (4 rows, 4 bytes each), turns it
// with byte permutes (4 k of one column per word) and stores it into a transposed tile Bt[n][k],
// which ldmatrix then reads as it reads A. The loads of the next slab are issued before the
// tensor cores work on this one.
// The per-tensor scales reach the kernel folded into alpha (core/description/precision.py).
// Seed: 001_adac3a76413eb491.txt (the mma.sync fragments and ldmatrix of half_mma_sync.cu), on
// m16n8k32's 8-bit fragments.
// C in BF16 (OUTPUT_FP32=1: FP32). For the correctness gate's tests: GEMMWATCH_TEST_SKIP_SLAB
// leaves out k = 32..63; GEMMWATCH_ROUND_TOWARD_ZERO rounds a BF16 C toward zero.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "common.cuh"

#if OUTPUT_FP32
typedef float out_t;
#else
typedef __nv_bfloat16 out_t;
#endif

namespace fp8mma {
constexpr int kBM = 128, kBN = 128, kBK = 64, kThreads = 256;
constexpr int kRow = kBK + 16;  // bytes per smem row: 80, so ldmatrix's 8 rows fall in 8 bank groups

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
#ifdef GEMMWATCH_ROUND_TOWARD_ZERO
    *p = __float2bfloat16_rz(v);
#else
    *p = __float2bfloat16_rn(v);
#endif
}

// A: 128 rows x 64 bytes of the slab at k0; 16-byte pieces, two per thread. vec: K % 16 == 0 and
// A 16-byte aligned, so a piece is wholly in or out (out: cp.async writes zeros).
__device__ __forceinline__ void load_a(unsigned char* as, const unsigned char* A, int M, int K, int bm0, int k0,
                                       bool vec) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int idx = threadIdx.x + kThreads * i, r = idx / 4, c = (idx % 4) * 16;
        const int gr = bm0 + r, gk = k0 + c;
        unsigned char* dst = as + r * kRow + c;
        if (vec) {
            const bool in = gr < M && gk < K;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                         "l"(in ? A + (size_t)gr * K + gk : A), "r"(in ? 16 : 0) : "memory");
        } else {
#pragma unroll
            for (int e = 0; e < 16; ++e) dst[e] = (gr < M && gk + e < K) ? A[(size_t)gr * K + gk + e] : 0;
        }
    }
}

// B: 64 rows (k) x 128 bytes (n) of the slab at k0, as 4 x 4 blocks, two per thread: a warp takes
// 8 blocks across (32 bytes of each of its rows) and 4 down. vec: N % 4 == 0 and B 4-byte aligned.
__device__ __forceinline__ void load_b(unsigned (&rows)[2][4], const unsigned char* B, int N, int K, int bn0, int k0,
                                       bool vec) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int block = warp + 8 * i, n = bn0 + ((block % 4) * 8 + lane % 8) * 4;
        const int k = k0 + ((block / 4) * 4 + lane / 8) * 4;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const bool row_in = k + r < K;
            if (vec) {
                rows[i][r] = (row_in && n < N) ? *reinterpret_cast<const unsigned*>(B + (size_t)(k + r) * N + n) : 0u;
            } else {
                unsigned w = 0;
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (row_in && n + e < N) w |= unsigned(B[(size_t)(k + r) * N + n + e]) << (8 * e);
                rows[i][r] = w;
            }
        }
    }
}

// The blocks of load_b into Bt[n][k]: word j of the 4 x 4 block turned is column n + j's 4 k.
__device__ __forceinline__ void store_b(unsigned char* bt, const unsigned (&rows)[2][4]) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int block = warp + 8 * i, n = ((block % 4) * 8 + lane % 8) * 4, k = ((block / 4) * 4 + lane / 8) * 4;
        const unsigned t0 = __byte_perm(rows[i][0], rows[i][1], 0x5140), t1 = __byte_perm(rows[i][2], rows[i][3], 0x5140);
        const unsigned t2 = __byte_perm(rows[i][0], rows[i][1], 0x7362), t3 = __byte_perm(rows[i][2], rows[i][3], 0x7362);
        const unsigned cols[4] = {__byte_perm(t0, t1, 0x5410), __byte_perm(t0, t1, 0x7632), __byte_perm(t2, t3, 0x5410),
                                  __byte_perm(t2, t3, 0x7632)};
#pragma unroll
        for (int j = 0; j < 4; ++j) *reinterpret_cast<unsigned*>(bt + (n + j) * kRow + k) = cols[j];
    }
}

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
}  // namespace fp8mma

extern "C" __global__ void __launch_bounds__(fp8mma::kThreads)
gemm_fp8_mma_sync(int M, int N, int K, float alpha, const __nv_fp8_e4m3* __restrict__ A8,
                  const __nv_fp8_e4m3* __restrict__ B8, float beta, out_t* __restrict__ C) {
    using namespace fp8mma;
    __shared__ __align__(16) unsigned char as[2][kBM * kRow];
    __shared__ __align__(16) unsigned char bt[2][kBN * kRow];
    const unsigned char* A = reinterpret_cast<const unsigned char*>(A8);
    const unsigned char* B = reinterpret_cast<const unsigned char*>(B8);
    const int bm0 = blockIdx.y * kBM, bn0 = blockIdx.x * kBN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    const bool vec_a = K % 16 == 0 && aligned16(A), vec_b = N % 4 == 0 && (reinterpret_cast<size_t>(B) & 3) == 0;
    const int slabs = (K + kBK - 1) / kBK;

    float acc[4][4][4] = {};
    unsigned rows[2][4];
    load_a(as[0], A, M, K, bm0, 0, vec_a);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    load_b(rows, B, N, K, bn0, 0, vec_b);
    store_b(bt[0], rows);

    for (int s = 0; s < slabs; ++s) {
        const int buf = s & 1;
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();  // slab s is in smem; every warp is done with the other buffer
        const bool next = s + 1 < slabs;
        if (next) {
            load_a(as[buf ^ 1], A, M, K, bm0, (s + 1) * kBK, vec_a);
            asm volatile("cp.async.commit_group;\n" ::: "memory");
            load_b(rows, B, N, K, bn0, (s + 1) * kBK, vec_b);  // in flight while the tensor cores work
        }
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 32) {
#ifdef GEMMWATCH_TEST_SKIP_SLAB
            if (s == 0 && kk == 32) continue;
#endif
            unsigned af[4][4], bf[2][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                ldmatrix_x4(af[i], as[buf] + (wm + 16 * i + (lane & 7) + ((lane >> 3) & 1) * 8) * kRow + kk + (lane >> 4) * 16);
#pragma unroll
            for (int j = 0; j < 2; ++j)
                ldmatrix_x4(bf[j], bt[buf] + (wn + 16 * j + (lane & 7) + (lane >> 4) * 8) * kRow + kk + ((lane >> 3) & 1) * 16);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma_e4m3(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
        }
        if (next) store_b(bt[buf ^ 1], rows);
    }

    // acc[i][j]: rows wm + 16 i + g (+ 8 for [2], [3]), columns wn + 8 j + 2 t (+ 1).
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = bm0 + wm + 16 * i + g + (e / 2) * 8, c = bn0 + wn + 8 * j + 2 * t + (e % 2);
                if (r < M && c < N) {
                    out_t* p = C + (size_t)r * N + c;
                    const float v = alpha * acc[i][j][e];
                    store(p, beta == 0.0f ? v : v + beta * to_float(*p));
                }
            }
}
