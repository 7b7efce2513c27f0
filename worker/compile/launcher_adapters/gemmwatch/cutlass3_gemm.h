// gemmwatch's launcher for a CUTLASS 3 device GEMM that a repository defines and does not wrap in a
// function of pointers (CUTLASS's own examples: `using Gemm = GemmUniversalAdapter<GemmKernel>;` and a
// main that fills its own buffers). A description names it `"launcher": "gemmwatch::cutlass3_gemm<Gemm>"`
// and the worker compiles this header after the repository's unit (worker/compile/compile_sandbox.py).
//
// It does per call what those examples' timing loops do per iteration: build the arguments, initialize,
// run. C = alpha * A * B + beta * C over gemmwatch's dense buffers in the layouts the type was built for
// (packed strides, as the examples' make_cute_packed_stride), C read and written in place.
#pragma once

#include <cstdio>
#include <type_traits>
#include <cuda_runtime.h>

#include "cutlass_run.h"

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/kernel_hardware_info.h>
#include <cutlass/util/packed_stride.hpp>

namespace gemmwatch {

namespace detail {
// What the launcher's parameters are for a CUTLASS 3 device GEMM; for any other type, void, so the
// launcher is still declared and its static_assert (not a failed substitution) says what is wrong.
template <class Gemm, class = void>
struct Cutlass3 : std::false_type {
  using A = void;
  using B = void;
  using D = void;
};
template <class Gemm>
struct Cutlass3<Gemm, std::void_t<typename Gemm::GemmKernel::ProblemShape, typename Gemm::GemmKernel::StrideA,
                                  typename Gemm::ElementD>> : std::true_type {
  using A = typename Gemm::ElementA;
  using B = typename Gemm::ElementB;
  using D = typename Gemm::ElementD;
};
}  // namespace detail

template <class Gemm>
cudaError_t cutlass3_gemm(int M, int N, int K, float alpha, typename detail::Cutlass3<Gemm>::A const *A,
                          typename detail::Cutlass3<Gemm>::B const *B, float beta,
                          typename detail::Cutlass3<Gemm>::D *C, cudaStream_t stream) {
  static_assert(detail::Cutlass3<Gemm>::value,
                "gemmwatch::cutlass3_gemm<Gemm>: Gemm must be a CUTLASS 3 device GEMM, "
                "cutlass::gemm::device::GemmUniversalAdapter<GemmKernel> with GemmKernel a CUTLASS 3 kernel "
                "(its ProblemShape and StrideA); a CUTLASS 2 device GEMM is gemmwatch::cutlass2_gemm<Gemm>, anything "
                "else needs a launcher of the repository's own");
  if constexpr (!detail::Cutlass3<Gemm>::value) {
    return cudaErrorNotSupported;
  } else {
    using Kernel = typename Gemm::GemmKernel;
    using ProblemShape = typename Kernel::ProblemShape;
    using Source = typename Gemm::ElementC;  // void where the epilogue reads no C: then beta must be 0

    ProblemShape shape{};
    if constexpr (decltype(cute::rank(ProblemShape{}))::value == 4) {
      shape = ProblemShape{M, N, K, 1};
    } else {
      shape = ProblemShape{M, N, K};
    }
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {M, K, 1});
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {N, K, 1});
    auto stride_c = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, {M, N, 1});
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {M, N, 1});

    // The SM count and the clusters that fit, asked of the driver once (the examples ask once a run).
    static cutlass::KernelHardwareInfo const hardware = [] {
      int device = 0;
      cudaGetDevice(&device);
      return cutlass::KernelHardwareInfo::make_kernel_hardware_info<Kernel>(device);
    }();

    typename Gemm::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        shape,
        {A, stride_a, B, stride_b},
        {{alpha, beta}, reinterpret_cast<Source const *>(C), stride_c, C, stride_d},
        hardware};

    Gemm gemm;
    cutlass::Status status = gemm.can_implement(arguments);
    if (status != cutlass::Status::kSuccess) {
      // The adapter answers kInvalid, whose string is "Invalid status"; the kernel's reasons are traced
      // only in CUTLASS's debug builds. A TMA kernel's usual one is alignment.
      std::fprintf(stderr, "gemmwatch::cutlass3_gemm: the GEMM cannot run %dx%dx%d: %s\n", M, N, K,
                   status == cutlass::Status::kInvalid
                       ? "CUTLASS's can_implement refused it (a TMA kernel needs every line of A, B and C to start "
                         "16-byte aligned: each one's contiguous extent a multiple of 16 bytes)"
                       : cutlassGetStatusString(status));
      return cudaErrorNotSupported;
    }
    return detail::initialize_and_run(gemm, arguments, stream, "cutlass3_gemm");
  }
}

}  // namespace gemmwatch
