// The CUDA C Programming Guide's Matrix view, shared by guide_global_strided and
// guide_smem_submatrix_16, which include it (see common.cuh for the rules of a shared header).
// Row-major view: element (row, col) lives at elements[row * stride + col]. T is const float for
// the inputs, so the read-only operands stay read-only through the view.

#pragma once
template <typename T>
struct Matrix {
    int width;   // columns
    int height;  // rows
    int stride;  // elements between the starts of two consecutive rows
    T* elements;
};

template <typename T>
__device__ __forceinline__ float get_element(const Matrix<T>& m, int row, int col) {
    return m.elements[(size_t)row * m.stride + col];
}

__device__ __forceinline__ void set_element(const Matrix<float>& m, int row, int col, float value) {
    m.elements[(size_t)row * m.stride + col] = value;
}
