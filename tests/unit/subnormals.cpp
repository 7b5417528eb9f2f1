// ctg::set_flush_subnormals: host launches (and a tape's host-side adds)
// flush subnormal operands and results to zero on every thread that runs a
// chunk, and leave the calling thread's own mode as it was; gradients stay
// right under it.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <ctgrad/ctgrad.hpp>
#include <thread>
#include <vector>

#include "ad_test_support.hpp"
#include "wait_support.hpp"

namespace {

// The switch back off when a test ends (the pool's size: thread_scope).
struct flush_switch_off {
  ~flush_switch_off() { ctg::set_flush_subnormals(false); }
};

// A product computed on this thread, out of the compiler's sight.
float host_product(float a, float b) {
  volatile float va = a, vb = b;
  return va * vb;
}

auto scale_kernel = ctg::kernel<"scale">(
    [](auto x, auto y, float s) { return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * s; }); });

// Top-level statements: a serial offload, run on the calling thread.
auto scale_first_kernel = ctg::kernel<"scale_first">([](auto x, auto y, float s) { return y[0] = x[0] * s; });

// v <- sin(v) a + x b, 64 times: the adjoint multiplies by a cos(v) < 1 at
// every step, and in float it passes through subnormals on its way to zero.
auto recurrence_kernel = ctg::kernel<"recurrence">([](auto x, auto out, int steps, float a, float b) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(0.0f, [=](auto v) {
      return ctg::block(ctg::range(steps, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  });
});

}  // namespace

TEST_CASE("a host launch flushes subnormals only when asked, on every thread, and restores the caller's mode") {
  if (!ctg::subnormal_flush_available) return;
  flush_switch_off const off;
  float const tiny = host_product(1e-20f, 1e-20f);  // 1e-40: subnormal in float
  REQUIRE(std::fpclassify(tiny) == FP_SUBNORMAL);
  float const from_tiny = host_product(tiny, 1e30f);  // a subnormal operand, a normal result
  REQUIRE(std::fpclassify(from_tiny) == FP_NORMAL);

  // Above the pool's inline threshold, so that two threads share the launches.
  int const n = 1 << 14;
  ctg::field<float, 1> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    ad_test::thread_scope const pool(threads);

    ctg::set_flush_subnormals(false);
    CHECK(!ctg::flush_subnormals());
    x.fill(1e-20f);
    scale_kernel(x, y, 1e-20f);
    for (int i = 0; i < n; ++i) REQUIRE(y.at(i) == tiny);
    x.fill(tiny);
    scale_kernel(x, y, 1e30f);
    for (int i = 0; i < n; ++i) REQUIRE(y.at(i) == from_tiny);

    ctg::set_flush_subnormals(true);
    CHECK(ctg::flush_subnormals());
    x.fill(1e-20f);
    scale_kernel(x, y, 1e-20f);  // a subnormal result
    for (int i = 0; i < n; ++i) REQUIRE(y.at(i) == 0.0f);
    x.fill(tiny);
    scale_kernel(x, y, 1e30f);  // a subnormal operand
    for (int i = 0; i < n; ++i) REQUIRE(y.at(i) == 0.0f);
    y.fill(1.0f);
    scale_first_kernel(x, y, 1e30f);
    CHECK(y.at(0) == 0.0f);

    // The calling thread's own arithmetic, after the launches: IEEE again.
    CHECK(host_product(1e-20f, 1e-20f) == tiny);
    CHECK(host_product(tiny, 1e30f) == from_tiny);
  }
}

TEST_CASE("the pool's workers run every chunk under the caller's subnormal mode") {
  if (!ctg::subnormal_flush_available) return;
  ctg::cpu::thread_pool pool(3);
  std::int64_t const n = ctg::cpu::thread_pool::inline_below * 4;
  REQUIRE_FALSE(pool.runs_on_caller(n));
  // Each mode after the other, so that a worker still in the previous
  // launch's mode would show.
  for (std::uint64_t const mode : {ctg::cpu::flush_bits, std::uint64_t(0), ctg::cpu::flush_bits}) {
    CAPTURE(mode);
    ctg::cpu::subnormal_mode_scope const caller(mode);
    auto const me = std::this_thread::get_id();
    std::atomic<int> on_workers{0}, other_mode{0};
    std::atomic<bool> waited{false};
    pool.parallel_for(n, [&](std::int64_t, std::int64_t) {
      if (ctg::cpu::subnormal_mode() != mode) other_mode.fetch_add(1);
      if (std::this_thread::get_id() != me) {
        on_workers.fetch_add(1);
      } else if (!waited.exchange(true)) {
        // The caller's first chunk (if the workers leave it any) waits until
        // a worker has run one.
        wait_support::eventually([&] { return on_workers.load() > 0; });
      }
    });
    CHECK(on_workers.load() > 0);
    CHECK(other_mode.load() == 0);
  }
}

TEST_CASE("a tape's backward() adds on the host in the program's subnormal mode") {
  if (!ctg::subnormal_flush_available) return;
  flush_switch_off const off;
  auto weigh = ctg::kernel<"weigh">(
      [](auto y, auto loss, float c) { return ctg::range(y.size(), [=](auto i) { return loss() += y[i] * c; }); });
  // x's gradient: copy_from's adjoint adds y's, 1.4e-38 (normal), to the
  // -1.5e-38 (normal) that ctg::keep_gradients set aside and adds back on
  // the host: -1e-39, subnormal, or 0 flushed.
  float const expected_ieee = host_product(1.4e-38f, 1.0f) + host_product(-1.5e-38f, 1.0f);
  REQUIRE(std::fpclassify(expected_ieee) == FP_SUBNORMAL);
  for (bool const flush : {false, true}) {
    CAPTURE(flush);
    ctg::set_flush_subnormals(flush);
    ctg::field<float, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
    ctg::field<float, 0, ctg::grad> loss({.name = "loss"});
    x.fill(1.0f);
    x.grad().fill(-1.5e-38f);
    {
      ctg::tape tape(loss, ctg::keep_gradients);
      y.copy_from(x);
      weigh(y, loss, 1.4e-38f);
      tape.backward();
    }
    for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == (flush ? 0.0f : expected_ieee));
    CHECK(host_product(1.4e-38f, 1.0f) + host_product(-1.5e-38f, 1.0f) == expected_ieee);
  }
}

TEST_CASE("a gradient that decays through subnormals is the same, flushed or not") {
  if (!ctg::subnormal_flush_available) return;
  flush_switch_off const off;
  int const n = 4096, steps = 64;
  float const a = 0.9f, b = 0.7f;
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  for (int i = 0; i < n; ++i) x.at(i) = float(std::sin(0.37 * i));

  // The hand-written adjoint, in double: out = v_64, dv_j = dv_{j+1} a cos(v_j),
  // dx = sum over the steps of dv_{j+1} b.
  std::vector<double> expected(static_cast<std::size_t>(n));
  int decayed = 0;  // elements whose float adjoint chain meets a subnormal
  for (int i = 0; i < n; ++i) {
    std::vector<double> v(std::size_t(steps) + 1, 0.0);
    for (int j = 0; j < steps; ++j) v[std::size_t(j) + 1] = std::sin(v[std::size_t(j)]) * a + double(x.at(i)) * b;
    double g = 1.0, dx = 0.0;
    bool subnormal = false;
    for (int j = steps - 1; j >= 0; --j) {
      dx += g * b;
      g *= a * std::cos(v[std::size_t(j)]);
      subnormal = subnormal || (g != 0.0 && std::fabs(g) < 1.1754944e-38);
    }
    expected[std::size_t(i)] = dx;
    decayed += subnormal ? 1 : 0;
  }
  REQUIRE(decayed > n / 20);  // the case this test is about

  for (bool const flush : {false, true}) {
    for (int threads : {1, 2}) {
      CAPTURE(flush);
      CAPTURE(threads);
      ad_test::thread_scope const pool(threads);
      ctg::set_flush_subnormals(flush);
      x.grad().fill(0.0f);
      recurrence_kernel(x, out, steps, a, b);
      out.grad().fill(1.0f);
      recurrence_kernel.grad(x, out, steps, a, b);
      for (int i = 0; i < n; ++i) {
        CAPTURE(i);
        REQUIRE(double(x.grad().at(i)) == doctest::Approx(expected[std::size_t(i)]).epsilon(1e-5));
      }
    }
  }
}
