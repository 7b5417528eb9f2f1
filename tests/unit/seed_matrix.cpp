// The seed's shapes (docs/04-diagnostics.md): every one is either a compile
// error with the right ID (checked here through the constexpr report, and in
// tests/compile_fail as real build failures) or the exact gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>

namespace {

constexpr int n = 4;

using scalar_t = ctg::field<float, 0, ctg::grad>;
using vector_t = ctg::field<float, 1, ctg::grad>;
using count_t = ctg::field<int, 0>;

// The loop body of the seed's factory, its bound read from a field as the
// seed writes it (range(n_iter[None])): cross_iter loads out[i - 1],
// constant_outside loads out[n] (a slot the loop never writes).
template <bool CrossIter>
auto inner_loop(auto x, auto out, auto n_iter) {
  if constexpr (CrossIter)
    return ctg::range(n_iter(), [=](auto i) { return ctg::if_(i == 0, out[i] = x(), out[i] = out[i - 1] + x()); });
  else
    return ctg::range(n_iter(), [=](auto i) { return out[i] = out[n] + x(); });
}

// has_outer_for: nested under range(1) (loop level 1) or under static_range<1>
// (unrolled: the inner range is the offload-level loop). in_func: the inner
// range sits in a ctg::func called from the kernel.
template <bool OuterFor, bool InFunc, bool CrossIter, class... Options>
auto make_kernel() {
  auto body = [](auto x, auto out, auto n_iter) {
    if constexpr (InFunc) {
      auto f = ctg::func<"body">([](auto x, auto out, auto n_iter) { return inner_loop<CrossIter>(x, out, n_iter); });
      return f(x, out, n_iter);
    } else {
      return inner_loop<CrossIter>(x, out, n_iter);
    }
  };
  return ctg::kernel<"compute", Options...>([=](auto x, auto out, auto n_iter) {
    if constexpr (OuterFor)
      return ctg::range(1, [=](auto) { return body(x, out, n_iter); });
    else
      return ctg::static_range<1>([=](auto) { return body(x, out, n_iter); });
  });
}

template <bool OuterFor, bool InFunc, bool CrossIter, class... Options>
constexpr ctg::report seed_report() {
  using K = decltype(make_kernel<OuterFor, InFunc, CrossIter, Options...>());
  return K::template diagnose<scalar_t, vector_t, count_t>();
}

// Runs forward then reverse as the seed does and returns x.grad.
template <bool OuterFor, bool InFunc, bool CrossIter, class... Options>
float seed_gradient() {
  auto k = make_kernel<OuterFor, InFunc, CrossIter, Options...>();
  scalar_t x;
  vector_t out(CrossIter ? n : 2 * n);
  count_t n_iter;
  n_iter.at() = n;
  x.at() = 1.0f;
  if (!CrossIter) out.at(n) = 0.5f;
  k(x, out, n_iter);
  out.zero_grad();
  if (CrossIter)
    out.grad().at(n - 1) = 1.0f;
  else
    for (int i = 0; i < n; ++i) out.grad().at(i) = 1.0f;
  x.zero_grad();
  k.grad(x, out, n_iter);
  return x.grad().at();
}

}  // namespace

// Kernel-top cross-iteration shapes: CTG-AD-002 in both adstack settings.
static_assert(seed_report<false, false, true>().has(ctg::finding::cross_iteration_raw));
static_assert(seed_report<false, true, true>().has(ctg::finding::cross_iteration_raw));
static_assert(seed_report<false, false, true, ctg::no_adstack>().has(ctg::finding::cross_iteration_raw));
static_assert(seed_report<false, true, true, ctg::no_adstack>().has(ctg::finding::cross_iteration_raw));
// Everything else compiles: the nested shapes (the cross-iteration chain runs
// inside one thread, in reverse order) also without the adstack, since no
// local carries state (the precise D1 rule), and the constant-outside shapes.
static_assert(seed_report<true, false, true>().ok());
static_assert(seed_report<true, true, true>().ok());
static_assert(seed_report<true, false, true, ctg::no_adstack>().ok());
static_assert(seed_report<true, true, true, ctg::no_adstack>().ok());
static_assert(seed_report<false, false, false>().ok());
static_assert(seed_report<false, true, false>().ok());
static_assert(seed_report<true, false, false>().ok());
static_assert(seed_report<true, true, false>().ok());
static_assert(seed_report<false, false, false, ctg::no_adstack>().ok());
static_assert(seed_report<false, true, false, ctg::no_adstack>().ok());
static_assert(seed_report<true, false, false, ctg::no_adstack>().ok());
static_assert(seed_report<true, true, false, ctg::no_adstack>().ok());
// The field-load bound is read at launch: the kernel-top constant-outside
// shapes are decided there.
static_assert(seed_report<false, false, false>().undecided > 0);

TEST_CASE("seed matrix: the shapes that compile give exactly x.grad == n") {
  // out[n-1] = n * x for the cross-iteration chain; sum_i out[i] = n * x + const otherwise.
  CHECK(seed_gradient<true, false, true>() == float(n));
  CHECK(seed_gradient<true, true, true>() == float(n));
  CHECK(seed_gradient<true, false, true, ctg::no_adstack>() == float(n));
  CHECK(seed_gradient<true, true, true, ctg::no_adstack>() == float(n));
  CHECK(seed_gradient<false, false, false>() == float(n));
  CHECK(seed_gradient<false, true, false>() == float(n));
  CHECK(seed_gradient<true, false, false>() == float(n));
  CHECK(seed_gradient<true, true, false>() == float(n));
  CHECK(seed_gradient<false, false, false, ctg::no_adstack>() == float(n));
  CHECK(seed_gradient<false, true, false, ctg::no_adstack>() == float(n));
  CHECK(seed_gradient<true, false, false, ctg::no_adstack>() == float(n));
  CHECK(seed_gradient<true, true, false, ctg::no_adstack>() == float(n));
}

TEST_CASE("seed matrix: a field-load bound that reaches the constant slot is rejected at launch") {
  // With n_iter > n the slot out[n] is written by iteration n: a
  // cross-iteration read-after-write, reported with the compile-time ID.
  auto k = make_kernel<false, true, false>();
  scalar_t x;
  vector_t out(2 * n);
  count_t n_iter;
  n_iter.at() = n + 1;
  k(x, out, n_iter);
  CHECK_THROWS_WITH_AS(k.grad(x, out, n_iter), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(k.grad(x, out, n_iter), doctest::Contains("in func 'body'"), ctg::autodiff_error);
  n_iter.at() = n;
  k(x, out, n_iter);
  CHECK_NOTHROW(k.grad(x, out, n_iter));
}

TEST_CASE("seed matrix: the constant-outside slot is decided at launch when n is a plain number") {
  // out[m] with range(m): outside the written range, so no error; out[m - 1]
  // is inside it: the launch-time half of D2 raises with the same ID.
  vector_t out(2 * n);
  scalar_t x;
  auto outside = ctg::kernel<"outside">([](auto x, auto out, int m) {
    return ctg::range(m, [=](auto i) { return out[i] = out[m] + x(); });
  });
  auto inside = ctg::kernel<"inside">([](auto x, auto out, int m) {
    return ctg::range(m, [=](auto i) { return out[i] = out[m - 1] + x(); });
  });
  static_assert(decltype(outside)::diagnose<scalar_t, vector_t, int>().ok());
  static_assert(decltype(inside)::diagnose<scalar_t, vector_t, int>().ok());
  static_assert(decltype(inside)::diagnose<scalar_t, vector_t, int>().undecided > 0);
  outside(x, out, n);
  CHECK_NOTHROW(outside.grad(x, out, n));
  inside(x, out, n);
  CHECK_THROWS_WITH_AS(inside.grad(x, out, n), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
}

TEST_CASE("compile-time constants decide the constant slot at compile time") {
  using namespace ctg::literals;
  auto inside = ctg::kernel<"inside">([](auto x, auto out) {
    return ctg::range(4_c, [=](auto i) { return out[i] = out[0_c] + x(); });
  });
  auto outside = ctg::kernel<"outside">([](auto x, auto out) {
    return ctg::range(4_c, [=](auto i) { return out[i] = out[4_c] + x(); });
  });
  static_assert(decltype(inside)::diagnose<scalar_t, vector_t>().has(ctg::finding::cross_iteration_raw));
  static_assert(decltype(outside)::diagnose<scalar_t, vector_t>().ok());
  static_assert(decltype(outside)::diagnose<scalar_t, vector_t>().undecided == 0);
}

TEST_CASE("sibling components, independent iterations and in-place updates give exact gradients") {
  ctg::field<float, 2, ctg::grad> grid(n, 2);
  scalar_t x;
  x.at() = 1.0f;
  auto sibling = ctg::kernel<"sibling">([](auto x, auto out) {
    return ctg::range(n, [=](auto i) { return ctg::block(out(i, 1) = x(), out(i, 0) = out(i, 1) * 2.0f); });
  });
  static_assert(decltype(sibling)::diagnose<scalar_t, decltype(grid)>().ok());
  sibling(x, grid);
  grid.zero_grad();
  for (int i = 0; i < n; ++i) grid.grad().at(i, 0) = 1.0f;
  x.zero_grad();
  sibling.grad(x, grid);
  CHECK(x.grad().at() == 2.0f * n);

  for (bool adstack : {true, false}) {
    vector_t out(n);
    auto body = [](auto x, auto out) { return ctg::range(n, [=](auto i) { return out[i] = x() * 2.0f; }); };
    x.zero_grad();
    for (int i = 0; i < n; ++i) out.grad().at(i) = 1.0f;
    if (adstack) {
      auto k = ctg::kernel<"indep">(body);
      k(x, out);
      k.grad(x, out);
    } else {
      auto k = ctg::kernel<"indep", ctg::no_adstack>(body);
      k(x, out);
      k.grad(x, out);
    }
    CHECK(x.grad().at() == 2.0f * n);
  }

  vector_t acc(n);
  auto in_place = ctg::kernel<"in_place">([](auto x, auto out) {
    return ctg::range(n, [=](auto i) { return out[i] = out[i] + x(); });
  });
  static_assert(decltype(in_place)::diagnose<scalar_t, vector_t>().ok());
  in_place(x, acc);
  for (int i = 0; i < n; ++i) acc.grad().at(i) = 1.0f;
  x.zero_grad();
  in_place.grad(x, acc);
  CHECK(x.grad().at() == float(n));
}

TEST_CASE("accumulating destinations are checked too") {
  auto chain = ctg::kernel<"chain">([](auto x, auto out) {
    return ctg::range(1, n, [=](auto i) { return out[i] += out[i - 1] * x(); });
  });
  static_assert(decltype(chain)::diagnose<scalar_t, vector_t>().has(ctg::finding::cross_iteration_raw));
}

namespace {

// The seed's class 1: a non-static range nested in the offload, inline or in
// a func. The linear recurrence needs no stored values: it compiles without
// the adstack, and must be exact; a nonlinear one needs the adstack (D1).
template <bool InFunc, bool Linear, class... Options>
auto recurrence_kernel() {
  auto inner = ctg::func<"inner">([](auto v_in, auto n_iter) {
    return ctg::let(v_in, [=](auto v) {
      if constexpr (Linear)
        return ctg::block(ctg::range(n_iter(), [=](auto) { return v = v * 0.95f + 0.01f; }), ctg::result(v));
      else
        return ctg::block(ctg::range(n_iter(), [=](auto) { return v = ctg::sin(v) * 0.95f + 0.01f; }),
                          ctg::result(v));
    });
  });
  return ctg::kernel<"compute", Options...>([=](auto x, auto y, auto n_iter) {
    return ctg::range(x.size(), [=](auto i) {
      if constexpr (InFunc) {
        return y() += inner(x[i], n_iter);
      } else {
        return ctg::let(x[i], [=](auto v) {
          if constexpr (Linear)
            return ctg::block(ctg::range(n_iter(), [=](auto) { return v = v * 0.95f + 0.01f; }), y() += v);
          else
            return ctg::block(ctg::range(n_iter(), [=](auto) { return v = ctg::sin(v) * 0.95f + 0.01f; }),
                              y() += v);
        });
      }
    });
  });
}

using xs_t = ctg::field<float, 1, ctg::grad>;
using n_t = ctg::field<int, 0>;

template <bool InFunc, bool Linear, class... Options>
constexpr ctg::report recurrence_report() {
  return decltype(recurrence_kernel<InFunc, Linear, Options...>())::template diagnose<xs_t, scalar_t, n_t>();
}

}  // namespace

static_assert(recurrence_report<false, false, ctg::no_adstack>().has(ctg::finding::nested_loop_needs_adstack));
static_assert(recurrence_report<true, false, ctg::no_adstack>().has(ctg::finding::nested_loop_needs_adstack));
static_assert(recurrence_report<false, false>().ok());
static_assert(recurrence_report<true, false>().ok());
static_assert(recurrence_report<false, true, ctg::no_adstack>().ok());
static_assert(recurrence_report<true, true, ctg::no_adstack>().ok());

TEST_CASE("func-routed and inline linear recurrences compile without the adstack and are exact") {
  for (int n_iter : {1, 3, 10}) {
    CAPTURE(n_iter);
    xs_t x(4);
    scalar_t y;
    n_t steps;
    steps.at() = n_iter;
    float const xv[] = {0.1f, 0.3f, 0.5f, 0.8f};
    for (int i = 0; i < 4; ++i) x.at(i) = xv[i];
    double const slope = std::pow(0.95, n_iter);
    auto inline_k = recurrence_kernel<false, true, ctg::no_adstack>();
    auto func_k = recurrence_kernel<true, true, ctg::no_adstack>();
    for (int which = 0; which < 2; ++which) {
      x.zero_grad();
      y.at() = 0;
      y.grad().at() = 1.0f;
      if (which == 0) {
        inline_k(x, y, steps);
        inline_k.grad(x, y, steps);
      } else {
        func_k(x, y, steps);
        func_k.grad(x, y, steps);
      }
      for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(slope).epsilon(1e-6));
    }
  }
}

TEST_CASE("the nonlinear recurrence through the adstack matches finite differences, inline and in a func") {
  xs_t x(4);
  scalar_t y;
  n_t steps;
  steps.at() = 10;
  float const xv[] = {0.1f, 0.3f, 0.5f, 0.8f};
  for (int i = 0; i < 4; ++i) x.at(i) = xv[i];
  auto f = [](double v) {
    for (int k = 0; k < 10; ++k) v = std::sin(v) * 0.95 + 0.01;
    return v;
  };
  auto inline_k = recurrence_kernel<false, false>();
  auto func_k = recurrence_kernel<true, false>();
  for (int which = 0; which < 2; ++which) {
    x.zero_grad();
    y.grad().at() = 1.0f;
    if (which == 0) {
      inline_k(x, y, steps);
      inline_k.grad(x, y, steps);
    } else {
      func_k(x, y, steps);
      func_k.grad(x, y, steps);
    }
    for (int i = 0; i < 4; ++i) {
      double const h = 1e-6, want = (f(xv[i] + h) - f(xv[i] - h)) / (2 * h);
      CHECK(x.grad().at(i) == doctest::Approx(want).epsilon(1e-4));
    }
  }
}

TEST_CASE("two parameters bound to one differentiable field raise at launch, naming both") {
  vector_t a({4}, {.name = "a"});
  auto k = ctg::kernel<"twice">([](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = x[i] * x[i]; }); });
  k(a, a);  // the forward pass is as the user wrote it
  CHECK_THROWS_WITH_AS(k.grad(a, a), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
  CHECK_THROWS_WITH_AS(k.grad(a, a), doctest::Contains("parameter #1 (field 'a'"), ctg::autodiff_error);
  // A field and its own gradient buffer are different storage.
  auto peek = ctg::kernel<"peek">([](auto x, auto y, auto g) { return ctg::range(4, [=](auto i) { return y[i] = x[i] * g[i]; }); });
  vector_t y(4);
  CHECK_NOTHROW(peek.grad(a, y, a.grad()));
}

TEST_CASE("time-indexed stencils: distinct time slots clear the pair, equal ones do not") {
  ctg::field<float, 2, ctg::grad> u(3, 8);
  ctg::field<float, 0, ctg::grad> c;
  using u_t = decltype(u);
  auto wave = ctg::kernel<"wave">([](auto u, auto c, int t) {
    return ctg::range(1, 7, [=](auto i) { return u(t + 1, i) = u(t, i - 1) * c() + u(t, i + 1) - u(t - 1, i); });
  });
  auto smear = ctg::kernel<"smear">([](auto u, auto c, int t) {
    return ctg::range(1, 7, [=](auto i) { return u(t, i) = u(t, i - 1) * c(); });
  });
  using namespace ctg::literals;
  auto fixed = ctg::kernel<"fixed">([](auto u, auto c) {
    return ctg::range(1, 7, [=](auto i) { return u(2_c, i) = u(1_c, i - 1) * c(); });
  });
  // Plain-number time slots are compared at launch; compile-time ones at once.
  static_assert(decltype(wave)::diagnose<u_t, scalar_t, int>().ok());
  static_assert(decltype(wave)::diagnose<u_t, scalar_t, int>().undecided > 0);
  static_assert(decltype(fixed)::diagnose<u_t, scalar_t>().ok());
  static_assert(decltype(fixed)::diagnose<u_t, scalar_t>().undecided == 0);
  wave(u, c, 1);
  CHECK_NOTHROW(wave.grad(u, c, 1));
  smear(u, c, 1);
  CHECK_THROWS_WITH_AS(smear.grad(u, c, 1), doctest::Contains("CTG-AD-002"), ctg::autodiff_error);
}

TEST_CASE("a loop index passed through a local is still seen by D2") {
  // j = i - 1 in a let: out[i] = out[j] * 2 + x[i] reads what another
  // iteration writes. Without the rule the parallel adjoint is wrong.
  using xs = ctg::field<double, 1, ctg::grad>;
  auto hidden = ctg::kernel<"hidden">([](auto x, auto out) {
    return ctg::range(1, out.size(), [=](auto i) {
      return ctg::let(i - 1, [=](auto j) { return out[i] = out[j] * 2.0 + x[i]; });
    });
  });
  static_assert(decltype(hidden)::diagnose<xs, xs>().has(ctg::finding::cross_iteration_raw));
  // The same index through a local on both sides is an in-place update.
  auto same = ctg::kernel<"same">([](auto x, auto out) {
    return ctg::range(out.size(), [=](auto i) {
      return ctg::let(i, [=](auto j) { return out[j] = out[j] * 2.0 + x[i]; });
    });
  });
  static_assert(decltype(same)::diagnose<xs, xs>().ok());
}
