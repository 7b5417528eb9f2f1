// Memory spaces: where a buffer lives, and what every buffer there can do
// (be allocated and freed, copied within its space and to and from the host,
// copied row by row with pitches, zeroed, asked where a pointer points).
//
// One tag type per space, in the manner of an execution space's memory
// space: `host_space` and `device_space`, both with the same allocation and
// copy functions; `device_space` also answers what a pointer is, which
// device is current, and waits for the device.
// Code that holds a run-time `memory_space` (a field, a tape's copy, a halo)
// calls `in_space(space, [&](auto tag) { ... })` or one of the helpers
// below, never the CUDA runtime itself. This header is the only one outside
// backend/cuda/ that knows whether the CUDA runtime is compiled in
// (CTG_HAS_CUDA, defined by ctgrad::cuda); without it every device_space
// function throws, naming what asked for device memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "../errors.hpp"

#if defined(CTG_HAS_CUDA)
#  include "cuda.hpp"
#endif

namespace ctg {

enum class memory_space { host, device };
inline constexpr memory_space host = memory_space::host;
inline constexpr memory_space device = memory_space::device;

namespace memory {

// What a pointer refers to, as far as the runtime can tell.
enum class pointer_kind { unknown, host, device, managed };

inline constexpr std::size_t host_alignment = 64;  // of every host buffer ctgrad allocates

struct host_space {
  static constexpr memory_space space = memory_space::host;
  static constexpr bool compiled = true;

  static void* allocate(std::size_t bytes, std::string const&) {
    return ::operator new(bytes ? bytes : 1, std::align_val_t{host_alignment});
  }
  static void release(void* p) noexcept {
    if (p) ::operator delete(p, std::align_val_t{host_alignment});
  }
  static void zero(void* p, std::size_t bytes, std::string const&) {
    if (bytes) std::memset(p, 0, bytes);
  }
  static void copy(void* dst, void const* src, std::size_t bytes, std::string const&) {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  static void to_host(void* host, void const* src, std::size_t bytes, std::string const& what) {
    copy(host, src, bytes, what);
  }
  static void from_host(void* dst, void const* host, std::size_t bytes, std::string const& what) {
    copy(dst, host, bytes, what);
  }
  // `rows` runs of `width` bytes, `dst_pitch` and `src_pitch` bytes apart.
  static void copy_rows(void* dst, std::int64_t dst_pitch, void const* src, std::int64_t src_pitch,
                        std::size_t width, std::int64_t rows, std::string const&) {
    auto* out = static_cast<unsigned char*>(dst);
    auto const* in = static_cast<unsigned char const*>(src);
    for (std::int64_t r = 0; r < rows; ++r) std::memcpy(out + r * dst_pitch, in + r * src_pitch, width);
  }
};

struct device_space {
  static constexpr memory_space space = memory_space::device;
#if defined(CTG_HAS_CUDA)
  static constexpr bool compiled = true;

  static void* allocate(std::size_t bytes, std::string const& what) {
    return cuda::device_malloc_uninitialized(bytes ? bytes : 1, what);
  }
  static void release(void* p) noexcept { cuda::device_free(p); }
  static void zero(void* p, std::size_t bytes, std::string const& what) { cuda::zero_device(p, bytes, what); }
  static void copy(void* dst, void const* src, std::size_t bytes, std::string const& what) {
    cuda::copy_on_device(dst, src, bytes, what);
  }
  static void to_host(void* host, void const* src, std::size_t bytes, std::string const& what) {
    cuda::copy_to_host(host, src, bytes, what);
  }
  static void from_host(void* dst, void const* host, std::size_t bytes, std::string const& what) {
    cuda::copy_to_device(dst, host, bytes, what);
  }
  // Either side may be host or device memory (unified addressing).
  static void copy_rows(void* dst, std::int64_t dst_pitch, void const* src, std::int64_t src_pitch,
                        std::size_t width, std::int64_t rows, std::string const& what) {
    if (rows <= 0 || width == 0) return;
    auto const pitch = [&](std::int64_t p) { return std::size_t(p > std::int64_t(width) ? p : std::int64_t(width)); };
    cuda::check(cudaMemcpy2D(dst, pitch(dst_pitch), src, pitch(src_pitch), width, std::size_t(rows),
                             cudaMemcpyDefault),
                "strided copy for " + what);
  }
  // Blocks until the launches and copies issued so far are done (before code
  // outside the CUDA runtime reads device memory).
  static void settle(std::string const& what) { cuda::wait_for_device(what); }
  // Where `p` points.
  static pointer_kind kind_of(void const* p) {
    cudaPointerAttributes attributes{};
    if (!attributes_of(p, attributes)) return pointer_kind::unknown;
    if (attributes.type == cudaMemoryTypeManaged) return pointer_kind::managed;
    if (attributes.type == cudaMemoryTypeDevice) return pointer_kind::device;
    return pointer_kind::host;
  }
  // The device `p` belongs to, or -1 when the runtime cannot tell.
  static int device_of(void const* p) {
    cudaPointerAttributes attributes{};
    return attributes_of(p, attributes) ? attributes.device : -1;
  }
  // The device current on this thread (0 when there is none).
  static int current_device() {
    int id = 0;
    if (cudaGetDevice(&id) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return id < 0 ? 0 : id;
  }

 private:
  static bool attributes_of(void const* p, cudaPointerAttributes& attributes) {
    if (cudaPointerGetAttributes(&attributes, p) == cudaSuccess) return true;
    (void)cudaGetLastError();  // clear the error of a failed query
    return false;
  }

 public:
#else
  static constexpr bool compiled = false;

  [[noreturn]] static void missing(std::string const& what) {
    throw launch_error(what + ": device memory requested, but this program was built without CUDA (link "
                              "ctgrad::cuda)");
  }
  static void* allocate(std::size_t, std::string const& what) { missing(what); }
  static void release(void*) noexcept {}
  static void zero(void*, std::size_t, std::string const& what) { missing(what); }
  static void copy(void*, void const*, std::size_t, std::string const& what) { missing(what); }
  static void to_host(void*, void const*, std::size_t, std::string const& what) { missing(what); }
  static void from_host(void*, void const*, std::size_t, std::string const& what) { missing(what); }
  static void copy_rows(void*, std::int64_t, void const*, std::int64_t, std::size_t, std::int64_t,
                        std::string const& what) {
    missing(what);
  }
  static void settle(std::string const&) {}
  static pointer_kind kind_of(void const*) { return pointer_kind::unknown; }
  static int device_of(void const*) { return -1; }
  static int current_device() { return 0; }
#endif
};

// Calls f(host_space{}) or f(device_space{}).
template <class F>
decltype(auto) in_space(memory_space space, F&& f) {
  if (space == memory_space::device) return f(device_space{});
  return f(host_space{});
}

// Copies between host memory and a buffer of `space`.
inline void read_to_host(memory_space space, void* host, void const* buffer, std::size_t bytes,
                         std::string const& what) {
  in_space(space, [&](auto tag) { tag.to_host(host, buffer, bytes, what); });
}
inline void write_from_host(memory_space space, void* buffer, void const* host, std::size_t bytes,
                            std::string const& what) {
  in_space(space, [&](auto tag) { tag.from_host(buffer, host, bytes, what); });
}

}  // namespace memory
}  // namespace ctg
