// D2 and D3 decided on affine indices: accesses in nested loops (any depth,
// through funcs) are seen, provably disjoint accesses are accepted and give
// the finite-difference gradient, anything not provable is rejected by ID.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>
#include <ctgrad/ctgrad.hpp>

using namespace ctg::literals;

namespace {

using vec_t = ctg::field<double, 1, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;
using count_t = ctg::field<int, 0>;

template <class K, class... A>
constexpr ctg::report report_of() {
  return K::template diagnose<A...>();
}

// Central differences of `loss` after `forward`, against the tape's adjoint.
template <class Forward, class... P>
double worst_error(Forward&& forward, scal_t const& loss, P const&... params) {
  ctg::gradient_check_options opts;
  opts.step = 1e-6;
  opts.samples_per_field = 64;
  auto const r = ctg::check_gradient(opts, forward, loss, params...);
  CAPTURE(r.worst);
  CHECK(r.checked > 0);
  return r.worst_relative_error;
}

// loss += sum of t[i]^2.
constexpr auto sum = ctg::kernel<"sum">([](auto t, auto loss) {
  return ctg::range(t.size(), [=](auto i) { return loss() += t[i] * t[i]; });
});

}  // namespace

// ---- accesses in nested loops are seen -----------------------------------------------------------
// Each kernel writes t[i] at the offload level and reads t at another
// iteration's element inside a nested construct: they race in the forward
// pass, and the parallel adjoint cannot chain them.
namespace nested {

[[maybe_unused]] auto load_in_range = ctg::kernel<"load_in_range">([](auto t, auto a, auto w, auto loss, int n) {
  return ctg::range(t.size(), [=](auto i) {
    return ctg::block(t[i] = a[i] * w(),
                      ctg::range(n, [=](auto j) { return loss() += ctg::exp(t[(i + j + 1) % 3]); }));
  });
});
[[maybe_unused]] auto load_in_serial = ctg::kernel<"load_in_serial">([](auto t, auto a, auto w, auto loss, int n) {
  return ctg::range(t.size(), [=](auto i) {
    return ctg::block(t[i] = a[i] * w(),
                      ctg::serial_range(n, [=](auto j) { return loss() += ctg::sin(t[(i + j + 1) % 3]); }));
  });
});
[[maybe_unused]] auto load_in_while = ctg::kernel<"load_in_while", ctg::adstack_capacity<8>>([](auto t, auto a, auto w, auto loss, int n) {
  return ctg::range(t.size(), [=](auto i) {
    return ctg::block(t[i] = a[i] * w(), ctg::let(0, [=](auto k) {
                        return ctg::while_(k < n, ctg::block(loss() += ctg::sin(t[(i + k + 1) % 3]), k = k + 1));
                      }));
  });
});
[[maybe_unused]] auto load_in_func = ctg::kernel<"load_in_func">([](auto t, auto a, auto w, auto loss, int n) {
  auto sweep = ctg::func<"sweep">([](auto t, auto loss, auto i, int n) {
    return ctg::range(n, [=](auto j) { return loss() += ctg::exp(t[(i + j + 1) % 3]); });
  });
  return ctg::range(t.size(), [=](auto i) { return ctg::block(t[i] = a[i] * w(), sweep(t, loss, i, n)); });
});
[[maybe_unused]] auto store_in_range = ctg::kernel<"store_in_range">([](auto t, auto a, auto w, auto loss) {
  return ctg::range(t.size(), [=](auto i) {
    return ctg::block(ctg::range(1, [=](auto) { return t[i] = a[i] * w(); }), loss() += ctg::exp(t[(i + 1) % 3]));
  });
});
// The nested index alone reaches every element: t[j] is what other
// iterations write as t[i].
[[maybe_unused]] auto nested_index = ctg::kernel<"nested_index">([](auto t, auto a, auto w, auto loss, auto n) {
  return ctg::range(t.size(), [=](auto i) {
    return ctg::block(t[i] = a[i] * w(), ctg::serial_range(n(), [=](auto j) { return loss() += ctg::exp(t[j]); }));
  });
});

static_assert(report_of<decltype(load_in_range), vec_t, vec_t, scal_t, scal_t, int>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(load_in_serial), vec_t, vec_t, scal_t, scal_t, int>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(load_in_while), vec_t, vec_t, scal_t, scal_t, int>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(load_in_func), vec_t, vec_t, scal_t, scal_t, int>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(store_in_range), vec_t, vec_t, scal_t, scal_t>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(nested_index), vec_t, vec_t, scal_t, scal_t, count_t>().has(ctg::finding::cross_iteration_raw));

// The func that holds the load is named in the finding.
static_assert(std::string_view(report_of<decltype(load_in_func), vec_t, vec_t, scal_t, scal_t, int>().items[0].func) ==
              "sweep");

}  // namespace nested

// A dependence carried only by the nested loop's own index runs serially
// inside one iteration: with one iteration of the offload there is no other
// iteration to race with (the seed's nested shapes).
TEST_CASE("a chain through a nested loop under a one-iteration offload is exact") {
  auto chain = ctg::kernel<"chain">([](auto x, auto out, auto n) {
    return ctg::range(1, [=](auto) {
      return ctg::range(n(), [=](auto j) { return ctg::if_(j == 0, out[j] = x(), out[j] = out[j - 1] + x()); });
    });
  });
  static_assert(report_of<decltype(chain), scal_t, vec_t, count_t>().ok());
  scal_t x;
  vec_t out(5);
  count_t n;
  n.at() = 5;
  x.at() = 0.5;
  chain(x, out, n);
  out.grad().at(4) = 1.0;
  chain.grad(x, out, n);
  CHECK(x.grad().at() == 5.0);

  // Two iterations of the offload would both write out[0..n): rejected at launch.
  auto twice = ctg::kernel<"twice">([](auto x, auto out, auto n) {
    return ctg::range(2, [=](auto) {
      return ctg::range(n(), [=](auto j) { return ctg::if_(j == 0, out[j] = x(), out[j] = out[j - 1] + x()); });
    });
  });
  twice(x, out, n);
  CHECK_THROWS_WITH_AS(twice.grad(x, out, n), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
}

// ---- provably disjoint accesses are accepted -----------------------------------------------------
TEST_CASE("reads [0,3), writes [3,6): compile-time bounds") {
  auto k = ctg::kernel<"shift3">([](auto t, auto w) {
    return ctg::range(3_c, [=](auto i) { return t[i + 3_c] = ctg::cos(t[i]) * w(); });
  });
  constexpr auto r = report_of<decltype(k), vec_t, scal_t>();
  static_assert(r.ok() && r.undecided == 0);
  vec_t t(6);
  scal_t w, loss;
  for (int i = 0; i < 6; ++i) t.at(i) = 0.3 + 0.2 * i;
  w.at() = 1.3;
  auto forward = [&] {
    loss.at() = 0;
    k(t, w);
    sum(t, loss);
  };
  CHECK(worst_error(forward, loss, t, w) < 1e-6);
}

TEST_CASE("odd from even: no integer solution (GCD)") {
  auto k = ctg::kernel<"odd_even">([](auto t, auto w) {
    return ctg::range(3, [=](auto i) { return t[2 * i + 1] = ctg::sin(t[2 * i]) * w(); });
  });
  static_assert(report_of<decltype(k), vec_t, scal_t>().ok());
  vec_t t(6);
  scal_t w, loss;
  for (int i = 0; i < 6; ++i) t.at(i) = 0.1 * (i + 1);
  w.at() = 0.7;
  auto forward = [&] {
    loss.at() = 0;
    k(t, w);
    sum(t, loss);
  };
  CHECK(worst_error(forward, loss, t, w) < 1e-6);
}

TEST_CASE("reads the upper half, writes the lower half: plain-number bounds") {
  auto k = ctg::kernel<"halves">([](auto t) {
    return ctg::range(2, [=](auto i) { return t[i] = ctg::cos(t[i + 2]) + t[i]; });
  });
  auto sum = ctg::kernel<"sum">([](auto t, auto loss) {
    return ctg::range(t.size(), [=](auto i) { return loss() += t[i] * t[i] * t[i]; });
  });
  static_assert(report_of<decltype(k), vec_t>().ok());
  vec_t t(4);
  scal_t loss;
  // The kernel updates t[0..2) in place, so each evaluation starts from the
  // same values.
  double const start[] = {0.2, -0.4, 0.9, 1.3};
  auto forward = [&] {
    for (int i = 0; i < 2; ++i) t.at(i) = start[i];
    loss.at() = 0;
    k(t);
    sum(t, loss);
  };
  {
    ctg::tape tape(loss);
    for (int i = 2; i < 4; ++i) t.at(i) = start[i];
    forward();
    tape.backward();
  }
  for (int i = 0; i < 2; ++i) {
    double const ti = start[i] + std::cos(start[i + 2]);
    double const want = 3 * ti * ti * -std::sin(start[i + 2]) + 3 * start[i + 2] * start[i + 2];
    CHECK(t.grad().at(i + 2) == doctest::Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("D3: a read of [0,2), then a write of [2,4) in a later offload") {
  auto k = ctg::kernel<"read_then_write_elsewhere">([](auto a, auto w, auto loss) {
    return ctg::block(ctg::range(2, [=](auto i) { return loss() += ctg::exp(a[i]) * w(); }),
                      ctg::range(2, [=](auto i) { return a[i + 2] = w() * 2.0; }));
  });
  static_assert(report_of<decltype(k), vec_t, scal_t, scal_t>().ok());
  vec_t a(4);
  scal_t w, loss;
  a.at(0) = 0.25;
  a.at(1) = -0.5;
  w.at() = 1.5;
  auto forward = [&] {
    loss.at() = 0;
    k(a, w, loss);
  };
  CHECK(worst_error(forward, loss, a, w) < 1e-6);
  // Overlapping ranges stay rejected.
  auto overlap = ctg::kernel<"overlap">([](auto a, auto w, auto loss) {
    return ctg::block(ctg::range(2, [=](auto i) { return loss() += ctg::exp(a[i]) * w(); }),
                      ctg::range(2, [=](auto i) { return a[i + 1] = w() * 2.0; }));
  });
  static_assert(report_of<decltype(overlap), vec_t, scal_t, scal_t>().has(ctg::finding::overwritten_after_read));
}

// ---- the same shapes through funcs, ndrange, each, static_range, serial_range ---------------------
// A func at namespace scope is not captured: the kernel lambda stays
// captureless, so its plain numbers are known at compile time.
constexpr auto half = ctg::func<"half">([](auto u, auto i, auto j) { return u(i, j) = ctg::sin(u(i + 2, j)) * 2.0; });

TEST_CASE("disjoint halves through a func and an ndrange") {
  auto k = ctg::kernel<"nd_halves">([](auto u) { return ctg::ndrange(2, 3, [=](auto i, auto j) { return half(u, i, j); }); });
  using grid_t = ctg::field<double, 2, ctg::grad>;
  static_assert(report_of<decltype(k), grid_t>().ok());
  grid_t u(4, 3);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) u.at(i, j) = 0.1 * i - 0.2 * j;
  k(u);
  CHECK_NOTHROW(k.grad(u));
  // Rows 1 and 3 overlap rows 0 and 2 when the offset is 1.
  auto shift1 = ctg::kernel<"nd_shift1">([](auto u) {
    return ctg::ndrange(2, 3, [=](auto i, auto j) { return u(i, j) = ctg::sin(u(i + 1, j)) * 2.0; });
  });
  static_assert(report_of<decltype(shift1), grid_t>().has(ctg::finding::cross_iteration_raw));
}

TEST_CASE("static_range and serial_range bodies: a nested chain on the iteration's own row is exact") {
  using grid_t = ctg::field<double, 2, ctg::grad>;
  // Each offload iteration owns row i; the nested serial chain moves along it.
  auto rows = ctg::kernel<"rows">([](auto u, auto w) {
    return ctg::range(u.shape(0_c), [=](auto i) {
      return ctg::serial_range(1, u.shape(1_c), [=](auto j) { return u(i, j) = u(i, j - 1) * w() + 1.0; });
    });
  });
  auto unrolled = ctg::kernel<"unrolled">([](auto u, auto w) {
    return ctg::range(u.shape(0_c), [=](auto i) {
      return ctg::static_range<1, 4>([=](auto j) { return u(i, j) = u(i, j - 1_c) * w() + 1.0; });
    });
  });
  static_assert(report_of<decltype(rows), grid_t, scal_t>().ok());
  static_assert(report_of<decltype(unrolled), grid_t, scal_t>().ok());
  grid_t u(3, 4);
  scal_t w, loss;
  w.at() = 0.8;
  auto sum = ctg::kernel<"sum2">([](auto u, auto loss) {
    return ctg::ndrange(u.shape(0_c), u.shape(1_c), [=](auto i, auto j) { return loss() += u(i, j) * u(i, j); });
  });
  for (int which = 0; which < 2; ++which) {
    auto forward = [&] {
      for (int i = 0; i < 3; ++i) u.at(i, 0) = 0.5 + i;
      loss.at() = 0;
      if (which == 0)
        rows(u, w);
      else
        unrolled(u, w);
      sum(u, loss);
    };
    CHECK(worst_error(forward, loss, w) < 1e-6);
  }
}

TEST_CASE("each over a field with a time-shifted read stays exact, an unshifted row is rejected") {
  using grid_t = ctg::field<double, 2, ctg::grad>;
  using row_t = ctg::field<double, 1, ctg::grad>;
  auto step = ctg::kernel<"each_step">([](auto u, auto v) {
    return ctg::each(v, [=](auto i) { return u(1_c, i) = ctg::tanh(u(0_c, i)) + v[i]; });
  });
  static_assert(report_of<decltype(step), grid_t, row_t>().ok());
  auto same_row = ctg::kernel<"each_same_row">([](auto u, auto v) {
    return ctg::each(v, [=](auto i) { return u(0_c, i) = ctg::tanh(u(0_c, (i + 1) % 3)) + v[i]; });
  });
  static_assert(report_of<decltype(same_row), grid_t, row_t>().has(ctg::finding::cross_iteration_raw));
}

// ---- loop bounds read from fields are evaluated at launch ---------------------------------------
TEST_CASE("a constant slot outside a field-load range passes at launch; inside, it is rejected") {
  auto k = ctg::kernel<"outside_fieldbound">([](auto x, auto out, auto n) {
    return ctg::range(n(), [=](auto i) { return out[i] = out[4] + x(); });
  });
  static_assert(report_of<decltype(k), scal_t, vec_t, count_t>().ok());
  scal_t x;
  vec_t out(8);
  count_t n;
  x.at() = 2.0;
  for (int limit : {4, 3, 0}) {
    n.at() = limit;
    k(x, out, n);
    out.zero_grad();
    for (int i = 0; i < limit; ++i) out.grad().at(i) = 1.0;
    x.zero_grad();
    CHECK_NOTHROW(k.grad(x, out, n));
    CHECK(x.grad().at() == double(limit));
  }
  n.at() = 5;
  k(x, out, n);
  CHECK_THROWS_WITH_AS(k.grad(x, out, n), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
}

TEST_CASE("a parallel loop's bound field written later in the kernel: rejected for k.grad, restored on a tape") {
  // The adjoint evaluates the loop's bounds again. Here the kernel zeroes
  // the bound after the loop, so that evaluation would run no iteration:
  // k.grad refuses it (CTG-AD-004); a tape gives the adjoint the bound the
  // launch began with. The same for a begin bound, and for a write by a later
  // offload; a write by an earlier offload is what the loop read, so the
  // tape cannot restore it either.
  auto after = ctg::kernel<"bound_after">([](auto x, auto n, auto loss) {
    return ctg::block(ctg::range(n(), [=](auto i) { return loss() += x[i] * x[i]; }), n() = 0);
  });
  auto begin_later = ctg::kernel<"begin_later">([](auto x, auto b, auto loss) {
    return ctg::block(ctg::range(b(), x.size(), [=](auto i) { return loss() += x[i] * x[i]; }),
                      ctg::range(1, [=](auto) { return b() = 3; }));
  });
  auto before = ctg::kernel<"bound_before">([](auto x, auto n, auto loss) {
    return ctg::block(n() = 2, ctg::range(n(), [=](auto i) { return loss() += x[i] * x[i]; }), n() = 0);
  });
  constexpr auto after_report = report_of<decltype(after), vec_t, count_t, scal_t>();
  static_assert(after_report.has(ctg::finding::overwritten_after_read));
  static_assert(report_of<decltype(begin_later), vec_t, count_t, scal_t>().has(ctg::finding::overwritten_after_read));
  static_assert((after_report.pre_params & 2u) != 0);  // parameter 1, the bound: restorable on a tape
  static_assert((report_of<decltype(before), vec_t, count_t, scal_t>().pre_params & 2u) == 0);

  vec_t x({4}, {.name = "x"});
  count_t n({.name = "n"});
  scal_t loss({.name = "loss"});
  double const values[] = {0.5, -1.25, 2.0, 3.5};
  for (int i = 0; i < 4; ++i) x.at(i) = values[i];
  {
    n.at() = 4;
    ctg::tape tape(loss);
    after(x, n, loss);
    tape.backward();
    for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(2.0 * values[i]));
  }
  x.zero_grad();
  loss.at() = 0;
  loss.zero_grad();
  {
    n.at() = 1;  // the begin bound
    ctg::tape tape(loss);
    begin_later(x, n, loss);
    tape.backward();
    for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(i >= 1 ? 2.0 * values[i] : 0.0));
  }
}

// ---- the launch-time verdict of a kernel launched again -----------------------------------------
// Every launch decides the pairs the types leave open with its own numbers,
// whatever earlier launches of the kernel found; the pairs the types prove
// apart it does not judge again (check/rules.hpp, with_numbers). Each
// kernel below reads out[4] in iterations 0 .. limit - 1 and writes out[i]:
// apart up to a limit of 4, meeting at 5 (as the integer-field case above).
namespace {

// launch(out, x, limit) runs the forward launch; grad(out, x, limit) the adjoint.
void check_limit_verdicts(auto&& launch, auto&& grad) {
  scal_t x;
  vec_t out(9);
  x.at() = 2.0;
  for (int round = 0; round < 2; ++round) {
    for (int limit : {4, 3}) {
      launch(out, x, limit);
      out.zero_grad();
      x.zero_grad();
      for (int i = 0; i < limit; ++i) out.grad().at(i) = 1.0;
      CHECK_NOTHROW(grad(out, x, limit));
      CHECK(x.grad().at() == double(limit));
    }
  }
  launch(out, x, 5);
  CHECK_THROWS_WITH_AS(grad(out, x, 5), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(grad(out, x, 5), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
  launch(out, x, 4);
  CHECK_NOTHROW(grad(out, x, 4));
}

}  // namespace

TEST_CASE("launched again: a scalar argument decides again") {
  auto k = ctg::kernel<"limit_argument">([](auto out, auto x, int limit) {
    return ctg::range(limit, [=](auto i) { return out[i] = out[4] + x(); });
  });
  static_assert(report_of<decltype(k), vec_t, scal_t, int>().undecided > 0);
  check_limit_verdicts([&](vec_t& out, scal_t& x, int limit) { k(out, x, limit); },
                       [&](vec_t& out, scal_t& x, int limit) { k.grad(out, x, limit); });
}

TEST_CASE("launched again: a value captured by reference decides again") {
  int limit = 0;
  auto k = ctg::kernel<"limit_captured">([&limit](auto out, auto x) {
    return ctg::range(limit, [=](auto i) { return out[i] = out[4] + x(); });
  });
  check_limit_verdicts(
      [&](vec_t& out, scal_t& x, int l) {
        limit = l;
        k(out, x);
      },
      [&](vec_t& out, scal_t& x, int l) {
        limit = l;
        k.grad(out, x);
      });
}

TEST_CASE("launched again: a field of other extents decides again") {
  auto k = ctg::kernel<"limit_extent">([](auto out, auto x) {
    return ctg::range(out.size() - 4, [=](auto i) { return out[i] = out[4] + x(); });
  });
  scal_t x;
  vec_t apart(8), meeting(9);
  for (int round = 0; round < 2; ++round) {
    k(apart, x);
    CHECK_NOTHROW(k.grad(apart, x));
  }
  k(meeting, x);
  CHECK_THROWS_WITH_AS(k.grad(meeting, x), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
  k(apart, x);
  CHECK_NOTHROW(k.grad(apart, x));
}

// ---- a step number kept in an integer field -------------------------------------------------------
// x(step() + 1, i) against x(step(), i): the rows differ by one whatever the
// step holds, which the launch's index forms read (the types alone cannot:
// the step is a value, as a scalar argument is). A kernel advances the step,
// as a rollout that stays on the device does; the tape keeps each launch's
// step for its adjoint.
TEST_CASE("rows chosen by an integer field the kernel does not write: decided at launch") {
  using grid_t = ctg::field<double, 2, ctg::grad>;
  auto step_kernel = ctg::kernel<"step_in_field">([](auto x, auto step) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return x(step() + 1, i) = ctg::sin(x(step(), i)); });
  });
  auto advance = ctg::kernel<"advance_step">([](auto step) { return step() = step() + 1; });
  auto last_row = ctg::kernel<"last_row_sum">([](auto x, auto loss) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return loss() += x(x.shape(ctg::c<0>) - 1, i); });
  });
  constexpr auto r = report_of<decltype(step_kernel), grid_t, count_t>();
  static_assert(r.ok() && r.undecided > 0);
  constexpr int steps = 4, cells = 3;
  grid_t x(steps + 1, cells);
  scal_t loss;
  count_t step;
  for (int i = 0; i < cells; ++i) x.at(0, i) = 0.3 + 0.4 * i;
  {
    ctg::tape tape(loss);
    for (int t = 0; t < steps; ++t) {
      step_kernel(x, step);
      advance(step);
    }
    last_row(x, loss);
    tape.backward();
  }
  CHECK(step.at() == steps);
  // d x(T, i) / d x(0, i) = cos(x(0, i)) cos(x(1, i)) ... cos(x(T - 1, i)).
  auto check_chain_gradient = [&] {
    for (int i = 0; i < cells; ++i) {
      double v = 0.3 + 0.4 * i, want = 1.0;
      for (int t = 0; t < steps; ++t) {
        want *= std::cos(v);
        v = std::sin(v);
      }
      CHECK(x.grad().at(0, i) == doctest::Approx(want).epsilon(1e-12));
    }
  };
  check_chain_gradient();

  // Without a tape: each launch reads its own step field, and the rows the
  // later launches write (x(step() + 1, i)) are not the ones the earlier
  // adjoints read. A step changed after its launch is refused (CTG-TAPE-003).
  x.zero_grad();
  std::vector<count_t> steps_of(steps);
  for (int t = 0; t < steps; ++t) {
    steps_of[std::size_t(t)].at() = t;
    step_kernel(x, steps_of[std::size_t(t)]);
  }
  for (int i = 0; i < cells; ++i) x.grad().at(steps, i) = 1.0;
  for (int t = steps - 1; t >= 1; --t) step_kernel.grad(x, steps_of[std::size_t(t)]);
  steps_of[0].at() = 2;
  CHECK_THROWS_WITH_AS(step_kernel.grad(x, steps_of[0]), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
  steps_of[0].at() = 0;
  step_kernel(x, steps_of[0]);
  step_kernel.grad(x, steps_of[0]);
  check_chain_gradient();

  // The same rows from a field the kernel itself writes afterwards: refused,
  // since the adjoint would read the step the kernel left.
  auto moving = ctg::kernel<"step_written">([](auto x, auto step) {
    return ctg::block(ctg::range(x.shape(ctg::c<1>), [=](auto i) { return x(step() + 1, i) = ctg::sin(x(step(), i)); }),
                      step() = step() + 1);
  });
  static_assert(report_of<decltype(moving), grid_t, count_t>().has(ctg::finding::overwritten_after_read));
  (void)moving;
}

TEST_CASE("rows chosen by two integer fields: refused at launch when they meet") {
  // x(to(), i) = sin(x(from(), i)) in one parallel loop: apart while the
  // fields hold different rows; the same row is an update in place of each
  // element, which the adjoint reads overwritten (CTG-AD-004).
  using grid_t = ctg::field<double, 2, ctg::grad>;
  auto rows = ctg::kernel<"rows_from_fields">([](auto x, auto from, auto to) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return x(to(), i) = ctg::sin(x(from(), i)); });
  });
  static_assert(report_of<decltype(rows), grid_t, count_t, count_t>().undecided > 0);
  grid_t x(3, 2);
  count_t from, to;
  x.at(0, 1) = 0.5;
  from.at() = 0;
  to.at() = 2;
  rows(x, from, to);
  x.grad().at(2, 1) = 1.0;
  CHECK_NOTHROW(rows.grad(x, from, to));
  CHECK(x.grad().at(0, 1) == doctest::Approx(std::cos(0.5)).epsilon(1e-12));
  to.at() = 0;
  rows(x, from, to);
  CHECK_THROWS_WITH_AS(rows.grad(x, from, to), doctest::Contains("CTG-AD-004"), ctg::autodiff_error);
}

TEST_CASE("rows chosen by an integer field some statement of the kernel writes: refused at compile time") {
  // The first offload writes `next`; the loop then reads x(step(), i) and
  // overwrites x(next(), i), rows the types cannot tell apart.
  using grid_t = ctg::field<double, 2, ctg::grad>;
  auto k = ctg::kernel<"rows_after_write">([](auto x, auto step, auto next) {
    return ctg::block(next() = step() + 1, ctg::range(x.shape(ctg::c<1>), [=](auto i) {
                        return x(next(), i) = ctg::sin(x(step(), i));
                      }));
  });
  static_assert(report_of<decltype(k), grid_t, count_t, count_t>().has(ctg::finding::overwritten_after_read));
  (void)k;
}

TEST_CASE("an integer field passed twice, the kernel writing it under one name: refused at launch") {
  // The checks follow each parameter by its position: under the name it
  // does not write, `step` would pass for unchanged (rows 3 and 2 at the
  // check, rows 1 and 0 in the forward launch).
  using grid_t = ctg::field<double, 2, ctg::grad>;
  auto k = ctg::kernel<"step_twice">([](auto x, auto step, auto next) {
    return ctg::block(ctg::range(x.shape(ctg::c<1>), [=](auto i) { return x(step() + 1, i) = ctg::sin(x(step(), i)); }),
                      next() = 2);
  });
  grid_t x(4, 1);
  count_t step, other;
  x.at(0, 0) = 0.5;
  k(x, step, step);
  x.grad().at(1, 0) = 1.0;
  CHECK_THROWS_WITH_AS(k.grad(x, step, step), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
  // A forward launch may pass it twice; the rows it wrote then count as all
  // rows, since the step it chose them by has changed: an adjoint that read
  // row 1 before this launch rewrote it is refused.
  auto square_row1 = ctg::kernel<"square_row_one">([](auto x, auto y) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return y[i] = x(1, i) * x(1, i); });
  });
  vec_t y(1);
  step.at() = 0;
  square_row1(x, y);
  k(x, step, step);  // writes row 1, then step = 2
  y.grad().at(0) = 1.0;
  CHECK_THROWS_WITH_AS(square_row1.grad(x, y), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
  // Two fields: the kernel leaves `step` alone, and the gradient is cos(0.5).
  x.zero_grad();
  k(x, step, other);
  x.grad().at(step.at() + 1, 0) = 1.0;
  k.grad(x, step, other);
  CHECK(x.grad().at(step.at(), 0) == doctest::Approx(std::cos(x.at(step.at(), 0))).epsilon(1e-12));
}

TEST_CASE("an index the types cannot follow is judged for parallel stores at every launch") {
  // perm[i * stride]: opaque to the types (i times an unknown number); with
  // stride 0 every iteration stores into one element (CTG-AD-013). The pair
  // out[perm[..]] / out[n] leaves the kernel open, so the launch checks run.
  auto k = ctg::kernel<"zero_stride">([](auto out, auto x, auto perm, int stride, int n) {
    return ctg::range(4, [=](auto i) { return out[perm[i * stride]] = x[i] + out[n]; });
  });
  static_assert(report_of<decltype(k), vec_t, vec_t, ctg::field<int, 1>, int, int>().undecided > 0);
  vec_t out(8), x(4);
  ctg::field<int, 1> perm(4);
  for (int i = 0; i < 4; ++i) perm.at(i) = i;
  k(out, x, perm, 0, 7);
  CHECK_THROWS_WITH_AS(k.grad(out, x, perm, 0, 7), doctest::Contains("CTG-AD-013"), ctg::autodiff_error);
}

// ---- guards: red-black sweeps ------------------------------------------------------------------------
// A red-black Gauss-Seidel sweep updates the cells of one colour in place
// from their four neighbours, which have the other: `if_((i + j) % 2 ==
// colour, p(i, j) = ...)`. No iteration reads a cell another writes, which
// the guard shows (two iterations that both take it have i + j of one
// parity, and a neighbour's differs by one); a read of the same colour, or a
// read outside the guard, is still CTG-AD-002.
namespace red_black {

using grid_t = ctg::field<double, 2, ctg::grad>;

// [snippet: red_black]
template <int Colour>
constexpr auto sweep = ctg::kernel<"red_black_sweep">([](auto p, auto b) {
  return ctg::ndrange(p.shape(0_c) - 2, p.shape(1_c) - 2, [=](auto i0, auto j0) {
    auto const i = i0 + 1;
    auto const j = j0 + 1;
    return ctg::if_((i + j) % 2 == Colour,
                    p(i, j) = 0.25 * (p(i - 1, j) + p(i + 1, j) + p(i, j - 1) + ctg::sin(p(i, j + 1)) - b(i, j)));
  });
});
// [snippet end]
// The colour as an argument, and a second condition beside the parity.
constexpr auto sweep_of = ctg::kernel<"red_black_sweep_of">([](auto p, auto b, int colour) {
  return ctg::ndrange(p.shape(0_c) - 2, p.shape(1_c) - 2, [=](auto i0, auto j0) {
    auto const i = i0 + 1;
    auto const j = j0 + 1;
    return ctg::if_(i > 0 && (i + j) % 2 == colour,
                    p(i, j) = 0.25 * (p(i - 1, j) * p(i + 1, j) + p(i, j - 1) + p(i, j + 1) - b(i, j)));
  });
});
// The diagonal neighbour has the same colour.
constexpr auto same_colour = ctg::kernel<"same_colour">([](auto p, auto b) {
  return ctg::ndrange(p.shape(0_c) - 2, p.shape(1_c) - 2, [=](auto i0, auto j0) {
    auto const i = i0 + 1;
    auto const j = j0 + 1;
    return ctg::if_((i + j) % 2 == 0, p(i, j) = 0.5 * (p(i + 1, j + 1) + b(i, j)));
  });
});
constexpr auto same_colour_of = ctg::kernel<"same_colour_of">([](auto p, auto b, int colour) {
  return ctg::ndrange(p.shape(0_c) - 2, p.shape(1_c) - 2, [=](auto i0, auto j0) {
    auto const i = i0 + 1;
    auto const j = j0 + 1;
    return ctg::if_((i + j) % 2 == colour, p(i, j) = 0.5 * (p(i - 1, j - 1) + b(i, j)));
  });
});
// The read happens in every iteration, the write in half of them.
constexpr auto read_outside = ctg::kernel<"read_outside">([](auto p, auto b) {
  return ctg::ndrange(p.shape(0_c) - 2, p.shape(1_c) - 2, [=](auto i0, auto j0) {
    auto const i = i0 + 1;
    auto const j = j0 + 1;
    return ctg::block(b(i, j) = p(i + 1, j), ctg::if_((i + j) % 2 == 0, p(i, j) = 2.0 * b(i, j)));
  });
});
constexpr auto total = ctg::kernel<"total">([](auto p, auto loss) {
  return ctg::ndrange(p.shape(0_c), p.shape(1_c), [=](auto i, auto j) { return loss() += p(i, j) * p(i, j); });
});

static_assert(report_of<decltype(sweep<0>), grid_t, grid_t>().ok());
static_assert(report_of<decltype(sweep<1>), grid_t, grid_t>().ok());
static_assert(report_of<decltype(sweep_of), grid_t, grid_t, int>().undecided > 0);
static_assert(report_of<decltype(same_colour), grid_t, grid_t>().has(ctg::finding::cross_iteration_raw));
static_assert(report_of<decltype(read_outside), grid_t, grid_t>().has(ctg::finding::cross_iteration_raw));
// An unsigned g wraps: at i = 0, (i - 1) % 3 is (2^32 - 1) % 3 = 0, as at i = 1,
// so iteration 0 reads x[1], which iteration 1 writes.
constexpr auto unsigned_guard = ctg::kernel<"unsigned_guard">([](auto x) {
  return ctg::range(x.size() - 1, [=](auto i) {
    return ctg::if_((ctg::cast<unsigned>(i) - 1u) % 3u == 0u, x[i] = ctg::sin(x[i + 1]));
  });
});
static_assert(report_of<decltype(unsigned_guard), vec_t>().has(ctg::finding::cross_iteration_raw));

}  // namespace red_black

TEST_CASE("red-black sweeps: the parity guard keeps the colours apart, the gradient is exact") {
  using namespace red_black;
  int const n = 7;
  grid_t p({n, n}, {.name = "p"}), b({n, n}, {.name = "b"});
  scal_t loss({.name = "loss"});
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) b.at(i, j) = 0.1 * i - 0.03 * j * j + 0.2;
  std::vector<double> start(std::size_t(n * n));
  for (int k = 0; k < n * n; ++k) start[std::size_t(k)] = 0.05 * std::sin(1.3 * k);
  auto restart = [&] {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) p.at(i, j) = start[std::size_t(i * n + j)];
    loss.at() = 0;
  };
  // Four sweeps in place, alternating colours, then the loss: the tape keeps
  // what each sweep overwrites.
  auto by_type = [&] {
    restart();
    sweep<0>(p, b);
    sweep<1>(p, b);
    sweep<0>(p, b);
    sweep<1>(p, b);
    total(p, loss);
  };
  CHECK(worst_error(by_type, loss, b) < 1e-6);
  auto by_argument = [&] {
    restart();
    for (int s = 0; s < 4; ++s) sweep_of(p, b, s % 2);
    total(p, loss);
  };
  CHECK(worst_error(by_argument, loss, b) < 1e-6);

  // A sweep whose reads have its own colour is refused at launch.
  restart();
  {
    ctg::tape tape(loss);
    CHECK_THROWS_WITH_AS(same_colour_of(p, b, 0), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
  }
}
