// Vector math (ir/vector_math.hpp): with CTG_VECTOR_MATH the op table's
// functions call libmvec's vector versions where the compiler supports it
// (GCC on x86-64 with glibc), so that kernels vectorise without
// -ffast-math. Checked against std's functions: every value within libmvec's
// 4 ulp, every derivative against its closed form; a kernel shared with a
// translation unit built without the setting keeps its own instantiation
// there; and at -O3 the vector functions are what runs (their results differ
// from std's in the last bits, which the scalar path never does).
#define CTG_VECTOR_MATH 1
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <limits>
#include <numbers>
#include <vector>

#include "vector_math_kernel.hpp"

using namespace ctg::literals;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
static_assert(ctg::vector_math_enabled, "GCC on x86-64 with glibc calls libmvec");
#else
static_assert(!ctg::vector_math_enabled, "only GCC on x86-64 with glibc calls libmvec");
#endif

std::vector<double> vector_math_test::sines_with_vector_math(std::vector<double> const& x) {
  return run_shared_sine<double>(x);
}

namespace {

// Row r of y is function r of the op table's rows that libmvec has.
constexpr int rows = 20;
auto every_function = ctg::kernel<"every_function">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::block(y(0, i) = ctg::sin(x[i]), y(1, i) = ctg::cos(x[i]), y(2, i) = ctg::tan(x[i]),
                      y(3, i) = ctg::tanh(x[i]), y(4, i) = ctg::asin(x[i]), y(5, i) = ctg::acos(x[i]),
                      y(6, i) = ctg::atan(x[i]), y(7, i) = ctg::exp(x[i]), y(8, i) = ctg::expm1(x[i]),
                      y(9, i) = ctg::log(x[i] + 1.5), y(10, i) = ctg::log1p(x[i]), y(11, i) = ctg::erf(x[i]),
                      y(12, i) = ctg::sinh(x[i]), y(13, i) = ctg::cosh(x[i]), y(14, i) = ctg::asinh(x[i]),
                      y(15, i) = ctg::atanh(x[i]), y(16, i) = ctg::exp2(x[i]), y(17, i) = ctg::log2(x[i] + 1.5),
                      y(18, i) = ctg::log10(x[i] + 1.5), y(19, i) = ctg::cbrt(x[i] + 1.5));
  });
});

// The same rows, and their derivatives, by std's functions in double.
double value(int r, double x) {
  switch (r) {
    case 0: return std::sin(x);
    case 1: return std::cos(x);
    case 2: return std::tan(x);
    case 3: return std::tanh(x);
    case 4: return std::asin(x);
    case 5: return std::acos(x);
    case 6: return std::atan(x);
    case 7: return std::exp(x);
    case 8: return std::expm1(x);
    case 9: return std::log(x + 1.5);
    case 10: return std::log1p(x);
    case 11: return std::erf(x);
    case 12: return std::sinh(x);
    case 13: return std::cosh(x);
    case 14: return std::asinh(x);
    case 15: return std::atanh(x);
    case 16: return std::exp2(x);
    case 17: return std::log2(x + 1.5);
    case 18: return std::log10(x + 1.5);
    default: return std::cbrt(x + 1.5);
  }
}
double derivative(int r, double x) {
  switch (r) {
    case 0: return std::cos(x);
    case 1: return -std::sin(x);
    case 2: return 1.0 / (std::cos(x) * std::cos(x));
    case 3: return 1.0 / (std::cosh(x) * std::cosh(x));
    case 4: return 1.0 / std::sqrt(1.0 - x * x);
    case 5: return -1.0 / std::sqrt(1.0 - x * x);
    case 6: return 1.0 / (1.0 + x * x);
    case 7: return std::exp(x);
    case 8: return std::exp(x);
    case 9: return 1.0 / (x + 1.5);
    case 10: return 1.0 / (1.0 + x);
    case 11: return 2.0 / std::sqrt(std::numbers::pi) * std::exp(-x * x);
    case 12: return std::cosh(x);
    case 13: return std::sinh(x);
    case 14: return 1.0 / std::sqrt(x * x + 1.0);
    case 15: return 1.0 / (1.0 - x * x);
    case 16: return std::numbers::ln2 * std::exp2(x);
    case 17: return 1.0 / ((x + 1.5) * std::numbers::ln2);
    case 18: return 1.0 / ((x + 1.5) * std::numbers::ln10);
    default: return 1.0 / (3.0 * std::cbrt(x + 1.5) * std::cbrt(x + 1.5));
  }
}

// |got - want| in units in the last place of T at want.
template <class T>
double ulps(double got, double want) {
  T const w = T(want);
  T const step = std::nextafter(std::abs(w), std::numeric_limits<T>::infinity()) - std::abs(w);
  return std::abs(got - double(w)) / double(step);
}

template <class T>
void check_every_function(double value_ulps, double gradient_tolerance) {
  // An odd count, so that a vectorised loop leaves a scalar remainder.
  constexpr int n = 1037;
  ctg::field<T, 1, ctg::grad> x({n}, {.name = "x"});
  ctg::field<T, 2, ctg::grad> y({rows, n}, {.name = "y"});
  // Multiples of 2^-10, so that x + 1.5 is exact in float too.
  for (int i = 0; i < n; ++i) x.at(i) = T((i - n / 2) / 1024.0);
  every_function(x, y);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) {
      // The row's value of the T input, computed in double then rounded to T.
      double const want = double(T(value(r, double(x.at(i)))));
      INFO("row " << r << ", x = " << double(x.at(i)));
      CHECK(ulps<T>(double(y.at(r, i)), want) <= value_ulps);
    }
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < n; ++i) y.grad().at(r, i) = T(1.0 + 0.1 * r);
  every_function.grad(x, y);
  for (int i = 0; i < n; ++i) {
    double want = 0, scale = 0;
    for (int r = 0; r < rows; ++r) {
      double const term = (1.0 + 0.1 * r) * derivative(r, double(x.at(i)));
      want += term;
      scale += std::abs(term);
    }
    INFO("x = " << double(x.at(i)));
    CHECK(std::abs(double(x.grad().at(i)) - want) <= gradient_tolerance * scale);
  }
}

}  // namespace

TEST_CASE("vector math: every function libmvec has, within 4 ulp, and its derivative, in float and double") {
  for (int threads : {1, 2}) {
    ctg::set_num_threads(threads);
    check_every_function<float>(4.0, 1e-6);
    check_every_function<double>(4.0, 1e-14);
  }
  ctg::set_num_threads(0);
}

TEST_CASE("vector math: a kernel shared with a translation unit built without it keeps one instantiation in each") {
  constexpr int n = 4099;
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[std::size_t(i)] = -10.0 + 20.0 * i / (n - 1) + 1e-3 * std::sin(7.0 * i);
  std::vector<double> const plain = vector_math_test::sines_without_vector_math(x);
  std::vector<double> const vectorised = vector_math_test::sines_with_vector_math(x);
  int differ = 0;
  for (int i = 0; i < n; ++i) {
    double const want = std::sin(x[std::size_t(i)]);
    INFO("x = " << x[std::size_t(i)]);
    // Without the setting: std::sin itself, to the bit.
    CHECK(plain[std::size_t(i)] == want);
    CHECK(ulps<double>(vectorised[std::size_t(i)], want) <= 4.0);
    differ += vectorised[std::size_t(i)] != want;
  }
  // With it, where it is enabled, libmvec's sin ran: it rounds some of these
  // inputs differently from the scalar sin (had the linker kept one
  // instantiation for both, or had the loop not vectorised, none would).
  if (ctg::vector_math_enabled)
    CHECK(differ > 0);
  else
    CHECK(differ == 0);
}
