// The CUDA backend: each offload becomes a launch of a __global__ kernel
// template instantiated on the IR type (closure-free, passed by value). A
// parallel offload is a grid-stride loop over its iteration box; a serial
// offload runs on one thread. The evaluators are the CPU backend's, compiled
// for the device. Launches go to the default stream; a launch that must report
// back (index checks, adstack overflow) is followed by a copy of its status,
// which synchronises; others return at once and errors surface at the next
// synchronising call (a copy of a field, the next checked launch).
#pragma once
#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "../plan.hpp"
#include "../../memory/cuda.hpp"
#include "../../lower/vocabulary.hpp"

namespace ctg::cuda {

CTG_IMPL_IR_VOCABULARY;


// Device memory reused across launches: the launch status and the adstack.
class scratch {
 public:
  void* get(std::size_t bytes, std::string_view what) {
    if (bytes > size_) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = nullptr;
      size_ = 0;
      check(cudaMalloc(&ptr_, bytes), "cudaMalloc for the " + std::string(what));
      size_ = bytes;
    }
    return ptr_;
  }
  static scratch& status() {
    static scratch s;
    return s;
  }
  static scratch& stacks() {
    static scratch s;
    return s;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

inline int multiprocessors() {
  static int const count = [] {
    int device = 0, n = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n > 0 ? n : 1;
  }();
  return count;
}

constexpr int block_size = 256;

template <class Plan, class Body, class Args, int A>
__global__ void __launch_bounds__(block_size)
    parallel_offload_kernel(Body body, Args args, backend::loop_box<A> box, std::int64_t count,
                            eval::launch_status* status, std::uint32_t* stacks, long long capacity) {
  typename Plan::template frame<true> f;
  f.args = &args;
  f.status = status;
  std::int64_t const tid = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t const stride = std::int64_t(gridDim.x) * blockDim.x;
  // The threads' stacks are interleaved word by word (coalesced pushes).
  Plan::prepare(f, stacks ? stacks + tid : nullptr, stride, capacity);
  // A copy in registers: read through the parameter's address, the body's
  // constants (a launch's scalar arguments) were loaded again, and index
  // products recomputed, in every iteration, since nvcc did not hoist them
  // past the loop's global stores (the wave step: 49 parameter loads and
  // 64-bit multiplies in the loop; 19 loads, all before it, with the copy).
  // The copy is made bytewise, as CUDA copied the parameter, not by the
  // tree's copy constructor: nvcc's device pass spent time exponential in
  // the tree's height on that constructor in the adjoint's kernel (a chain
  // of 12 steps of sin, a scale, an add and tanh of the negation: 85 s with
  // it, 3 s bytewise; 14 steps did not finish in 600 s), docs/05, *Tall
  // expressions through nvcc*. With std::launder (which g++ takes for an
  // opaque pointer on the host, ad/reverse.hpp) the GPU benchmarks' kernels
  // compile to the PTX they had with the copy, or one instruction shorter.
  alignas(Body) unsigned char local_bytes[sizeof(Body)];
  memcpy(local_bytes, &body, sizeof(Body));
  Body const& local_body = *std::launder(reinterpret_cast<Body const*>(local_bytes));
  for (std::int64_t it = tid; it < count; it += stride) {
    box.set(f, it);
    Plan::iteration(local_body, f);
  }
  Plan::finish(f);
}

template <class Plan, class Body, class Args>
__global__ void serial_offload_kernel(Body body, Args args, eval::launch_status* status, std::uint32_t* stack,
                                      long long capacity) {
  typename Plan::template frame<false> f;
  f.args = &args;
  f.status = status;
  Plan::prepare(f, stack, 1, capacity);
  Plan::iteration(body, f);
  Plan::finish(f);
}

template <class Plan, class Loop, class Args, int A>
__global__ void bounds_kernel(Loop loop, Args args, eval::launch_status* status, backend::loop_box<A>* out) {
  typename Plan::template frame<false> f;
  f.args = &args;
  f.status = status;
  backend::loop_box<A> box;
  eval::forward::bounds(loop, f, box.lo, box.hi);
  *out = box;
}

// Whether an expression reads field memory (then it is evaluated on the device).
template <class E>
inline constexpr bool reads_fields_v = false;
template <class Op, class... K>
inline constexpr bool reads_fields_v<node<Op, K...>> = is_access_op<Op> || (reads_fields_v<K> || ...);

template <class Loop, int A>
constexpr bool bounds_read_fields() {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return (reads_fields_v<std::remove_cvref_t<decltype(detail::get<Is>(std::declval<Loop>().kids))>> || ...);
  }(std::make_index_sequence<2 * A>{});
}

// A copy of the bound arguments whose integer fields point to host copies, so
// that the adstack can be sized on the host from loop bounds that read them.
template <class View>
void mirror_view(View& v, std::vector<std::vector<unsigned char>>& keep) {
  if constexpr (requires { v.data; v.extent; }) {
    using T = typename View::value_type;
    if constexpr (std::is_integral_v<T> && requires { v.data.address; }) {
      // Strided: the bytes the elements span, copied as they lie, so that
      // the view's strides still address them.
      if (v.size() == 0) return;
      std::size_t span = sizeof(T);
      for (int a = 0; a < View::rank; ++a) span += std::size_t(v.extent[a] - 1) * std::size_t(v.stride[a]);
      keep.emplace_back(span);
      copy_to_host(keep.back().data(), v.data.address, span, "adstack sizing");
      v.data.address = reinterpret_cast<T*>(keep.back().data());
    } else if constexpr (std::is_integral_v<T>) {
      std::size_t const bytes = std::size_t(v.size()) * sizeof(T);
      keep.emplace_back(bytes);
      copy_to_host(keep.back().data(), v.data, bytes, "adstack sizing");
      v.data = reinterpret_cast<T*>(keep.back().data());
    }
  }
}
template <class... V>
detail::tuple<V...> host_mirror(detail::tuple<V...> args, std::vector<std::vector<unsigned char>>& keep) {
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    (mirror_view(detail::get<Is>(args), keep), ...);
  }(std::index_sequence_for<V...>{});
  return args;
}

inline void after_launch(std::string_view kernel, eval::launch_status* device_status, eval::launch_status& status,
                         bool read_status) {
  cudaError_t const launched = cudaGetLastError();
  if (launched != cudaSuccess)
    throw cuda_error("kernel '" + std::string(kernel) + "': launch failed: " + cudaGetErrorName(launched) + " (" +
                     cudaGetErrorString(launched) + ")");
  if (read_status) {
    cudaError_t const copied = cudaMemcpy(&status, device_status, sizeof(status), cudaMemcpyDeviceToHost);
    if (copied != cudaSuccess)
      throw cuda_error("kernel '" + std::string(kernel) + "': " + cudaGetErrorName(copied) + " (" +
                       cudaGetErrorString(copied) + ")");
  }
}

template <class Plan>
constexpr bool reads_status = CTG_BOUNDS_CHECK || Plan::uses_stack;

// The device word a launch reports its failures in (followed by room for
// the loop box). Cleared only where the launch's status is read back: a
// cudaMemsetAsync is an operation of its own on the device, and between the
// short launches of a time loop it was a measurable share of each step.
template <class Plan>
eval::launch_status* launch_status_for(std::string_view kernel) {
  auto* status = static_cast<eval::launch_status*>(scratch::status().get(sizeof(eval::launch_status) + 64, "launch status"));
  if constexpr (reads_status<Plan>)
    check(cudaMemsetAsync(status, 0, sizeof(eval::launch_status)), "kernel '" + std::string(kernel) + "'");
  return status;
}

// The adstack bytes one thread needs (backend::adstack_bytes), with the
// device integer fields its loop bounds read mirrored to the host.
template <class Plan, class Body, class Args, int A = 1>
long long mirrored_adstack_bytes(Body const& body, Args const& args, long long iterations, int& site,
                                 backend::loop_box<A> const* box = nullptr) {
  if constexpr (!Plan::uses_stack) {
    return backend::adstack_bytes<Plan>(body, args, iterations, site, box);
  } else {
    std::vector<std::vector<unsigned char>> keep;
    return backend::adstack_bytes<Plan>(body, host_mirror(args, keep), iterations, site, box);
  }
}

// Named: the offload (which gives o's type) or its short name
// (cpu::prepared_offload).
template <class Pass, int Slots, class Named, class Args>
  requires(ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status, long long iterations,
                 int* unsized, std::string_view kernel) {
  using plan = typename Pass::template plan<Args, Named, Slots>;
  using traits = ir::offload_traits<Named>;
  using L = typename traits::loop;
  constexpr int A = traits::axes;
  auto const& loop = traits::loop_of(o);
  auto* dstatus = launch_status_for<plan>(kernel);

  backend::loop_box<A> box;
  if constexpr (bounds_read_fields<L, A>()) {
    auto* dbox = reinterpret_cast<backend::loop_box<A>*>(reinterpret_cast<unsigned char*>(dstatus) +
                                                         sizeof(eval::launch_status));
    bounds_kernel<plan><<<1, 1>>>(loop, args, dstatus, dbox);
    after_launch(kernel, dstatus, status, false);
    check(cudaMemcpy(&box, dbox, sizeof(box), cudaMemcpyDeviceToHost), "kernel '" + std::string(kernel) + "'");
  } else {
    typename plan::template frame<false> host;
    host.args = &args;
    host.status = &status;
    eval::forward::bounds(loop, host, box.lo, box.hi);
  }
  backend::narrow_to_owned(box, args);
  std::int64_t const count = box.count();
  if (count <= 0) return;
  auto const& body = traits::body_of(o);

  int site = -1;
  long long const capacity = mirrored_adstack_bytes<plan>(body, args, iterations, site, &box);
  if (site >= 0) {
    if (unsized) *unsized = site;
    return;
  }
  std::int64_t blocks = (count + block_size - 1) / block_size;
  blocks = std::min<std::int64_t>(blocks, std::int64_t(multiprocessors()) * 32);
  if (capacity > 0) {  // bound the adstack allocation to about 1 GiB
    std::int64_t const max_threads = std::max<std::int64_t>(block_size, (std::int64_t(1) << 30) / capacity);
    blocks = std::max<std::int64_t>(1, std::min(blocks, max_threads / block_size));
  }
  std::uint32_t* stacks = nullptr;
  if (capacity > 0)
    stacks = static_cast<std::uint32_t*>(
        scratch::stacks().get(std::size_t(blocks) * block_size * std::size_t(capacity), "adstack"));
  parallel_offload_kernel<plan><<<unsigned(blocks), block_size>>>(body, args, box, count, dstatus, stacks, capacity);
  after_launch(kernel, dstatus, status, reads_status<plan>);
}

template <class Pass, int Slots, class Named, class Args>
  requires(!ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status, long long iterations,
                 int* unsized, std::string_view kernel) {
  using plan = typename Pass::template plan<Args, Named, Slots>;
  auto* dstatus = launch_status_for<plan>(kernel);
  int site = -1;
  long long const capacity = mirrored_adstack_bytes<plan>(o.body, args, iterations, site);
  if (site >= 0) {
    if (unsized) *unsized = site;
    return;
  }
  std::uint32_t* stack =
      capacity > 0 ? static_cast<std::uint32_t*>(scratch::stacks().get(std::size_t(capacity), "adstack")) : nullptr;
  serial_offload_kernel<plan><<<1, 1>>>(o.body, args, dstatus, stack, capacity);
  after_launch(kernel, dstatus, status, reads_status<plan>);
}

// Waits for every launch so far; raises the first asynchronous error.
inline void synchronize() { wait_for_device("ctg::cuda::synchronize()"); }

}  // namespace ctg::cuda
#endif
