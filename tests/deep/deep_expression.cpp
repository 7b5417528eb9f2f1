// One expression 200 operations deep, built under instantiation and
// constant-evaluation depth limits of 260 (CMakeLists.txt sets them for this
// file). The walks over an expression (lowering, the checks, the activity
// analysis, the forward and tangent evaluators, the adjoint's recording and
// propagation, the launch's row walk) take one level per level of the tree:
// this expression needs about 230 levels. With the recording at two levels
// per node it needed about 430, and with two or three in every walk about
// 610.
//
// Values, the gradient and the tangent against the chain rule applied by
// hand, step by step, in double.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using doctest::Approx;

namespace {
constexpr int chain_length = 200;
// Its upper levels are built by the builders' out-of-line forms
// (ir/expr.hpp), which these values and gradients then check too.
static_assert(chain_length > ctg::ir::out_of_line_height);

// Step k of the chain, applied to e: sin, then a scale, then adding a
// quarter of the input again (xi, read at every third step).
template <int K, class E, class X>
auto chain(E const& e, X const& xi) {
  if constexpr (K == chain_length)
    return e;
  else if constexpr (K % 3 == 0)
    return chain<K + 1>(ctg::sin(e), xi);
  else if constexpr (K % 3 == 1)
    return chain<K + 1>(e * 1.5, xi);
  else
    return chain<K + 1>(e + xi * 0.25, xi);
}

// The value of the chain at x0 and its derivative, by hand.
struct value_and_slope {
  double value, slope;
};
value_and_slope chain_by_hand(double x0) {
  double v = x0, d = 1.0;
  for (int k = 0; k < chain_length; ++k) {
    if (k % 3 == 0) {
      d *= std::cos(v);
      v = std::sin(v);
    } else if (k % 3 == 1) {
      v *= 1.5;
      d *= 1.5;
    } else {
      v += 0.25 * x0;
      d += 0.25;
    }
  }
  return {v, d};
}
}  // namespace

TEST_CASE("an expression 200 operations deep: value, gradient and tangent by the chain rule") {
  std::vector<double> const xv{-1.3, -0.2, 0.4, 0.9, 2.1};
  int const n = int(xv.size());
  constexpr ctg::flags both = ctg::grad | ctg::dual;
  ctg::field<double, 1, both> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"deep_chain">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = chain<0>(x[i], x[i]); });
  });
  k(x, y);
  y.grad().fill(1.0);
  x.grad().fill(0.0);
  k.grad(x, y);
  std::vector<double> const direction{1.0, -0.5, 2.0, 0.25, -1.0};
  x.dual().copy_from(direction);
  k.fwd(x, y);
  for (int i = 0; i < n; ++i) {
    auto const expected = chain_by_hand(xv[std::size_t(i)]);
    CAPTURE(i);
    CHECK(y.at(i) == Approx(expected.value).epsilon(1e-12));
    CHECK(x.grad().at(i) == Approx(expected.slope).epsilon(1e-10));
    CHECK(y.dual().at(i) == Approx(expected.slope * direction[std::size_t(i)]).epsilon(1e-10));
  }
}

namespace {
constexpr int passing_length = 60;

// Step k of a chain that also passes values through funcs, casts and
// stop_grad, whose records hold their operand's (built in place, and cut
// into locals every few levels with g++: ad/reverse.hpp).
template <int K, class E, class X, class F>
auto passing_chain(E const& e, X const& xi, F const& halve) {
  if constexpr (K == passing_length)
    return e;
  else if constexpr (K % 3 == 0)
    return passing_chain<K + 1>(halve(ctg::sin(e)), xi, halve);
  else if constexpr (K % 3 == 1)
    return passing_chain<K + 1>(ctg::cast<double>(e * 1.5), xi, halve);
  else
    return passing_chain<K + 1>(e + ctg::stop_grad(xi * xi) * 0.25, xi, halve);
}

value_and_slope passing_chain_by_hand(double x0) {
  double v = x0, d = 1.0;
  for (int k = 0; k < passing_length; ++k) {
    if (k % 3 == 0) {
      d *= 0.5 * std::cos(v);
      v = 0.5 * std::sin(v);
    } else if (k % 3 == 1) {
      v *= 1.5;
      d *= 1.5;
    } else {
      v += 0.25 * x0 * x0;  // stop_grad: no slope
    }
  }
  return {v, d};
}
}  // namespace

TEST_CASE("a deep chain through funcs, casts and stop_grad: value and gradient by the chain rule") {
  std::vector<double> const xv{-1.3, -0.2, 0.4, 0.9, 2.1};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto const halve = ctg::func<"halve">([](auto a) { return a * 0.5; });
  auto k = ctg::kernel<"passing_chain">([=](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = passing_chain<0>(x[i], x[i], halve); });
  });
  k(x, y);
  y.grad().fill(1.0);
  x.grad().fill(0.0);
  k.grad(x, y);
  for (int i = 0; i < n; ++i) {
    auto const expected = passing_chain_by_hand(xv[std::size_t(i)]);
    CAPTURE(i);
    CHECK(y.at(i) == Approx(expected.value).epsilon(1e-12));
    CHECK(x.grad().at(i) == Approx(expected.slope).epsilon(1e-10));
  }
}
