// Shared device helpers for the SGEMM kernels: guarded loads, the alpha/beta epilogue, register
// tile arithmetic. Not a kernel of its own.
// Kernels #include it; the description carries it (gemmwatch.json), so NVRTC gets it in memory.
// Rules for code in a shared header: everything is __device__ __forceinline__ (the kernels compile
// to the same code as when these lines were pasted into each file); no macro left defined (a
// GW_ helper #undef'd before the header's end at most), and no identifier that a tunable could
// -D away (BK, TILE, BLOCK, BLOCK_SIZE, STAGES, SKEW, COALESCED, BM, BN, THREADS, ...), since the
// -D options apply to the headers as well.
#pragma once

// A row of a matrix is 16-byte aligned only if the base pointer is (and the row length is a
// multiple of 4 floats); kernels test the base once and choose 128-bit or scalar accesses.
__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Which operands allow 128-bit accesses: A's rows are 16-byte aligned when K % 4 == 0 and A is,
// B's and C's when N % 4 == 0 and the base is.
struct VecFlags {
    bool a, b, c;
};
__device__ __forceinline__ VecFlags vec_flags(int N, int K, const float* A, const float* B, const float* C) {
    return {(K % 4 == 0) && aligned16(A), (N % 4 == 0) && aligned16(B), (N % 4 == 0) && aligned16(C)};
}

// P[r][c .. c+3] of a rows x cols row-major matrix, zeros outside it. c is a multiple of 4.
// vec: every row starts 16-byte aligned, so the in-bounds piece is one aligned 128-bit load;
// otherwise (and for pieces that cross the right edge) four guarded scalar loads.
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

// One element of the epilogue: *p = alpha * acc + beta * *p. BLAS convention: with beta == 0,
// C is write-only (it may hold NaN or garbage; the runner poisons it to check).
__device__ __forceinline__ void store_axpby(float* p, float acc, float alpha, float beta) {
    *p = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * *p;
}

// C[r][c .. c+3] = alpha * acc[0..3] + beta * C[r][c .. c+3], only inside C, C unread when
// beta == 0. vec: rows of C are 16-byte aligned (N % 4 == 0, aligned base), so an in-bounds
// piece is one 128-bit load/store.
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

// The epilogue of an 8x8 register tile laid out as 2x2 quadrants of 4x4: rows r0 .. r0+3 and
// r0 + dr .. r0 + dr + 3, columns c0 .. c0+3 and c0 + dc .. c0 + dc + 3 (acc[i][0..3] and
// acc[i][4..7]).
__device__ __forceinline__ void store_quadrants_8x8(float* __restrict__ Cm, int rows, int cols, int r0,
                                                    int dr, int c0, int dc, const float (&acc)[8][8],
                                                    float alpha, float beta, bool vec) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = r0 + (i < 4 ? i : dr + i - 4);
        store_row4(Cm, rows, cols, r, c0, &acc[i][0], alpha, beta, vec);
        store_row4(Cm, rows, cols, r, c0 + dc, &acc[i][4], alpha, beta, vec);
    }
}

template <int Rows, int Cols>
__device__ __forceinline__ void zero_tile(float (&acc)[Rows][Cols]) {
#pragma unroll
    for (int i = 0; i < Rows; ++i)
#pragma unroll
        for (int j = 0; j < Cols; ++j) acc[i][j] = 0.0f;
}

// acc += a (column) x b (row): one k-step of a register tile, Rows * Cols FMAs, i outer, j inner.
template <int Rows, int Cols>
__device__ __forceinline__ void outer_product(float (&acc)[Rows][Cols], const float (&a)[Rows],
                                              const float (&b)[Cols]) {
#pragma unroll
    for (int i = 0; i < Rows; ++i)
#pragma unroll
        for (int j = 0; j < Cols; ++j) acc[i][j] += a[i] * b[j];
}

// Two 128-bit shared (or global) loads into 8 registers: x[0..3] from lo, x[4..7] from hi.
// Both addresses must be 16-byte aligned.
__device__ __forceinline__ void load_pair4(const float* lo, const float* hi, float (&x)[8]) {
    const float4 l = *reinterpret_cast<const float4*>(lo);
    const float4 h = *reinterpret_cast<const float4*>(hi);
    x[0] = l.x; x[1] = l.y; x[2] = l.z; x[3] = l.w;
    x[4] = h.x; x[5] = h.y; x[6] = h.z; x[7] = h.w;
}

// x[4j .. 4j+3] = p[0 .. 3] as one 128-bit load (p 16-byte aligned); j is a compile-time index
// once the caller's loop is unrolled.
template <int Len>
__device__ __forceinline__ void load4(float (&x)[Len], int j, const float* p) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    x[4 * j + 0] = v.x;
    x[4 * j + 1] = v.y;
    x[4 * j + 2] = v.z;
    x[4 * j + 3] = v.w;
}

// A pointer into shared memory as the 32-bit shared-window address PTX's cp.async, ldmatrix
// and mbarrier instructions take.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 matrices of 16-bit elements (or 8 x 16 of 8-bit ones) from shared memory; lane i gives the address of a row
// (lanes 0-7 the first matrix's, 8-15 the second's ...). .trans delivers them transposed.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&x)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&x)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]) : "r"(smem_addr(p)));
}

// Asynchronous copies (cp.async, sm_80 and later) to a shared-window address dst: 16 or 4 bytes
// global -> shared; src_bytes 0 writes zeros (src is not read, but must be a valid address).
__device__ __forceinline__ void cp16(unsigned dst, const float* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp4(unsigned dst, const float* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// P[r][c .. c+3] of a rows x cols row-major matrix into 16 bytes of shared memory, zeros outside
// (the cp.async counterpart of load_row4).
// vec: rows are 16-byte aligned (cols % 4 == 0, aligned base), so a piece is all in or all out.
__device__ __forceinline__ void copy_piece(unsigned dst, const float* P, int rows, int cols, int r, int c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols;
        cp16(dst, in ? P + (size_t)r * cols + c : P, in ? 16 : 0);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const bool in = r < rows && c + e < cols;
            cp4(dst + 4 * e, in ? P + (size_t)r * cols + c + e : P, in ? 4 : 0);
        }
    }
}

// 16 bytes of a rows x cols byte matrix (FP8) at (r, c) into shared memory at dst (a shared-window
// address; dst_ptr the same place as a pointer), zeros outside it. vec: rows start 16-byte aligned
// (cols % 16 == 0, aligned base), so a piece is wholly in or out and one cp.async moves it;
// otherwise byte by byte, synchronously.
__device__ __forceinline__ void copy16_bytes(unsigned dst, unsigned char* dst_ptr, const unsigned char* P, int rows,
                                             int cols, int r, int c, bool vec) {
    if (vec) {
        const bool in = r < rows && c < cols;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                     "l"(in ? P + (size_t)r * cols + c : P), "r"(in ? 16 : 0) : "memory");
    } else {
#pragma unroll 1
        for (int e = 0; e < 16; ++e) dst_ptr[e] = (r < rows && c + e < cols) ? P[(size_t)r * cols + c + e] : 0;
    }
}

// Grouped rasterisation: which C tile (tile_m, tile_n) the id-th unit of work computes, on a grid
// of tiles_n tiles across and tiles_m down. Blocks start roughly in launch order, x fastest; taken
// literally, the blocks resident at one time form a few full block-rows, reading a few rows of A
// and all of B. Here consecutive ids walk down a group of `group` block-rows first, then across,
// so the resident set is a squarer patch of C and shares more of A and B in L2. A bijection on
// the tiles (the last group may have fewer rows); group <= 1 keeps the plain order.
__device__ __forceinline__ void raster_grouped_id(int group, int id, int tiles_n, int tiles_m, int& tile_m,
                                                  int& tile_n) {
    if (group <= 1) {
        tile_m = id / tiles_n;
        tile_n = id % tiles_n;
        return;
    }
    const int per_group = group * tiles_n;
    const int first_m = (id / per_group) * group;
    const int rows = min(tiles_m - first_m, group);
    const int in_group = id % per_group;
    tile_m = first_m + in_group % rows;
    tile_n = in_group / rows;
}

// The same for a block of a grid with one block per tile (blockIdx.x across, blockIdx.y down).
__device__ __forceinline__ void raster_grouped(int group, int& tile_m, int& tile_n) {
    raster_grouped_id(group, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x, gridDim.y, tile_m, tile_n);
}

// The same for a block of a grid launched in horizontal pairs (clusters of two, gridDim.x even):
// the pairs are rastered as blocks are otherwise, and each block of a pair takes one of its two
// adjacent tile-columns, the same tile-row (a block past N reads zeros and stores nothing).
__device__ __forceinline__ void raster_grouped_pairs(int group, int& tile_m, int& tile_n) {
    int pair_n;
    raster_grouped_id(group, blockIdx.y * (gridDim.x / 2) + blockIdx.x / 2, gridDim.x / 2, gridDim.y, tile_m, pair_n);
    tile_n = 2 * pair_n + (blockIdx.x & 1);
}
