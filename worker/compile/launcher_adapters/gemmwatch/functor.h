// gemmwatch's launcher for a repository whose launcher is an object: a class built once for the
// problem and then called for each run, as AD2605/gemm-zoo's runner does
// (`Kernel kernel(m, n, k, properties); ... kernel(a, b, c, d, alpha, beta, stream);`). A description
// names it `"launcher": "gemmwatch::functor<Type>"`; its args are M, N, K (what the object is built
// from), then the call operator's parameters in order. The worker compiles this header after the
// repository's unit (worker/compile/compile_sandbox.py).
//
// The object is built the way such a runner builds it, outside its timed loop: on the first call at
// a size, from the first of (M, N, K, the device's cudaDeviceProp), (M, N, K) or nothing that the type
// accepts, and kept for every later call at that size. Another size builds another (the old one is
// deleted first, as a runner's object goes out of scope). The last one is left for the process's end:
// a destructor that frees device memory would run after the CUDA runtime is torn down.
#pragma once

#include <type_traits>
#include <cuda_runtime.h>

namespace gemmwatch {

namespace detail {
template <class>
inline constexpr bool always_false = false;

template <class F>
F *build(int M, int N, int K) {
  if constexpr (std::is_constructible_v<F, int, int, int, const cudaDeviceProp &>) {
    cudaDeviceProp properties{};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&properties, device) != cudaSuccess)
      (void)cudaGetLastError();  // zeros: the object's own checks see them, as its runner's would
    return new F(M, N, K, properties);
  } else if constexpr (std::is_constructible_v<F, int, int, int>) {
    return new F(M, N, K);
  } else if constexpr (std::is_default_constructible_v<F>) {
    return new F();
  } else {
    static_assert(always_false<F>,
                  "gemmwatch::functor<Type>: Type must be built from (M, N, K, const cudaDeviceProp&), from "
                  "(M, N, K) or from nothing; one built otherwise needs a launcher of the repository's own");
    return nullptr;
  }
}

// The object for this size: built at its first call, kept for the rest.
template <class F>
F &for_size(int M, int N, int K) {
  static F *built = nullptr;
  static int built_for[3] = {0, 0, 0};
  if (built == nullptr || built_for[0] != M || built_for[1] != N || built_for[2] != K) {
    delete built;
    built = nullptr;
    built = build<F>(M, N, K);
    built_for[0] = M;
    built_for[1] = N;
    built_for[2] = K;
  }
  return *built;
}

// The call operator's type, where the type has exactly one (not overloaded, not a template).
template <class F, class = void>
struct CallOperator {
  using type = void;
};
template <class F>
struct CallOperator<F, std::void_t<decltype(&F::operator())>> {
  using type = decltype(&F::operator());
};

// gemmwatch's launcher: M, N, K, then the call operator's own parameters.
template <class F, class Op>
struct Caller {
  static void call(int, int, int) {
    static_assert(always_false<F>,
                  "gemmwatch::functor<Type>: Type must have one call operator, operator()(...), neither "
                  "overloaded nor a template, for gemmwatch to read its parameters");
  }
};
template <class F, class R, class... P>
struct Caller<F, R (F::*)(P...)> {
  static R call(int M, int N, int K, P... p) { return for_size<F>(M, N, K)(p...); }
};
template <class F, class R, class... P>
struct Caller<F, R (F::*)(P...) const> : Caller<F, R (F::*)(P...)> {};
template <class F, class R, class... P>
struct Caller<F, R (F::*)(P...) noexcept> : Caller<F, R (F::*)(P...)> {};
template <class F, class R, class... P>
struct Caller<F, R (F::*)(P...) const noexcept> : Caller<F, R (F::*)(P...)> {};
}  // namespace detail

// A reference to the launcher function, so `&gemmwatch::functor<Type>` is its address, as the
// launcher unit takes every launcher's.
template <class F>
constexpr auto &functor = detail::Caller<F, typename detail::CallOperator<F>::type>::call;

}  // namespace gemmwatch
