// Shared device code of the TF32 wgmma kernels (tf32_wgmma and tf32x3_wgmma, one source): FP32 to
// TF32 rounding and splitting, and an A slab of 32 k copied (by common.cuh's copy_piece) into
// wgmma's K-major 128-byte swizzle by a producer warpgroup. The rules of common.cuh hold.
#pragma once

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}
// x's TF32 part and the TF32 part of the rest: x - big is exact in FP32 (same sign and exponent).
__device__ __forceinline__ void split_tf32(float x, unsigned& big, unsigned& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}

// Where producer thread tid (0..127) puts its pieces of an A slab: chunk tid % 8 (4 k) of rows
// tid / 8 + 16 j, each row 128 bytes with chunk c stored at c ^ (row % 8); (row + 16 j) % 8 is the
// same for every j, so piece j lies at this offset + j * 2048.
__device__ __forceinline__ unsigned a_piece_offset(int tid) {
    const int c = tid & 7, r = tid >> 3;
    return r * 128 + ((c ^ (r & 7)) * 16);
}

// ROWS rows from row0 and 32 k from k0 of row-major A (M x K) into the slab at `slab` (K-major,
// 128-byte swizzle), zeros outside A: this thread's ROWS / 16 pieces, by cp.async.
template <int ROWS>
__device__ __forceinline__ void copy_a_slab(unsigned slab, const float* A, int M, int K, int row0, int k0,
                                            bool vec_a, int tid) {
    const int c = tid & 7, r = tid >> 3;
    const unsigned dst = slab + a_piece_offset(tid);
    if (vec_a && row0 + ROWS <= M && k0 + 32 <= K) {
        const float* src = A + (size_t)(row0 + r) * K + k0 + 4 * c;
#pragma unroll
        for (int j = 0; j < ROWS / 16; ++j) cp16(dst + j * 16 * 128, src + (size_t)j * 16 * K, 16);
    } else {
#pragma unroll
        for (int j = 0; j < ROWS / 16; ++j) copy_piece(dst + j * 16 * 128, A, M, K, row0 + r + 16 * j, k0 + 4 * c, vec_a);
    }
}
