// Helpers for the linear-algebra gradient tests: pack Eigen coefficients into
// a parameter vector (storage order, as coeff(k) sees them) and compare a
// field's gradient with a slice of a finite-difference gradient.
#pragma once
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <vector>

namespace ad_test {

template <class M>
void append(std::vector<double>& p, M const& m) {
  for (int k = 0; k < int(M::SizeAtCompileTime); ++k) p.push_back(double(m.coeff(k)));
}

template <class... M>
std::vector<double> pack(M const&... m) {
  std::vector<double> p;
  (append(p, m), ...);
  return p;
}

// A fixed-size matrix read from p at offset `at` (storage order).
template <class M>
M unpack(std::vector<double> const& p, int at) {
  M m;
  for (int k = 0; k < int(M::SizeAtCompileTime); ++k) m.coeffRef(k) = typename M::Scalar(p[std::size_t(at + k)]);
  return m;
}

template <class M>
void check_slice(M const& g, std::vector<double> const& fd, int at, double eps = 1e-7) {
  for (int k = 0; k < int(M::SizeAtCompileTime); ++k) {
    CAPTURE(at + k);
    CHECK(double(g.coeff(k)) == doctest::Approx(fd[std::size_t(at + k)]).epsilon(eps));
  }
}

}  // namespace ad_test
