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
sgemm_smem_a_transposed(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m]
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
            const float4 v = load_row4(A, M, K, bm0 + r, k0 + c, a_vec);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
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
            const float4 a_lo = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            const float4 a_hi = *reinterpret_cast<const float4*>(&As[k][HALF + ty * 4]);
            a[0] = a_lo.x; a[1] = a_lo.y; a[2] = a_lo.z; a[3] = a_lo.w;
            a[4] = a_hi.x; a[5] = a_hi.y; a[6] = a_hi.z; a[7] = a_hi.w;
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
