// gemmwatch's stand-in for the part of PyTorch's C++ API that a kernel file's host code uses, for
// files built with `"build": "torch.utils.cpp_extension"` (docs/KERNELS.md, "Launchers that take
// torch::Tensor"). The worker has no libtorch: a launcher such as
//
//     void sgemm(torch::Tensor a, torch::Tensor b, torch::Tensor c)
//
// is compiled against these declarations and called by the worker with one TensorRecord per matrix,
// laid out as worker/arguments/torch_tensors.py lays it out (field for field). The rest of what such a
// file holds (its PYBIND11_MODULE or TORCH_LIBRARY block, its checks) compiles and never runs.
//
// What cannot be done without PyTorch fails loudly at run time, never quietly: a tensor allocated
// by the launcher (torch::empty), a copy (.contiguous() of a strided tensor), a failed TORCH_CHECK.
// Each writes its reason to stderr and aborts; the case's error then carries it.
#pragma once

#include <cuda_runtime.h>

// What PyTorch's headers bring with them, which files that include them use unnamed (assert, std::min).
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace gemmwatch_torch {

// One matrix of a call, as the worker passes it: worker/arguments/torch_tensors.TensorRecord.
struct TensorRecord {
  void* data;
  int64_t dim;
  int64_t sizes[4];
  int64_t strides[4];  // in elements, as PyTorch counts them
  int32_t scalar_type;
  int32_t device_index;
  // For a launcher that makes C itself: the case's C, which torch::empty of C's sizes and dtype returns.
  TensorRecord* output;
};

template <typename... Parts>
std::string joined(const Parts&... parts) {
  std::ostringstream out;
  (void)(out << ... << parts);
  return out.str();
}

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::fflush(stderr);
  std::abort();
}

[[noreturn]] inline void not_here(const std::string& what) {
  fail(joined("gemmwatch's stand-in for torch cannot ", what,
              ": the worker has no PyTorch. Describe a launcher that takes every matrix, C included, as a "
              "torch::Tensor (docs/KERNELS.md, \"Launchers that take torch::Tensor\")"));
}

// What pybind11's and TORCH_LIBRARY's blocks are handed: every registration is accepted and dropped.
struct Registry {
  std::string doc_;
  template <typename... Any>
  Registry& def(Any&&...) { return *this; }
  template <typename... Any>
  Registry& impl(Any&&...) { return *this; }
  std::string& doc() { return doc_; }
};

}  // namespace gemmwatch_torch

namespace c10 {

// PyTorch's own numbering (c10/core/ScalarType.h), so a record reads as PyTorch would read it.
enum class ScalarType : int8_t {
  Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7, Bool = 11,
  BFloat16 = 15, Float8_e5m2 = 23, Float8_e4m3fn = 24, Undefined = 127
};
constexpr ScalarType kByte = ScalarType::Byte, kChar = ScalarType::Char, kShort = ScalarType::Short,
                     kInt = ScalarType::Int, kLong = ScalarType::Long, kHalf = ScalarType::Half,
                     kFloat = ScalarType::Float, kDouble = ScalarType::Double, kBool = ScalarType::Bool,
                     kBFloat16 = ScalarType::BFloat16, kFloat8_e5m2 = ScalarType::Float8_e5m2,
                     kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;

inline const char* toString(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "Byte";
    case ScalarType::Char: return "Char";
    case ScalarType::Short: return "Short";
    case ScalarType::Int: return "Int";
    case ScalarType::Long: return "Long";
    case ScalarType::Half: return "Half";
    case ScalarType::Float: return "Float";
    case ScalarType::Double: return "Double";
    case ScalarType::Bool: return "Bool";
    case ScalarType::BFloat16: return "BFloat16";
    case ScalarType::Float8_e5m2: return "Float8_e5m2";
    case ScalarType::Float8_e4m3fn: return "Float8_e4m3fn";
    default: return "Undefined";
  }
}
inline std::ostream& operator<<(std::ostream& out, ScalarType t) { return out << toString(t); }

inline int64_t elementSize(ScalarType t) {
  switch (t) {
    case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16: return 2;
    case ScalarType::Int: case ScalarType::Float: return 4;
    case ScalarType::Long: case ScalarType::Double: return 8;
    default: return 1;
  }
}

// The element types a launcher names in data_ptr<T>(): storage only (the launcher casts the pointer).
struct Half { uint16_t x; };
struct BFloat16 { uint16_t x; };
struct Float8_e4m3fn { uint8_t x; };
struct Float8_e5m2 { uint8_t x; };

template <typename T> struct TypeOf { static constexpr ScalarType value = ScalarType::Undefined; };
template <> struct TypeOf<float> { static constexpr ScalarType value = ScalarType::Float; };
template <> struct TypeOf<double> { static constexpr ScalarType value = ScalarType::Double; };
template <> struct TypeOf<Half> { static constexpr ScalarType value = ScalarType::Half; };
template <> struct TypeOf<BFloat16> { static constexpr ScalarType value = ScalarType::BFloat16; };
template <> struct TypeOf<Float8_e4m3fn> { static constexpr ScalarType value = ScalarType::Float8_e4m3fn; };
template <> struct TypeOf<Float8_e5m2> { static constexpr ScalarType value = ScalarType::Float8_e5m2; };
template <> struct TypeOf<int32_t> { static constexpr ScalarType value = ScalarType::Int; };
template <> struct TypeOf<int64_t> { static constexpr ScalarType value = ScalarType::Long; };
template <> struct TypeOf<int8_t> { static constexpr ScalarType value = ScalarType::Char; };
template <> struct TypeOf<uint8_t> { static constexpr ScalarType value = ScalarType::Byte; };

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr DeviceType kCPU = DeviceType::CPU, kCUDA = DeviceType::CUDA;

struct Device {
  DeviceType type_ = DeviceType::CUDA;
  int8_t index_ = 0;
  DeviceType type() const { return type_; }
  int8_t index() const { return index_; }
  bool is_cuda() const { return type_ == DeviceType::CUDA; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};
inline std::ostream& operator<<(std::ostream& out, const Device& d) {
  return out << (d.is_cuda() ? "cuda:" : "cpu:") << int(d.index());
}

struct TensorOptions {
  ScalarType dtype_ = ScalarType::Float;
  Device device_{};
  gemmwatch_torch::TensorRecord* output_ = nullptr;  // the input's `output`: where C may be made
  ScalarType dtype() const { return dtype_; }
  Device device() const { return device_; }
  TensorOptions dtype(ScalarType t) const { return TensorOptions{t, device_, output_}; }
  TensorOptions device(Device d) const { return TensorOptions{dtype_, d, output_}; }
  TensorOptions device(DeviceType t) const { return TensorOptions{dtype_, Device{t, 0}, output_}; }
};
inline TensorOptions dtype(ScalarType t) { return TensorOptions{t}; }
inline std::ostream& operator<<(std::ostream& out, const TensorOptions& o) {
  return out << "TensorOptions(dtype=" << o.dtype() << ", device=" << o.device() << ")";
}

struct IntArrayRef {
  const int64_t* data_;
  size_t size_;
  size_t size() const { return size_; }
  int64_t operator[](size_t i) const { return data_[i]; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
};
inline std::ostream& operator<<(std::ostream& out, IntArrayRef r) {
  out << "[";
  for (size_t i = 0; i < r.size(); ++i) out << (i ? ", " : "") << r[i];
  return out << "]";
}

}  // namespace c10

namespace at {

using c10::BFloat16;
using c10::Device;
using c10::DeviceType;
using c10::Half;
using c10::IntArrayRef;
using c10::ScalarType;
using c10::TensorOptions;
using c10::kBFloat16;
using c10::kBool;
using c10::kByte;
using c10::kChar;
using c10::kCUDA;
using c10::kCPU;
using c10::kDouble;
using c10::kFloat;
using c10::kFloat8_e4m3fn;
using c10::kFloat8_e5m2;
using c10::kHalf;
using c10::kInt;
using c10::kLong;
using c10::kShort;

// One pointer, copied freely (no user-declared copy or destructor), so that a by-value
// `torch::Tensor` parameter is passed as the record's address and `const torch::Tensor&` as the
// address of a cell that holds it: worker/compile/launcher_library.arguments does exactly that.
class Tensor {
 public:
  gemmwatch_torch::TensorRecord* impl_ = nullptr;

  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return impl_->dim; }
  int64_t ndimension() const { return dim(); }
  int64_t size(int64_t d) const { return impl_->sizes[wrapped(d)]; }
  int64_t stride(int64_t d) const { return impl_->strides[wrapped(d)]; }
  IntArrayRef sizes() const { return IntArrayRef{impl_->sizes, size_t(impl_->dim)}; }
  IntArrayRef strides() const { return IntArrayRef{impl_->strides, size_t(impl_->dim)}; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t i = 0; i < dim(); ++i) n *= impl_->sizes[i];
    return n;
  }
  ScalarType scalar_type() const { return ScalarType(impl_->scalar_type); }
  ScalarType dtype() const { return scalar_type(); }
  int64_t element_size() const { return c10::elementSize(scalar_type()); }
  int64_t itemsize() const { return element_size(); }
  Device device() const { return Device{DeviceType::CUDA, int8_t(impl_->device_index)}; }
  int64_t get_device() const { return impl_->device_index; }
  bool is_cuda() const { return true; }
  bool is_cpu() const { return false; }
  TensorOptions options() const { return TensorOptions{scalar_type(), device(), impl_->output}; }
  bool is_contiguous() const {
    int64_t expected = 1;
    for (int64_t i = dim() - 1; i >= 0; --i) {
      if (impl_->sizes[i] != 1 && impl_->strides[i] != expected) return false;
      expected *= impl_->sizes[i];
    }
    return true;
  }
  Tensor contiguous() const {
    if (!is_contiguous()) gemmwatch_torch::not_here("copy a strided tensor (.contiguous())");
    return *this;
  }

  void* data_ptr() const { return impl_->data; }
  const void* const_data_ptr() const { return impl_->data; }
  void* mutable_data_ptr() const { return impl_->data; }
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(checked<T>()); }
  template <typename T>
  const T* const_data_ptr() const { return static_cast<const T*>(checked<T>()); }
  template <typename T>
  T* mutable_data_ptr() const { return static_cast<T*>(checked<T>()); }

 private:
  int64_t wrapped(int64_t d) const {
    int64_t at = d < 0 ? d + dim() : d;
    if (at < 0 || at >= dim())
      gemmwatch_torch::fail(gemmwatch_torch::joined("Dimension out of range (expected to be in range of [",
                                                    -dim(), ", ", dim() - 1, "], but got ", d, ")"));
    return at;
  }
  // As PyTorch's data_ptr<T>() does: T must be the tensor's own element type.
  template <typename T>
  void* checked() const {
    constexpr ScalarType wanted = c10::TypeOf<std::remove_cv_t<T>>::value;
    if (wanted != ScalarType::Undefined && wanted != scalar_type())
      gemmwatch_torch::fail(gemmwatch_torch::joined("expected scalar type ", wanted, " but found ", scalar_type()));
    return impl_->data;
  }
};

inline std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  return out << "Tensor(sizes=" << t.sizes() << ", dtype=" << t.scalar_type() << ")";
}

inline Device device_of(const Tensor& t) { return t.device(); }

// A tensor the launcher allocates. PyTorch's allocator is not here: the one tensor it may make is C,
// for a launcher whose description names no C (it returns the C it makes). That C is the case's,
// reached through the options of an input tensor (`torch::empty({M, N}, a.options())`), and only at
// C's own sizes and dtype; anything else fails, saying what was asked.
namespace detail {
inline Tensor made(const char* how, std::initializer_list<int64_t> sizes, const TensorOptions& options) {
  gemmwatch_torch::TensorRecord* c = options.output_;
  bool fits = c != nullptr && int64_t(sizes.size()) == c->dim && options.dtype() == ScalarType(c->scalar_type);
  for (int64_t i = 0; fits && i < c->dim; ++i) fits = sizes.begin()[i] == c->sizes[i];
  if (fits) return Tensor{c};
  std::ostringstream asked;
  asked << IntArrayRef{sizes.begin(), sizes.size()} << " " << options.dtype();
  if (c == nullptr)
    gemmwatch_torch::not_here(gemmwatch_torch::joined("allocate a tensor (", how, " of ", asked.str(), ")"));
  gemmwatch_torch::not_here(gemmwatch_torch::joined("allocate a tensor (", how, " of ", asked.str(),
                                                    ") other than C (", IntArrayRef{c->sizes, size_t(c->dim)}, " ",
                                                    ScalarType(c->scalar_type), ")"));
}
}  // namespace detail

inline Tensor empty(std::initializer_list<int64_t> sizes, const TensorOptions& options = {}) {
  return detail::made("empty", sizes, options);
}
inline Tensor zeros(std::initializer_list<int64_t> sizes, const TensorOptions& options = {}) {
  Tensor c = detail::made("zeros", sizes, options);
  const size_t bytes = size_t(c.numel() * c.element_size());
  cudaPointerAttributes where{};
  if (cudaPointerGetAttributes(&where, c.data_ptr()) == cudaSuccess && where.type == cudaMemoryTypeDevice) {
    cudaMemsetAsync(c.data_ptr(), 0, bytes, nullptr);  // on the legacy default stream, the launcher's own
  } else {
    (void)cudaGetLastError();  // host memory (the CPU double's), which the query may call an error
    std::memset(c.data_ptr(), 0, bytes);
  }
  return c;
}
template <typename Shape, typename... Any>
Tensor empty(const Shape&, Any&&...) { gemmwatch_torch::not_here("allocate a tensor (empty) of sizes not written in braces"); }
template <typename Shape, typename... Any>
Tensor zeros(const Shape&, Any&&...) { gemmwatch_torch::not_here("allocate a tensor (zeros) of sizes not written in braces"); }
template <typename... Any>
Tensor empty_like(const Tensor&, Any&&...) { gemmwatch_torch::not_here("allocate a tensor (empty_like)"); }
template <typename... Any>
Tensor zeros_like(const Tensor&, Any&&...) { gemmwatch_torch::not_here("allocate a tensor (zeros_like)"); }

namespace cuda {

// PyTorch's current stream, unless a caller set another, is the legacy default stream: the
// stream gemmwatch times a launcher that takes none on (worker/measure/launcher_gpu.py).
struct CUDAStream {
  cudaStream_t stream_ = nullptr;
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  Device device() const { return Device{}; }
};
inline CUDAStream getCurrentCUDAStream(int = -1) { return CUDAStream{}; }
inline CUDAStream getDefaultCUDAStream(int = -1) { return CUDAStream{}; }
inline cudaDeviceProp* getCurrentDeviceProperties() {
  static cudaDeviceProp props;
  static bool read = false;
  if (!read) {
    int device = 0;
    cudaGetDevice(&device);
    cudaGetDeviceProperties(&props, device);
    read = true;
  }
  return &props;
}

// One device per case: nothing to switch to.
struct CUDAGuard {
  template <typename... Any>
  explicit CUDAGuard(Any&&...) {}
};
using OptionalCUDAGuard = CUDAGuard;

}  // namespace cuda
}  // namespace at

namespace c10 {
namespace cuda {
using at::cuda::CUDAGuard;
using at::cuda::CUDAStream;
using at::cuda::OptionalCUDAGuard;
using at::cuda::getCurrentCUDAStream;
using at::cuda::getDefaultCUDAStream;
}  // namespace cuda
}  // namespace c10

namespace torch {
using namespace at;  // torch::Tensor, torch::kFloat32 and the rest are at::'s, as in PyTorch
using Dtype = c10::ScalarType;
constexpr c10::ScalarType kFloat32 = c10::ScalarType::Float, kFloat64 = c10::ScalarType::Double,
                          kFloat16 = c10::ScalarType::Half, kInt32 = c10::ScalarType::Int,
                          kInt64 = c10::ScalarType::Long, kInt8 = c10::ScalarType::Char,
                          kUInt8 = c10::ScalarType::Byte, kInt16 = c10::ScalarType::Short;
using Library = gemmwatch_torch::Registry;
}  // namespace torch

namespace pybind11 {
using module = gemmwatch_torch::Registry;
using module_ = gemmwatch_torch::Registry;
struct arg {
  const char* name;
  explicit arg(const char* n) : name(n) {}
  template <typename T>
  arg operator=(T&&) const { return *this; }
};
}  // namespace pybind11
namespace py = pybind11;  // as torch/extension.h names it

#ifndef TORCH_EXTENSION_NAME
#define TORCH_EXTENSION_NAME gemmwatch_extension
#endif

// The binding blocks compile as functions nothing calls: gemmwatch calls the launcher itself.
#define PYBIND11_MODULE(name, variable) \
  [[maybe_unused]] static void gemmwatch_torch_module_##name(gemmwatch_torch::Registry& variable)
#define TORCH_LIBRARY(ns, variable) \
  [[maybe_unused]] static void gemmwatch_torch_library_##ns(gemmwatch_torch::Registry& variable)
#define TORCH_LIBRARY_FRAGMENT(ns, variable) \
  [[maybe_unused]] static void gemmwatch_torch_fragment_##ns(gemmwatch_torch::Registry& variable)
#define TORCH_LIBRARY_IMPL(ns, key, variable) \
  [[maybe_unused]] static void gemmwatch_torch_impl_##ns##_##key(gemmwatch_torch::Registry& variable)
#define TORCH_FN(f) (&f)

#define TORCH_CHECK(cond, ...)                                                                           \
  do {                                                                                                   \
    if (!(cond))                                                                                         \
      gemmwatch_torch::fail(gemmwatch_torch::joined("TORCH_CHECK failed (" #cond ") ", ##__VA_ARGS__)); \
  } while (0)
#define TORCH_CHECK_VALUE(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_CHECK_TYPE(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_CHECK_NOT_IMPLEMENTED(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_WARN(...) (void)(std::cerr << gemmwatch_torch::joined("Warning: ", ##__VA_ARGS__) << std::endl)
#define C10_CUDA_CHECK(expr)                                                                        \
  do {                                                                                              \
    cudaError_t gemmwatch_err = (expr);                                                             \
    if (gemmwatch_err != cudaSuccess)                                                               \
      gemmwatch_torch::fail(gemmwatch_torch::joined("CUDA error: ", cudaGetErrorString(gemmwatch_err))); \
  } while (0)
#define AT_CUDA_CHECK(expr) C10_CUDA_CHECK(expr)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())
