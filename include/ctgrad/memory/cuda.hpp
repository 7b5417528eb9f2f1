// Device allocations and copies through the CUDA runtime API. Compiled only
// when the consumer links ctgrad::cuda (which defines CTG_HAS_CUDA); plain
// cudaMalloc, never managed memory.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "../errors.hpp"

namespace ctg::cuda {

inline void check(cudaError_t status, std::string const& what) {
  if (status != cudaSuccess)
    throw cuda_error(what + ": " + cudaGetErrorName(status) + " (" +
                     cudaGetErrorString(status) + ")");
}

// Whether a usable device exists; the reason when it does not.
inline bool device_available(std::string* why = nullptr) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why)
      *why = status != cudaSuccess ? std::string("cudaGetDeviceCount failed: ") +
                                         cudaGetErrorString(status)
                                   : std::string("no CUDA device is present");
    cudaGetLastError();  // clear the sticky error of a failed probe
    return false;
  }
  return true;
}

// Device memory whose contents are undefined (for buffers written in full
// before they are read).
inline void* device_malloc_uninitialized(std::size_t bytes, std::string const& what) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc for " + what);
  return p;
}

inline void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}

inline void copy_to_device(void* dst, void const* src, std::size_t bytes, std::string const& what) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to device for " + what);
}
inline void copy_to_host(void* dst, void const* src, std::size_t bytes, std::string const& what) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host for " + what);
}
inline void copy_on_device(void* dst, void const* src, std::size_t bytes, std::string const& what) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "device copy for " + what);
}
inline void zero_device(void* dst, std::size_t bytes, std::string const& what) {
  if (bytes) check(cudaMemset(dst, 0, bytes), "cudaMemset for " + what);
}

// Blocks until every launch and copy issued so far has finished: before
// code outside the CUDA runtime (a CUDA-aware MPI) reads device memory.
inline void wait_for_device(std::string const& what) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize for " + what);
}

}  // namespace ctg::cuda
