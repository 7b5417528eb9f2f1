// Interleaved iterations lane by lane (eval/interleave.hpp, lane_statement_v;
// ad/interleave.hpp, lane_reverse): with vector math, the assignment of an
// arithmetic local whose expression calls a vector function is computed for
// the iterations stepped together in one loop over the lanes, forward, in
// the recompute and in the sweep. Checked at -O3 against the same loops
// written in double (forward and adjoint by hand) and against central
// differences, on launch sizes below, at and around the number of lanes and
// on 1-3 threads; the forward pass, the adjoint and the value and gradient
// in one sweep agree bit for bit with each other; and the vector functions
// are what runs (a kernel of the same body run serially, with the scalar
// functions, differs in the last bits somewhere: this file is built at -O3,
// where the loops over the lanes vectorise).
#define CTG_VECTOR_MATH 1
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "../unit/ad_test_support.hpp"

using doctest::Approx;

namespace {

using f1 = ctg::field<float, 1, ctg::grad>;
using d1 = ctg::field<double, 1, ctg::grad>;

constexpr int sizes[] = {1, 7, 8, 9, 17, 1001, 5003};

// v = sin(v) a + x[i] b, `iters` times. Restated from forward_interleave.cpp
// rather than shared with it: built with vector math, its ctg::sin is
// another function, and one lambda with two bodies in the tests'
// translation units would break the one-definition rule.
constexpr auto recurrence_body = [](auto x, auto out, int iters, float a, float b) {
  return [=](auto i) {
    return ctg::let(0.0f, [=](auto v) {
      return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  };
};
auto recurrence = ctg::kernel<"lanes_recurrence">([](auto x, auto out, int iters, float a, float b) {
  return ctg::range(x.size(), recurrence_body(x, out, iters, a, b));
});
auto recurrence_serial = ctg::kernel<"lanes_recurrence_serial">([](auto x, auto out, int iters, float a, float b) {
  return ctg::serial_range(x.size(), recurrence_body(x, out, iters, a, b));
});

// Vector functions beside nodes each frame evaluates alone (a select on the
// iteration's index, loads of two fields with gradients), and two
// statements in the loop, one of them without a vector function.
auto mixed = ctg::kernel<"lanes_mixed">([](auto x, auto w, auto out, int iters) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(0.1, 0.0, [=](auto v, auto s) {
      return ctg::block(ctg::range(iters,
                                   [=](auto) {
                                     return ctg::block(
                                         v = ctg::exp(-(v * v)) * w[i] + ctg::sin(v + x[i]) * 0.5 +
                                             ctg::select(i % 3 == 0, x[i], 0.25) * ctg::log(1.5 + ctg::cos(v)),
                                         s = s * 0.5 + v * w[i]);
                                   }),
                        out[i] = v + s);
    });
  });
});

// The same in double, by hand.
double mixed_by_hand(int i, double x, double w, int iters) {
  double v = 0.1, s = 0.0;
  for (int j = 0; j < iters; ++j) {
    v = std::exp(-(v * v)) * w + std::sin(v + x) * 0.5 + (i % 3 == 0 ? x : 0.25) * std::log(1.5 + std::cos(v));
    s = s * 0.5 + v * w;
  }
  return v + s;
}

}  // namespace

TEST_CASE("lanes: the recurrence with vector sin, forward, adjoint and both in one sweep, on 1-3 threads") {
  static_assert(decltype(recurrence)::interleaves_forward<f1, f1, int, float, float>());
  static_assert(decltype(recurrence)::interleaves_adjoint<f1, f1, int, float, float>());
  constexpr int iters = 37;
  constexpr float a = 0.9f, b = 0.7f;
  bool differs_from_scalar = false;
  for (int threads : {1, 2, 3}) {
    ad_test::thread_scope scope(threads);
    for (int n : sizes) {
      f1 x({n}, {.name = "x"}), out({n}, {.name = "out"}), serial_out({n}, {.name = "serial_out"});
      for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.37f * float(i)) + 0.1f;
      recurrence(x, out, iters, a, b);
      recurrence_serial(x, serial_out, iters, a, b);
      auto seed_of = [](int i) { return 1.0f + 0.25f * std::cos(0.3f * float(i)); };
      std::vector<double> by_hand(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        double const xi = x.at(i);
        std::vector<double> history(iters);
        double v = 0.0;
        for (int j = 0; j < iters; ++j) history[std::size_t(j)] = v, v = std::sin(v) * a + xi * b;
        double g = seed_of(i), dx = 0.0;
        for (int j = iters - 1; j >= 0; --j) dx += g * b, g = g * a * std::cos(history[std::size_t(j)]);
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(out.at(i) == Approx(v).epsilon(1e-5));
        differs_from_scalar = differs_from_scalar || out.at(i) != serial_out.at(i);
        out.grad().at(i) = seed_of(i);
        by_hand[std::size_t(i)] = dx;
      }
      x.zero_grad();
      recurrence.grad(x, out, iters, a, b);
      std::vector<float> const adjoint = x.grad().to_vector();
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(adjoint[std::size_t(i)] == Approx(by_hand[std::size_t(i)]).epsilon(1e-4));
      }
      // One sweep: the same values and gradient, to the bit.
      f1 fused_out({n}, {.name = "fused_out"});
      for (int i = 0; i < n; ++i) fused_out.grad().at(i) = seed_of(i);
      x.zero_grad();
      recurrence.value_and_grad(x, fused_out, iters, a, b);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(fused_out.at(i) == out.at(i));
        REQUIRE(x.grad().at(i) == adjoint[std::size_t(i)]);
      }
    }
  }
  if constexpr (ctg::vector_math_enabled) CHECK(differs_from_scalar);
}

TEST_CASE("lanes: vector functions beside per-frame nodes, two statements, two fields with gradients") {
  static_assert(decltype(mixed)::interleaves_forward<d1, d1, d1, int>());
  static_assert(decltype(mixed)::interleaves_adjoint<d1, d1, d1, int>());
  constexpr int iters = 12;
  for (int threads : {1, 3}) {
    ad_test::thread_scope scope(threads);
    for (int n : {7, 8, 9, 41}) {
      d1 x({n}, {.name = "x"}), w({n}, {.name = "w"}), out({n}, {.name = "out"});
      for (int i = 0; i < n; ++i) x.at(i) = 0.8 * std::sin(0.7 * i), w.at(i) = 0.6 + 0.3 * std::cos(0.45 * i);
      mixed(x, w, out, iters);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(out.at(i) == Approx(mixed_by_hand(i, x.at(i), w.at(i), iters)).epsilon(1e-12));
      }
      // d sum(c_i out_i) / d x_i and / d w_i against central differences of
      // the loop by hand (each out_i depends on x_i and w_i only).
      auto seed_of = [](int i) { return 1.0 + 0.1 * i; };
      for (int i = 0; i < n; ++i) out.grad().at(i) = seed_of(i);
      x.zero_grad();
      w.zero_grad();
      mixed.grad(x, w, out, iters);
      constexpr double h = 1e-6;
      for (int i = 0; i < n; ++i) {
        double const xi = x.at(i), wi = w.at(i);
        double const dx = (mixed_by_hand(i, xi + h, wi, iters) - mixed_by_hand(i, xi - h, wi, iters)) / (2 * h);
        double const dw = (mixed_by_hand(i, xi, wi + h, iters) - mixed_by_hand(i, xi, wi - h, iters)) / (2 * h);
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(x.grad().at(i) == Approx(seed_of(i) * dx).epsilon(1e-6));
        REQUIRE(w.grad().at(i) == Approx(seed_of(i) * dw).epsilon(1e-6));
      }
    }
  }
}
