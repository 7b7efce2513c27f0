// gemmwatch's launcher for a repository whose launcher takes its matrices as CuTe tensors, not pointers
// (andylolu2/simpleGEMM's `simplegemm::gemm<GemmConfigSm80>(A, B, C)`, its main's only call). A
// description names it `"launcher": "gemmwatch::cute_tensors<simplegemm::gemm<simplegemm::GemmConfigSm80>>"`,
// args M, N, K, A, B, C. The worker compiles this header after the repository's unit and writes the rest
// (worker/compile/compile_sandbox.launcher_address): a struct whose `call` hands the three tensors to the
// repository's launcher, template arguments deduced as at home, and the element types and orders of the
// three matrices as the description gives them (cute_tensors_as_described, below).
//
// The tensors are laid out as CuTe's examples and such mains make them: A (M, K), B (N, K) and C (M, N) over
// global memory, each by cute::GenRowMajor or cute::GenColMajor (a static unit stride, the other a runtime
// int64_t), so a launcher written for `Tensor<ViewEngine<gmem_ptr<T *>>, Layout>` finds the types its own
// main gives it.
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

namespace gemmwatch {

namespace detail {
template <class Order, class T>
auto cute_matrix(T *data, int rows, int cols) {
  return cute::make_tensor(cute::make_gmem_ptr(data),
                           cute::make_layout(cute::make_shape(int64_t(rows), int64_t(cols)), Order{}));
}
}  // namespace detail

// Launch: a struct whose static call(a, b, c) calls the repository's launcher. The element pointers are
// not const: a launcher written against views of `T *` (mutable, as its main allocates them) would not
// accept views of `T const *`.
template <class Launch, class TA, class TB, class TC, class OrderA, class OrderB, class OrderC>
struct cute_tensors {
  static void run(int M, int N, int K, TA *A, TB *B, TC *C) {
    auto a = detail::cute_matrix<OrderA>(A, M, K);
    auto b = detail::cute_matrix<OrderB>(B, N, K);
    auto c = detail::cute_matrix<OrderC>(C, M, N);
    Launch::call(a, b, c);
  }
};

// This build's: the types and orders the worker gives as -D macros, from the description's precision and
// layout (worker/compile/header_libraries.CUTE_TYPE_MACROS).
template <class Launch>
using cute_tensors_as_described = cute_tensors<Launch, GEMMWATCH_CUTE_TYPE_A, GEMMWATCH_CUTE_TYPE_B,
                                               GEMMWATCH_CUTE_TYPE_C, GEMMWATCH_CUTE_ORDER_A,
                                               GEMMWATCH_CUTE_ORDER_B, GEMMWATCH_CUTE_ORDER_C>;

}  // namespace gemmwatch
