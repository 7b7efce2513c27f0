// Shared device code of the 128x128 block-tile ladder (smem_block_tile .. warp_tile): 256
// threads compute a 128x128 tile of C, staging SlabK-deep slabs of A (128 x SlabK) and B
// (SlabK x 128) in shared memory, each thread accumulating 8x8 outputs as 2x2 quadrants of 4x4.
// Included after common.cuh (see the rules there: __device__ __forceinline__
// only, no macros, no tunable names such as BK). Each kernel file keeps what makes its step
// different: the shared layout of A (PlainColumns, a padded stride, XorSwizzledColumns), which
// threads own which quadrants, and how loads overlap the FMAs.
#pragma once
#include "common.cuh"

namespace tile128 {

constexpr int kThreads = 256;
constexpr int kM = 128;  // rows of C per block
constexpr int kN = 128;  // columns of C per block

// float4 loads of A and of B per thread per slab (BK=8: one each; BK=16: two each).
template <int SlabK>
struct Slab {
    static_assert(SlabK % 8 == 0, "BK must be a multiple of 8 (each thread loads whole float4s of both slabs)");
    static constexpr int a_loads = kM * SlabK / 4 / kThreads;
    static constexpr int b_loads = SlabK * kN / 4 / kThreads;
};

// Column of element m in k-row k of the transposed A slab As[k][m]: unpermuted.
struct PlainColumns {
    static __device__ __forceinline__ int col(int, int m) { return m; }
};

// The same, with 16-byte chunks XOR-permuted per k-row (smem_swizzle_xor explains why):
// chunk (m / 4) ^ mask with mask = (k / 4) * (32 / SlabK), written on floats as m ^ (mask * 4).
// mask < 8 only touches bits 2..4 of m (< 128), so the result stays inside the row, and m % 4
// is kept, so a 4-aligned run of m stays contiguous and aligned. It is written as
// m + x - 2 * (m & x), which equals m ^ x: ptxas then folds the per-k part into address
// arithmetic and the kernels fit 128 registers at BK=8 without the 2-byte spill the literal ^
// produced.
template <int SlabK>
struct XorSwizzledColumns {
    static __device__ __forceinline__ int col(int k, int m) {
        const int x = (k >> 2) * (128 / SlabK);
        return m + x - 2 * (m & x);  // == m ^ x
    }
};

// Which piece of a slab the idx-th float4 is (idx = tid + l * 256): consecutive threads take
// consecutive float4 along a row, so the global reads are coalesced.
template <int SlabK>
__device__ __forceinline__ void a_piece(int idx, int& r, int& c) {  // A slab: 128 rows x SlabK
    r = idx / (SlabK / 4);
    c = (idx % (SlabK / 4)) * 4;
}
__device__ __forceinline__ void b_piece(int idx, int& r, int& c) {  // B slab: SlabK rows x 128
    r = idx / (kN / 4);
    c = (idx % (kN / 4)) * 4;
}

// A[bm0 + r][k0 + c .. +3] and B[k0 + r][bn0 + c .. +3] for the idx-th piece, zeros outside.
template <int SlabK>
__device__ __forceinline__ float4 load_a4(const float* __restrict__ A, int M, int K, int bm0, int k0,
                                          int idx, bool a_vec) {
    int r, c;
    a_piece<SlabK>(idx, r, c);
    return load_row4(A, M, K, bm0 + r, k0 + c, a_vec);
}
__device__ __forceinline__ float4 load_b4(const float* __restrict__ B, int K, int N, int bn0, int k0,
                                          int idx, bool b_vec) {
    int r, c;
    b_piece(idx, r, c);
    return load_row4(B, K, N, k0 + r, bn0 + c, b_vec);
}

// The idx-th piece of A into the transposed slab As[k][Cols::col(k, m)] (k-rows Stride floats
// apart, 4 scalar stores), of B into Bs[k][n] as loaded (one float4 store).
template <int SlabK, int Stride, class Cols>
__device__ __forceinline__ void store_a4_transposed(float (*As)[Stride], int idx, float4 v) {
    int r, c;
    a_piece<SlabK>(idx, r, c);
    const int col = Cols::col(c, r);  // c % 4 == 0, so rows c..c+3 share one column map
    As[c + 0][col] = v.x;
    As[c + 1][col] = v.y;
    As[c + 2][col] = v.z;
    As[c + 3][col] = v.w;
}
__device__ __forceinline__ void store_b4(float (*Bs)[kN], int idx, float4 v) {
    int r, c;
    b_piece(idx, r, c);
    *reinterpret_cast<float4*>(&Bs[r][c]) = v;
}

// Global -> registers: the slab starting at k0, zeros outside the matrices.
template <int SlabK>
__device__ __forceinline__ void load_slab(const float* __restrict__ A, const float* __restrict__ B,
                                          int M, int N, int K, int bm0, int bn0, int k0, int tid,
                                          bool a_vec, bool b_vec,
                                          float4 (&a_stage)[Slab<SlabK>::a_loads],
                                          float4 (&b_stage)[Slab<SlabK>::b_loads]) {
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::a_loads; ++l) a_stage[l] = load_a4<SlabK>(A, M, K, bm0, k0, tid + l * kThreads, a_vec);
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::b_loads; ++l) b_stage[l] = load_b4(B, K, N, bn0, k0, tid + l * kThreads, b_vec);
}

// Registers -> one shared buffer, A transposed.
template <int SlabK, int Stride, class Cols>
__device__ __forceinline__ void store_slab(float (*As)[Stride], float (*Bs)[kN], int tid,
                                           const float4 (&a_stage)[Slab<SlabK>::a_loads],
                                           const float4 (&b_stage)[Slab<SlabK>::b_loads]) {
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::a_loads; ++l) store_a4_transposed<SlabK, Stride, Cols>(As, tid + l * kThreads, a_stage[l]);
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::b_loads; ++l) store_b4(Bs, tid + l * kThreads, b_stage[l]);
}

// Global -> shared with nothing in between (each piece stored as soon as it is loaded), A
// transposed: the staging of the single-buffered kernels.
template <int SlabK, int Stride, class Cols>
__device__ __forceinline__ void copy_slab(float (*As)[Stride], float (*Bs)[kN], const float* __restrict__ A,
                                          const float* __restrict__ B, int M, int N, int K, int bm0,
                                          int bn0, int k0, int tid, bool a_vec, bool b_vec) {
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::a_loads; ++l) {
        const int idx = tid + l * kThreads;
        store_a4_transposed<SlabK, Stride, Cols>(As, idx, load_a4<SlabK>(A, M, K, bm0, k0, idx, a_vec));
    }
#pragma unroll
    for (int l = 0; l < Slab<SlabK>::b_loads; ++l) {
        const int idx = tid + l * kThreads;
        store_b4(Bs, idx, load_b4(B, K, N, bn0, k0, idx, b_vec));
    }
}

// Step k's fragments from the transposed A slab and the B slab: rows am .. am+3 and
// am + dm .. am + dm + 3, columns bn .. bn+3 and bn + dn .. bn + dn + 3, each run one float4.
template <int Stride, class Cols>
__device__ __forceinline__ void load_fragments(const float (*As)[Stride], const float (*Bs)[kN], int k,
                                               int am, int dm, int bn, int dn, float (&a)[8],
                                               float (&b)[8]) {
    load_pair4(&As[k][Cols::col(k, am)], &As[k][Cols::col(k, am + dm)], a);
    load_pair4(&Bs[k][bn], &Bs[k][bn + dn], b);
}

// The FMAs of one slab with the shared reads one k-step ahead: on entry a[0], b[0] hold step 0;
// step k + 1 loads into the other register set while step k's 64 FMAs run.
template <int SlabK, int Stride, class Cols>
__device__ __forceinline__ void slab_fmas_prefetched(const float (*As)[Stride], const float (*Bs)[kN],
                                                     int am, int dm, int bn, int dn,
                                                     float (&acc)[8][8], float (&a)[2][8],
                                                     float (&b)[2][8]) {
#pragma unroll
    for (int k = 0; k < SlabK; ++k) {
        if (k + 1 < SlabK) load_fragments<Stride, Cols>(As, Bs, k + 1, am, dm, bn, dn, a[(k + 1) & 1], b[(k + 1) & 1]);
        outer_product(acc, a[k & 1], b[k & 1]);
    }
}

// The whole block tile with global prefetch and double-buffered shared memory
// (global_prefetch_double_buffer explains the pipeline; smem_padding, smem_swizzle_xor and
// warp_tile reuse it with another A layout or thread-to-quadrant map). tid is the thread's
// index in 0..255; (am, dm, bn, dn) its quadrants within the block tile, as in load_fragments.
template <int SlabK, int Stride, class Cols>
__device__ __forceinline__ void gemm_double_buffered(int M, int N, int K, float alpha,
                                                     const float* __restrict__ A,
                                                     const float* __restrict__ B, float beta,
                                                     float* __restrict__ C, int tid, int am, int dm,
                                                     int bn, int dn) {
    __shared__ __align__(16) float As[2][SlabK][Stride];
    __shared__ __align__(16) float Bs[2][SlabK][kN];

    const VecFlags vec = vec_flags(N, K, A, B, C);

    const int bm0 = blockIdx.y * kM;
    const int bn0 = blockIdx.x * kN;
    const int slabs = (K + SlabK - 1) / SlabK;  // >= 1

    float acc[8][8];
    zero_tile(acc);

    float4 a_stage[Slab<SlabK>::a_loads], b_stage[Slab<SlabK>::b_loads];
    load_slab<SlabK>(A, B, M, N, K, bm0, bn0, 0, tid, vec.a, vec.b, a_stage, b_stage);
    store_slab<SlabK, Stride, Cols>(As[0], Bs[0], tid, a_stage, b_stage);
    __syncthreads();

    float a[2][8], b[2][8];  // register double buffer for the shared reads
    load_fragments<Stride, Cols>(As[0], Bs[0], 0, am, dm, bn, dn, a[0], b[0]);

    for (int s = 0; s < slabs; ++s) {
        const int cur = s & 1;
        const bool has_next = s + 1 < slabs;  // the same for the whole block
        // Issue the next slab's global loads now; they are not needed until after the FMAs.
        if (has_next) load_slab<SlabK>(A, B, M, N, K, bm0, bn0, (s + 1) * SlabK, tid, vec.a, vec.b, a_stage, b_stage);

        slab_fmas_prefetched<SlabK, Stride, Cols>(As[cur], Bs[cur], am, dm, bn, dn, acc, a, b);

        if (has_next) {
            // Buffer cur ^ 1 was last read in iteration s - 1, which every thread finished before
            // the barrier that ended it, so it can be overwritten without another barrier first.
            store_slab<SlabK, Stride, Cols>(As[cur ^ 1], Bs[cur ^ 1], tid, a_stage, b_stage);
            __syncthreads();  // the new slab is visible to all; SlabK even, so slot 0 is free
            load_fragments<Stride, Cols>(As[cur ^ 1], Bs[cur ^ 1], 0, am, dm, bn, dn, a[0], b[0]);
        }
    }

    store_quadrants_8x8(C, M, N, bm0 + am, dm, bn0 + bn, dn, acc, alpha, beta, vec.c);
}

}  // namespace tile128
