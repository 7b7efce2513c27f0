// Technique: global-memory prefetch with double-buffered shared memory, on top of
// smem_prefetch_registers. At the top of each k iteration every thread issues the global loads
// of the NEXT slab into registers, then computes the current slab from shared memory, and only
// afterwards writes the staged registers into the other shared buffer. Two buffers mean a
// single __syncthreads per slab: the buffer being filled is the one everyone finished reading
// before the previous barrier.
// Why faster than smem_prefetch_registers: there each slab was loaded, then waited for at a
// barrier, then computed, so global latency (hundreds of cycles) sat on the critical path once
// per slab and the whole block idled at two barriers. Here the LDGs fly while each thread's
// BK*64 FMAs on the current slab run, and their results are consumed only after them (Nsight
// Compute: "stall long scoreboard", which the textbook reports dropping by two thirds).
// Seed: 001_adac3a76413eb491.txt (hiding global-memory latency, gemm_final). The textbook also
// moves the shared store before the last inner step; this keeps the plainer order.
// Tunables: -DBK (depth of the k slab staged per iteration).
// smem_padding and smem_swizzle_xor are this kernel with the A-store bank conflict removed;
// they differ from it only in A_STRIDE and a_col.

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

// The A slab is stored transposed, As[k][m]. Unpadded, unswizzled: the BK/4 threads that load
// one row of A write the same bank (a 2-way conflict at BK=8, 4-way at BK=16).
#define A_STRIDE BM
__device__ __forceinline__ int a_col(int k, int m) { return m; }

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
sgemm_global_prefetch_double_buffer(int M, int N, int K, float alpha, const float* __restrict__ A, const float* __restrict__ B,
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
