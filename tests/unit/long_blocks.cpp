// Blocks longer than a fold expression may be in clang (256 operands, its
// -fbracket-depth): ctg::block builds more than 128 statements as blocks of
// at most 128 inside one, and the passes over a frame's slots expand their
// packs without folds; so do the checks' passes over pairs of accesses,
// whose count grows with the square of the body's. Built by the other
// compilers too (tests/run_vectorised.cmake). Expected values: the same
// recurrences in plain C++, with their derivatives carried alongside (a
// hand-written tangent).
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <utility>
#include <vector>

using doctest::Approx;

namespace {

constexpr int statements = 260;

constexpr double coefficient(std::size_t k) { return 1.0 - 0.002 * double(k % 5); }

// v = v * c_k + sin(x[i]), once per k: one assignment per statement.
template <std::size_t... Ks, class V, class X, class I>
auto recurrence(V v, X x, I i, std::index_sequence<Ks...>) {
  return ctg::block((v = v * coefficient(Ks) + ctg::sin(x[i]))...);
}

// Runs k(x, y) on x = xv, seeds y's gradient with ones, and checks y and
// x's gradient against plain(x) = {value, derivative}.
template <class K, class Plain>
void check_against_plain(K& k, std::vector<double> const& xv, Plain plain, double gradient_epsilon) {
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    auto const [v, dv] = plain(xv[i]);
    CHECK(y.at(i) == Approx(v).epsilon(1e-12));
    CHECK(x.grad().at(i) == Approx(dv).epsilon(gradient_epsilon));
  }
}

}  // namespace

TEST_CASE("a block of 260 statements: values and gradients") {
  auto k = ctg::kernel<"long_block">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(recurrence(v, x, i, std::make_index_sequence<statements>{}), y[i] = v);
      });
    });
  });
  check_against_plain(
      k, {-1.3, -0.2, 0.0, 0.7, 2.1},
      [](double x) {
        double v = x, dv = 1.0;
        for (int s = 0; s < statements; ++s) {
          v = v * coefficient(std::size_t(s)) + std::sin(x);
          dv = dv * coefficient(std::size_t(s)) + std::cos(x);
        }
        return std::pair{v, dv};
      },
      1e-12);
}

namespace {

// v = sin(v) + x[i], once per k: the adjoint reads v, so a loop around the
// chain carries it on the adstack (a snapshot over all of the frame's slots).
template <std::size_t... Ks, class V, class X, class I>
auto sine_chain(V v, X x, I i, std::index_sequence<Ks...>) {
  return ctg::block(((void)Ks, v = ctg::sin(v) + x[i])...);
}

}  // namespace

TEST_CASE("a loop around 260 statements carries its locals on the adstack") {
  auto k = ctg::kernel<"long_loop_body">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(2, [=](auto) { return sine_chain(v, x, i, std::make_index_sequence<statements>{}); }),
                          y[i] = v);
      });
    });
  });
  check_against_plain(
      k, {-0.6, 0.1, 0.9},
      [](double x) {
        double v = x, dv = 1.0;
        for (int s = 0; s < 2 * statements; ++s) {
          dv = std::cos(v) * dv + 1.0;
          v = std::sin(v) + x;
        }
        return std::pair{v, dv};
      },
      1e-10);
}

namespace {

constexpr int rows = 24;

// y(0, i) = sin(x[i]), then y(k, i) = y(k - 1, i) c_k + x[i]: 24 stores
// into one field with a gradient and 23 loads of it in one parallel body,
// so the checks judge 300 pairs of stores and 552 of stores and loads,
// each pair a step of a pack expansion.
template <std::size_t... Ks, class X, class Y, class I>
auto row_chain(X x, Y y, I i, std::index_sequence<Ks...>) {
  return ctg::block(y(ctg::c<0>, i) = ctg::sin(x[i]),
                    (y(ctg::c<int(Ks) + 1>, i) = y(ctg::c<int(Ks)>, i) * coefficient(Ks + 1) + x[i])...);
}

}  // namespace

TEST_CASE("a parallel body of 24 stores into one field: more pairs to check than a fold may have operands") {
  auto k = ctg::kernel<"many_rows">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return row_chain(x, y, i, std::make_index_sequence<rows - 1>{}); });
  });
  std::vector<double> const xv{-1.1, 0.0, 0.4, 1.9};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"});
  ctg::field<double, 2, ctg::grad> y({rows, n}, {.name = "y"});
  x.copy_from(xv);
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    // The rows and their derivatives in x, summed for the gradient (every
    // row's seed is 1).
    double v = std::sin(xv[std::size_t(i)]), dv = std::cos(xv[std::size_t(i)]), gradient = dv;
    CHECK(y.at(0, i) == Approx(v).epsilon(1e-14));
    for (int r = 1; r < rows; ++r) {
      v = v * coefficient(std::size_t(r)) + xv[std::size_t(i)];
      dv = dv * coefficient(std::size_t(r)) + 1.0;
      gradient += dv;
      CHECK(y.at(r, i) == Approx(v).epsilon(1e-14));
    }
    CHECK(x.grad().at(i) == Approx(gradient).epsilon(1e-13));
  }
}
