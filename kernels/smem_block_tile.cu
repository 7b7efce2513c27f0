// Technique: block tiling in shared memory plus a register thread tile. The 256 threads of a
// 16x16 block together stage a 128 x BK slab of A and a BK x 128 slab of B in shared memory
// (BK/8 coalesced float4 loads of each per thread), then each thread computes an 8x8 tile of the
// block's 128x128 piece of C from shared memory, as 2x2 quadrants of 4x4 (rows ty*4 and
// 64 + ty*4, columns tx*4 and 64 + tx*4).
// Why faster than thread_tile_8x8: there every thread fetched its own rows of A and columns of B
// from global memory, so the 16 threads sharing a row re-read it through L1/L2. Here each element
// is fetched from global memory once per block and then read from shared memory by the 16 threads
// that need it, so global traffic per FMA falls by 16x and the block's loads are perfectly
// coalesced.
// Remaining weakness (the next steps' targets): As is stored row-major [m][k], so a thread reads
// its 8 A values one 32-bit LDS at a time, and rows ty*4 and (ty+1)*4 of the same warp are 4*BK
// floats apart, i.e. in the same bank (2-way conflict).
// Seed: 001_adac3a76413eb491.txt (the shared-memory step, gemm_use_smem).
// Tunables: -DBK (depth of the k slab staged per iteration).

#ifndef BK
#define BK 8
#endif

#define THREADS 256
#define BM 128
#define BN 128
#define HALF 64
#define A_LOADS (BM * BK / 4 / THREADS)  // float4 of A per thread per slab
#define B_LOADS (BK * BN / 4 / THREADS)

#if (BK % 8) != 0
#error "BK must be a multiple of 8 (each thread loads whole float4s of both slabs)"
#endif

__device__ __forceinline__ float4 load_row4(const float* __restrict__ P, int rows, int cols, int r,
                                            int c, bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows) {
        const float* p = P + (size_t)r * cols + c;
        if (vec && c < cols) {  // cols % 4 == 0 and c % 4 == 0, so c + 3 < cols as well
            v = __ldg(reinterpret_cast<const float4*>(p));
        } else {
            if (c < cols) v.x = __ldg(p);
            if (c + 1 < cols) v.y = __ldg(p + 1);
            if (c + 2 < cols) v.z = __ldg(p + 2);
            if (c + 3 < cols) v.w = __ldg(p + 3);
        }
    }
    return v;
}

__device__ __forceinline__ void store_row4(float* __restrict__ Cm, int rows, int cols, int r, int c,
                                           const float* acc, float alpha, float beta, bool vec) {
    if (r >= rows) return;
    float* p = Cm + (size_t)r * cols + c;
    float4 out = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
    if (vec && c < cols) {
        if (beta != 0.0f) {
            const float4 old = *reinterpret_cast<const float4*>(p);
            out.x += beta * old.x;
            out.y += beta * old.y;
            out.z += beta * old.z;
            out.w += beta * old.w;
        }
        *reinterpret_cast<float4*>(p) = out;
    } else {
        if (c < cols) p[0] = (beta == 0.0f) ? out.x : out.x + beta * p[0];
        if (c + 1 < cols) p[1] = (beta == 0.0f) ? out.y : out.y + beta * p[1];
        if (c + 2 < cols) p[2] = (beta == 0.0f) ? out.z : out.z + beta * p[2];
        if (c + 3 < cols) p[3] = (beta == 0.0f) ? out.w : out.w + beta * p[3];
    }
}

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_smem_block_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                      const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BM][BK];
    __shared__ __align__(16) float Bs[BK][BN];

    const bool a_vec = (K % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    const bool c_vec = (N % 4 == 0) && aligned16(C);

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int bm0 = blockIdx.y * BM;
    const int bn0 = blockIdx.x * BN;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // Consecutive threads take consecutive float4 along a row: coalesced global reads.
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
            *reinterpret_cast<float4*>(&As[r][c]) = load_row4(A, M, K, bm0 + r, k0 + c, a_vec);
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = load_row4(B, K, N, k0 + r, bn0 + c, b_vec);
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[8], b[8];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = As[ty * 4 + i][k];
                a[4 + i] = As[HALF + ty * 4 + i][k];
            }
            const float4 b_lo = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float4 b_hi = *reinterpret_cast<const float4*>(&Bs[k][HALF + tx * 4]);
            b[0] = b_lo.x; b[1] = b_lo.y; b[2] = b_lo.z; b[3] = b_lo.w;
            b[4] = b_hi.x; b[5] = b_hi.y; b[6] = b_hi.z; b[7] = b_hi.w;
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();  // the slabs are overwritten by the next iteration
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = bm0 + (i < 4 ? ty * 4 + i : HALF + ty * 4 + i - 4);
        store_row4(C, M, N, r, bn0 + tx * 4, &acc[i][0], alpha, beta, c_vec);
        store_row4(C, M, N, r, bn0 + HALF + tx * 4, &acc[i][4], alpha, beta, c_vec);
    }
}
