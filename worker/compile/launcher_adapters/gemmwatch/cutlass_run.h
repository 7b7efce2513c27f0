// What gemmwatch's CUTLASS launchers (cutlass2_gemm.h, cutlass3_gemm.h) do once their arguments are made
// and can_implement has said yes: hand the GEMM a workspace, initialize it, run it on the runner's stream.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cuda_runtime.h>

#include <cutlass/cutlass.h>

namespace gemmwatch::detail {
// At least `bytes` of device memory (stream-K and split-K schedules, serial split-K's semaphores), or
// null with *error set: one for the process, grown when a case needs more and never shrunk, so no call
// after the first allocates.
inline void *workspace(size_t bytes, cudaError_t *error) {
  static void *kept = nullptr;
  static size_t kept_bytes = 0;
  *error = cudaSuccess;
  if (bytes > kept_bytes) {
    cudaFree(kept);
    *error = cudaMalloc(&kept, bytes);
    if (*error != cudaSuccess) {
      kept = nullptr;
      kept_bytes = 0;
      return nullptr;
    }
    kept_bytes = bytes;
  }
  return kept;
}

// initialize, then run; a CUTLASS failure is said on stderr under the launcher's name (the case's error
// ends with the launcher's last line of output).
template <class Gemm>
cudaError_t initialize_and_run(Gemm &gemm, typename Gemm::Arguments const &arguments, cudaStream_t stream,
                               char const *launcher) {
  cudaError_t error = cudaSuccess;
  void *space = workspace(Gemm::get_workspace_size(arguments), &error);
  if (error != cudaSuccess) {
    return error;
  }
  cutlass::Status status = gemm.initialize(arguments, space, stream);
  if (status == cutlass::Status::kSuccess) {
    status = gemm.run(stream);
  }
  if (status != cutlass::Status::kSuccess) {
    std::fprintf(stderr, "gemmwatch::%s: %s\n", launcher, cutlassGetStatusString(status));
    return cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}
}  // namespace gemmwatch::detail
