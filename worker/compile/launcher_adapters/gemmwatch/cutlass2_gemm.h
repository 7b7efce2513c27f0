// gemmwatch's launcher for a CUTLASS 2 device GEMM that a repository defines and runs from its own main
// (`using Gemm = cutlass::gemm::device::Gemm<float, RowMajor, ...>;`, then `Gemm gemm_op; gemm_op(args);`),
// as CUTLASS 2's examples and many repositories built on them do; or a universal one,
// `cutlass::gemm::device::GemmUniversal<...>` (data-parallel, or stream-K with ThreadblockSwizzleStreamK, as
// CUTLASS's example 47 and the repositories that copy it define it). A description names it
// `"launcher": "gemmwatch::cutlass2_gemm<Gemm>"`, and the worker compiles this header after the
// repository's unit (worker/compile/compile_sandbox.py).
//
// Per call it does what those mains do once a run: the arguments (the problem, each matrix with its
// packed leading dimension in the layout the type was built for, {alpha, beta}; a universal GEMM in its
// plain mode, one batch, which a stream-K type splits as its heuristics choose over the device's SMs),
// can_implement, initialize, run, on the runner's stream. C = alpha * A * B + beta * C, C read and written
// in place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <type_traits>
#include <cuda_runtime.h>

#include "cutlass_run.h"

#include <cutlass/cutlass.h>
#include <cutlass/gemm/gemm_enumerated_types.h>
#include <cutlass/gemm_coord.h>
#include <cutlass/layout/matrix.h>

namespace gemmwatch {

namespace detail {
// A CUTLASS 2 universal GEMM (cutlass::gemm::device::GemmUniversal, stream-K or not): Arguments from its
// mode, the problem, a batch count, the epilogue's parameters, four addresses, four batch strides and four
// leading dimensions. It has the same element types as a device::Gemm.
template <class Gemm, class = void>
struct Universal2 : std::false_type {};
template <class Gemm>
struct Universal2<Gemm, std::void_t<typename Gemm::Arguments, typename Gemm::EpilogueOutputOp::Params>>
    : std::bool_constant<std::is_constructible_v<
          typename Gemm::Arguments, cutlass::gemm::GemmUniversalMode, cutlass::gemm::GemmCoord, int,
          typename Gemm::EpilogueOutputOp::Params, void const *, void const *, void const *, void *, int64_t, int64_t,
          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> {};

// A CUTLASS 2 device GEMM: Arguments built from the problem, four TensorRefs and the epilogue's
// parameters (cutlass::gemm::device::Gemm), or a universal one (above). For any other type, void, so the
// launcher is still declared and its static_assert (not a failed substitution) says what is wrong.
template <class Gemm, class = void>
struct Cutlass2 : std::false_type {
  using A = void;
  using B = void;
  using C = void;
  using Scalar = float;
};
template <class Gemm>
struct Cutlass2<Gemm, std::void_t<typename Gemm::TensorRefA, typename Gemm::TensorRefC, typename Gemm::Arguments,
                                  typename Gemm::EpilogueOutputOp::Params>>
    : std::bool_constant<std::is_constructible_v<
          typename Gemm::Arguments, cutlass::gemm::GemmCoord, typename Gemm::TensorRefA, typename Gemm::TensorRefB,
          typename Gemm::TensorRefC, typename Gemm::TensorRefD, typename Gemm::EpilogueOutputOp::Params> ||
                         Universal2<Gemm>::value> {
  using A = typename Gemm::ElementA;
  using B = typename Gemm::ElementB;
  using C = typename Gemm::ElementC;
  using Scalar = typename Gemm::EpilogueOutputOp::ElementCompute;
};

// A packed matrix's leading dimension in the layout the type was built for.
template <class Layout>
int packed(int rows, int columns) {
  return std::is_same_v<Layout, cutlass::layout::ColumnMajor> ? rows : columns;
}
}  // namespace detail

template <class Gemm>
cudaError_t cutlass2_gemm(int M, int N, int K, typename detail::Cutlass2<Gemm>::Scalar alpha,
                          typename detail::Cutlass2<Gemm>::A const *A, typename detail::Cutlass2<Gemm>::B const *B,
                          typename detail::Cutlass2<Gemm>::Scalar beta, typename detail::Cutlass2<Gemm>::C *C,
                          cudaStream_t stream) {
  constexpr bool universal = detail::Universal2<Gemm>::value;
  static_assert(detail::Cutlass2<Gemm>::value,
                "gemmwatch::cutlass2_gemm<Gemm>: Gemm must be a CUTLASS 2 device GEMM, "
                "cutlass::gemm::device::Gemm<...> (Arguments from the problem, four TensorRefs and the epilogue's "
                "parameters) or cutlass::gemm::device::GemmUniversal<...>; a CUTLASS 3 GEMM is "
                "gemmwatch::cutlass3_gemm<Gemm>, anything else needs a launcher of the repository's own");
  if constexpr (!detail::Cutlass2<Gemm>::value) {
    return cudaErrorNotSupported;
  } else {
    using LayoutA = typename Gemm::LayoutA;
    using LayoutB = typename Gemm::LayoutB;
    using LayoutC = typename Gemm::LayoutC;
    int const lda = detail::packed<LayoutA>(M, K), ldb = detail::packed<LayoutB>(K, N),
              ldc = detail::packed<LayoutC>(M, N);
    typename Gemm::Arguments arguments = [&] {
      if constexpr (universal) {
        int64_t const mk = int64_t(M) * K, kn = int64_t(K) * N, mn = int64_t(M) * N;
        return typename Gemm::Arguments(cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K}, 1, {alpha, beta}, A, B,
                                        C, C, mk, kn, mn, mn, int64_t(lda), int64_t(ldb), int64_t(ldc),
                                        int64_t(ldc));
      } else {
        return typename Gemm::Arguments({M, N, K}, {A, LayoutA(lda)}, {B, LayoutB(ldb)}, {C, LayoutC(ldc)},
                                        {C, LayoutC(ldc)}, {alpha, beta});
      }
    }();
    Gemm gemm;
    cutlass::Status status = gemm.can_implement(arguments);
    if (status != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "gemmwatch::cutlass2_gemm: the GEMM cannot run %dx%dx%d: %s (its alignment: each "
                   "matrix's leading dimension a multiple of the type's vector width)\n",
                   M, N, K, cutlassGetStatusString(status));
      return cudaErrorNotSupported;
    }
    return detail::initialize_and_run(gemm, arguments, stream, "cutlass2_gemm");
  }
}

}  // namespace gemmwatch
