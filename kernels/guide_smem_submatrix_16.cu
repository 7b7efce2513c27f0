// Technique: the CUDA C Programming Guide's shared-memory matrix multiply. Each 16x16 block owns a
// 16x16 sub-matrix of C (a strided view from get_sub_matrix) and walks the matching A and B
// sub-matrices, staging each pair in shared memory (one element per thread) to multiply it there.
// Why faster than guide_global_strided: every A and B element fetched from global memory is used by
// 16 threads of the block out of shared memory, so global traffic drops 16-fold.
// Seed: 002_3f42798b53ca6e9c.txt (MatMulKernel with GetSubMatrix, shared-memory version), adapted
// to any M, N, K >= 1 (views clipped at the edges, zeros outside) and C = alpha*A*B + beta*C.
// Tunables: none; BLOCK_SIZE is fixed at 16 (the guide's value and the variant's name).
#include "common.cuh"
#include "guide_matrix.cuh"

#ifndef BLOCK_SIZE
#define BLOCK_SIZE 16
#endif

// The BLOCK_SIZE x BLOCK_SIZE sub-matrix that is `col` sub-matrices right of and `row`
// sub-matrices below the top-left corner of m. It keeps m's stride (a view, not a copy) and is
// clipped to m, so width/height tell the loader which elements really exist.
template <typename T>
__device__ __forceinline__ Matrix<T> get_sub_matrix(const Matrix<T>& m, int row, int col) {
    Matrix<T> sub;
    sub.width = min(BLOCK_SIZE, m.width - col * BLOCK_SIZE);
    sub.height = min(BLOCK_SIZE, m.height - row * BLOCK_SIZE);
    sub.stride = m.stride;
    sub.elements = m.elements + (size_t)m.stride * BLOCK_SIZE * row + (size_t)BLOCK_SIZE * col;
    return sub;
}

extern "C" __global__ void sgemm_guide_smem_submatrix_16(int M, int N, int K, float alpha,
                                                         const float* __restrict__ A,
                                                         const float* __restrict__ B, float beta,
                                                         float* __restrict__ C) {
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];

    const Matrix<const float> a{K, M, K, A};
    const Matrix<const float> b{N, K, N, B};
    const Matrix<float> c{N, M, N, C};

    const int block_row = blockIdx.y;
    const int block_col = blockIdx.x;
    const Matrix<float> c_sub = get_sub_matrix(c, block_row, block_col);

    const int row = threadIdx.y;  // within the sub-matrix
    const int col = threadIdx.x;

    float acc = 0.0f;
    const int tiles = (K + BLOCK_SIZE - 1) / BLOCK_SIZE;
    for (int t = 0; t < tiles; ++t) {
        const Matrix<const float> a_sub = get_sub_matrix(a, block_row, t);
        const Matrix<const float> b_sub = get_sub_matrix(b, t, block_col);
        // Zeros outside the matrices add nothing to the dot products.
        As[row][col] = (row < a_sub.height && col < a_sub.width) ? get_element(a_sub, row, col) : 0.0f;
        Bs[row][col] = (row < b_sub.height && col < b_sub.width) ? get_element(b_sub, row, col) : 0.0f;
        __syncthreads();  // both tiles complete before anyone multiplies

#pragma unroll
        for (int e = 0; e < BLOCK_SIZE; ++e) {
            acc += As[row][e] * Bs[e][col];
        }
        __syncthreads();  // everyone done with the tiles before the next iteration overwrites them
    }

    if (row < c_sub.height && col < c_sub.width) {
        const float out = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * get_element(c_sub, row, col);
        set_element(c_sub, row, col, out);
    }
}
