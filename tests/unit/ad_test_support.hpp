// Helpers shared by the autodiff unit tests (ad_*.cpp): finite differences on
// plain C++ re-implementations of the kernels, a scope that changes the CPU
// backend's thread count, and the message of an error a launch throws.
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>

namespace ad_test {

// The message of the exception of type E that fn throws ("" when it throws none).
template <class E, class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (E const& e) {
    return e.what();
  }
  return "";
}

// sqrt(x^2 + eps): |x| made smooth, as a custom-gradient functor with its
// backward and tangent written by hand.
struct soft_abs {
  double eps;
  template <class T>
  CTG_HOST_DEVICE T forward(T x) const {
    using std::sqrt;
    return sqrt(x * x + T(eps));
  }
  template <class T>
  CTG_HOST_DEVICE T backward(T x, T g) const {
    using std::sqrt;
    return g * x / sqrt(x * x + T(eps));
  }
  template <class T>
  CTG_HOST_DEVICE T tangent(T x, T dx) const {
    using std::sqrt;
    return dx * x / sqrt(x * x + T(eps));
  }
};

// The CPU backend runs on `threads` threads while this object lives, then goes
// back to the default pool. More threads than cores is fine: the point is that
// iterations of one offload interleave, so non-atomic gradient updates lose
// contributions.
struct thread_scope {
  explicit thread_scope(int threads) { ctg::set_num_threads(threads); }
  ~thread_scope() { ctg::set_num_threads(0); }
  thread_scope(thread_scope const&) = delete;
  thread_scope& operator=(thread_scope const&) = delete;
};

// d f / d x_k by central differences in double precision.
template <class F>
double central_difference(F const& f, std::vector<double> x, std::size_t k, double h = 1e-6) {
  double const x0 = x[k];
  x[k] = x0 + h;
  double const plus = f(x);
  x[k] = x0 - h;
  double const minus = f(x);
  return (plus - minus) / (2 * h);
}

// The whole gradient of f at x by central differences.
template <class F>
std::vector<double> fd_gradient(F const& f, std::vector<double> const& x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) g[k] = central_difference(f, x, k, h);
  return g;
}

}  // namespace ad_test
