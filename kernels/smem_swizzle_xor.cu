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

#define THREADS 256
#define BM 128
#define BN 128
#define HALF 64
#define A_LOADS (BM * BK / 4 / THREADS)  // float4 of A per thread per slab
#define B_LOADS (BK * BN / 4 / THREADS)

#if (BK % 8) != 0
#error "BK must be a multiple of 8 (each thread loads whole float4s of both slabs)"
#endif

// At BK=8 the kernel fits in 128 registers when asked to, so two 256-thread blocks share an SM
// (16 warps to hide latency); at BK=16 the extra staging registers would spill, so one block.
#define MIN_BLOCKS (BK == 8 ? 2 : 1)

// The A slab is stored transposed, As[k][m], dense, with 16-byte chunks XOR-permuted per k-row:
// chunk (m / 4) ^ mask with mask = (k / 4) * (32 / BK), written on floats as m ^ (mask * 4).
// mask < 8 only touches bits 2..4 of m (< BM = 128), so the result stays inside the row, and
// m % 4 is kept, so a 4-aligned run of m stays contiguous and aligned.
// It is written as m + x - 2 * (m & x), which equals m ^ x: ptxas then folds the per-k part
// into address arithmetic and the kernel fits 128 registers at BK=8 without the 2-byte spill
// the literal ^ produced.
#define A_STRIDE BM
__device__ __forceinline__ int a_col(int k, int m) {
    const int x = (k >> 2) * (128 / BK);
    return m + x - 2 * (m & x);  // == m ^ x
}

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

// Global -> registers: the slab starting at k0, coalesced (consecutive threads take consecutive
// float4 along a row), zeros outside the matrices.
__device__ __forceinline__ void load_slab(const float* __restrict__ A, const float* __restrict__ B,
                                          int M, int N, int K, int bm0, int bn0, int k0, int tid,
                                          bool a_vec, bool b_vec, float4 (&a_stage)[A_LOADS],
                                          float4 (&b_stage)[B_LOADS]) {
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
        a_stage[l] = load_row4(A, M, K, bm0 + r, k0 + c, a_vec);
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        b_stage[l] = load_row4(B, K, N, k0 + r, bn0 + c, b_vec);
    }
}

// Registers -> one shared buffer; A is transposed on the way (4 scalar stores per float4).
__device__ __forceinline__ void store_slab(float (*As)[A_STRIDE], float (*Bs)[BN], int tid,
                                           const float4 (&a_stage)[A_LOADS],
                                           const float4 (&b_stage)[B_LOADS]) {
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
        const int col = a_col(c, r);  // c % 4 == 0, so rows c..c+3 share one column map
        As[c + 0][col] = a_stage[l].x;
        As[c + 1][col] = a_stage[l].y;
        As[c + 2][col] = a_stage[l].z;
        As[c + 3][col] = a_stage[l].w;
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
        const int idx = tid + l * THREADS;
        const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[r][c]) = b_stage[l];
    }
}

// Step k's fragments: this thread's 8 rows of A and 8 columns of B, each as two float4 (the 4x4
// quadrants at offsets 0 and HALF). a_col keeps 4-aligned runs of m contiguous.
__device__ __forceinline__ void load_fragments(const float (*As)[A_STRIDE], const float (*Bs)[BN],
                                               int k, int ty, int tx, float (&a)[8], float (&b)[8]) {
    const float4 a_lo = *reinterpret_cast<const float4*>(&As[k][a_col(k, ty * 4)]);
    const float4 a_hi = *reinterpret_cast<const float4*>(&As[k][a_col(k, HALF + ty * 4)]);
    const float4 b_lo = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
    const float4 b_hi = *reinterpret_cast<const float4*>(&Bs[k][HALF + tx * 4]);
    a[0] = a_lo.x; a[1] = a_lo.y; a[2] = a_lo.z; a[3] = a_lo.w;
    a[4] = a_hi.x; a[5] = a_hi.y; a[6] = a_hi.z; a[7] = a_hi.w;
    b[0] = b_lo.x; b[1] = b_lo.y; b[2] = b_lo.z; b[3] = b_lo.w;
    b[4] = b_hi.x; b[5] = b_hi.y; b[6] = b_hi.z; b[7] = b_hi.w;
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
sgemm_smem_swizzle_xor(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
      float beta, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][BK][A_STRIDE];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const bool a_vec = (K % 4 == 0) && aligned16(A);
    const bool b_vec = (N % 4 == 0) && aligned16(B);
    const bool c_vec = (N % 4 == 0) && aligned16(C);

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * 16 + tx;
    const int bm0 = blockIdx.y * BM;
    const int bn0 = blockIdx.x * BN;
    const int slabs = (K + BK - 1) / BK;  // >= 1

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    float4 a_stage[A_LOADS], b_stage[B_LOADS];
    load_slab(A, B, M, N, K, bm0, bn0, 0, tid, a_vec, b_vec, a_stage, b_stage);
    store_slab(As[0], Bs[0], tid, a_stage, b_stage);
    __syncthreads();

    float a[2][8], b[2][8];  // register double buffer for the shared reads, as before
    load_fragments(As[0], Bs[0], 0, ty, tx, a[0], b[0]);

    for (int s = 0; s < slabs; ++s) {
        const int cur = s & 1;
        const bool has_next = s + 1 < slabs;  // the same for the whole block
        // Issue the next slab's global loads now; they are not needed until after the FMAs.
        if (has_next) load_slab(A, B, M, N, K, bm0, bn0, (s + 1) * BK, tid, a_vec, b_vec, a_stage, b_stage);

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k + 1 < BK) load_fragments(As[cur], Bs[cur], k + 1, ty, tx, a[(k + 1) & 1], b[(k + 1) & 1]);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[k & 1][i] * b[k & 1][j];
        }

        if (has_next) {
            // Buffer cur ^ 1 was last read in iteration s - 1, which every thread finished before
            // the barrier that ended it, so it can be overwritten without another barrier first.
            store_slab(As[cur ^ 1], Bs[cur ^ 1], tid, a_stage, b_stage);
            __syncthreads();  // the new slab is visible to all; BK even, so slot 0 is free
            load_fragments(As[cur ^ 1], Bs[cur ^ 1], 0, ty, tx, a[0], b[0]);
        }
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = bm0 + (i < 4 ? ty * 4 + i : HALF + ty * 4 + i - 4);
        store_row4(C, M, N, r, bn0 + tx * 4, &acc[i][0], alpha, beta, c_vec);
        store_row4(C, M, N, r, bn0 + HALF + tx * 4, &acc[i][4], alpha, beta, c_vec);
    }
}
