// What the test bodies shared by the CPU and CUDA backends have in common:
// their registration as doctest cases per backend, the comparison of a
// result with an independent reference, and arrays the test owns in either
// memory space (for views of user memory).
//
// A body is a function `void body(ctg::memory_space space)` in namespace
// backend_tests that builds every field in `space`. Each header of
// tests/shared lists its bodies once, in a macro CTGRAD_<TOPIC>_TESTS(REGISTER,
// space) made of lines REGISTER(space, body_name, "what it checks"),
// and a backend's registration file (tests/unit/backends_host*.cpp,
// tests/cuda/backends_device*.cu) turns the list into test cases named
// "what it checks [host]" or "... [device]":
//
//   CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_<TOPIC>_TESTS, host)
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <ctgrad/ctgrad.hpp>
#include <limits>
#include <stdexcept>
#include <vector>

#if defined(CTG_HAS_CUDA)
#  include <cuda_runtime_api.h>
#endif

// One test case: "description [space]" runs backend_tests::body(ctg::space).
#define CTGRAD_BACKEND_TEST_CASE(space, body, description) \
  TEST_CASE(description " [" #space "]") { backend_tests::body(ctg::space); }

// Every body of a list (a CTGRAD_<TOPIC>_TESTS macro) for one backend: `host` or `device`.
#define CTGRAD_REGISTER_BACKEND_TESTS(list, space) list(CTGRAD_BACKEND_TEST_CASE, space)

namespace backend_tests {

inline char const* space_name(ctg::memory_space space) { return space == ctg::device ? "device" : "host"; }

// The relative difference the comparisons use: |got - want| / (scale + |want|)
// (the Euclidean norm for vectors and matrices), scale 1 unless a bound of the
// rounding error is known, such as the sum of the magnitudes a result adds up.
// A NaN or an infinity on either side never passes.
template <class Got, class Want>
double relative_error(Got const& got, Want const& want, double scale = 1.0) {
  double e;
  if constexpr (ctg::is_eigen_fixed_v<Got>) {
    auto const w = want.template cast<double>().eval();
    e = (got.template cast<double>() - w).norm() / (scale + w.norm());
  } else {
    e = std::abs(double(got) - double(want)) / (scale + std::abs(double(want)));
  }
  return std::isfinite(e) ? e : std::numeric_limits<double>::infinity();
}

// The largest relative difference between two arrays, reported once (with
// where it is) rather than once per element.
template <class Got, class Want>
void check_close(std::vector<Got> const& got, std::vector<Want> const& want, double tol) {
  REQUIRE(got.size() == want.size());
  REQUIRE(!got.empty());
  double worst = 0;
  std::size_t where = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double const e = relative_error(got[i], want[i]);
    if (e > worst) worst = e, where = i;
  }
  INFO("worst at " << where << ": " << got[where] << " vs " << want[where]);
  CHECK(worst <= tol);
}

// How many elements a body runs on: the device gets the sizes its launches
// need to be tested at all (more elements than a launch has threads, atomics
// contended), the host a smaller size that still splits into many chunks per
// worker thread, so that the unit tests stay quick on two cores.
inline int elements_for(ctg::memory_space space, int on_device, int on_host) {
  return space == ctg::device ? on_device : on_host;
}

// The other memory space (the one a launch must not mix in).
inline ctg::memory_space other_space(ctg::memory_space space) {
  return space == ctg::device ? ctg::host : ctg::device;
}

// An array the test owns, not a ctgrad field, holding a copy of `values` in
// `space`: views of user memory are made on it.
template <class T>
class owned_array {
 public:
  owned_array(ctg::memory_space space, std::vector<T> const& values)
      : space_(space), host_(space == ctg::host ? values : std::vector<T>{}) {
    if (space_ == ctg::host) return;
#if defined(CTG_HAS_CUDA)
    std::size_t const bytes = sizeof(T) * values.size();
    if (cudaMalloc(&device_, bytes) != cudaSuccess) throw std::runtime_error("owned_array: cudaMalloc failed");
    if (cudaMemcpy(device_, values.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaFree(device_);
      throw std::runtime_error("owned_array: cudaMemcpy failed");
    }
#else
    throw std::logic_error("owned_array: device memory in a program built without CUDA");
#endif
  }
  ~owned_array() {
#if defined(CTG_HAS_CUDA)
    if (device_) cudaFree(device_);
#endif
  }
  owned_array(owned_array const&) = delete;
  owned_array& operator=(owned_array const&) = delete;

  T* data() { return space_ == ctg::host ? host_.data() : device_; }

 private:
  ctg::memory_space space_;
  std::vector<T> host_;   // the array, when it is on the host
  T* device_ = nullptr;  // the array, when it is on the device
};

}  // namespace backend_tests
