// select(c, a, b) evaluates only the side it chooses, also when a side holds
// statements (a func computing its value in a let-block): the forward value,
// the reverse gradient and the k.fwd tangent against plain C++ and central
// differences; a side that would read out of range is never evaluated (with
// CTG_BOUNDS_CHECK=0, as in the `sanitize` preset, such a read reaches
// AddressSanitizer), nor does it run its stores. lower_select_loops.cpp: the
// other loop forms, and let-blocks whose value takes no gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <type_traits>
#include <vector>

#include "lower_select_support.hpp"

using doctest::Approx;
using namespace lower_select_test;

TEST_CASE("select(a[i] > 1, f(a[i] - 1), a[i] * w()) with f a let-block func, in range") {
  auto k = ctg::kernel<"select_range">([](auto a, auto w, auto out) {
    return ctg::range(n, [=](auto i) { return out[i] = ctg::select(a[i] > 1.0, root(a[i] - 1.0), a[i] * w()); });
  });
  check_against(k, straddling, 1.5, [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) y[i] = p[i] > 1 ? std::sqrt(p[i] - 1) : p[i] * p[n];
    return y;
  });
}

TEST_CASE("select(i > 0, f(a[i - 1]), w()) never reads a[-1]: in range and in serial_range") {
  auto shifted = [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) y[i] = i > 0 ? std::sqrt(p[i - 1]) : p[n];
    return y;
  };
  std::vector<double> const positive{0.5, 2.6, 0.3, 3.0, 1.7, 0.8};
  auto parallel = ctg::kernel<"select_neighbour">([](auto a, auto w, auto out) {
    return ctg::range(n, [=](auto i) { return out[i] = ctg::select(i > 0, root(a[i - 1]), w()); });
  });
  check_against(parallel, positive, 1.5, shifted);
  // A recurrence, which only serial_range allows: out[i] reads out[i - 1].
  auto serial = ctg::kernel<"select_recurrence">([](auto a, auto w, auto out) {
    return ctg::serial_range(n, [=](auto i) {
      return out[i] = ctg::select(i > 0, root(out[i - 1] + a[i]), a[i] * w());
    });
  });
  check_against(serial, positive, 1.5, [](std::vector<double> const& p) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) y[i] = i > 0 ? std::sqrt(y[i - 1] + p[i]) : p[i] * p[n];
    return y;
  });
}

TEST_CASE("the side not chosen does not run its stores either") {
  // A func whose let-block also writes a field: only the chosen side may.
  auto marked_root = ctg::func<"marked_root">([](auto x, auto mark, auto i) {
    return ctg::let(x, [=](auto v) { return ctg::block(mark[i] = 1, v = ctg::sqrt(v), ctg::result(v)); });
  });
  ctg::field<double, 1, ctg::grad> a({n}, {.name = "a"}), out({n}, {.name = "out"});
  ctg::field<int, 1> mark({n}, {.name = "mark"});
  a.copy_from(straddling);
  auto k = ctg::kernel<"select_store">([=](auto a, auto mark, auto out) {
    return ctg::range(n, [=](auto i) {
      return out[i] = ctg::select(a[i] > 1.0, marked_root(a[i] - 1.0, mark, i),
                                  marked_root(1.0 - a[i], mark, n - 1 - i) * 2.0);
    });
  });
  k(a, mark, out);
  out.grad().fill(1.0);
  k.grad(a, mark, out);
  // mark[i] is set by iteration i when a[i] > 1, and by iteration n - 1 - i when a[n - 1 - i] <= 1.
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    bool const set = straddling[i] > 1 || straddling[n - 1 - i] <= 1;
    CHECK(mark.at(i) == int(set));
    double const x = straddling[i];
    CHECK(out.at(i) == Approx(x > 1 ? std::sqrt(x - 1) : 2 * std::sqrt(1 - x)).epsilon(1e-14));
    CHECK(a.grad().at(i) == Approx(x > 1 ? 0.5 / std::sqrt(x - 1) : -1 / std::sqrt(1 - x)).epsilon(1e-14));
  }
}

// The statement a kernel's only offload, a range, runs per iteration.
template <class Kir>
using body_of =
    std::remove_cvref_t<decltype(ctg::ir::kid<2>(ctg::detail::get<0>(std::declval<Kir const&>().offloads).stmt))>;

TEST_CASE("a select without statements stays a select; one with them becomes an if_ within the kernel's slots") {
  ctg::field<double, 1, ctg::grad> a({n}), out({n});
  ctg::field<double, 0, ctg::grad> w;
  auto pure = ctg::kernel<"select_pure">([](auto a, auto w, auto out) {
    return ctg::range(n, [=](auto i) { return out[i] = ctg::select(a[i] > 1.0, ctg::sqrt(a[i] - 1.0), w()); });
  });
  auto branching = ctg::kernel<"select_branching">([](auto a, auto w, auto out) {
    return ctg::range(n, [=](auto i) { return out[i] = ctg::select(a[i] > 1.0, root(a[i] - 1.0), w()); });
  });
  using pure_ir = decltype(pure.ir(a, w, out));
  using pure_body = body_of<pure_ir>;
  static_assert(std::is_same_v<typename pure_body::op_type, ctg::ir::op::store>);
  using pure_rhs = std::remove_cvref_t<decltype(ctg::ir::kid<1>(std::declval<pure_body const&>()))>;
  static_assert(std::is_same_v<typename pure_rhs::op_type, ctg::ir::op::select>);
  // let r = 0 { if_(c, let v = a - 1 { v = sqrt v; r = v }, r = w); out[i] = r }
  using branching_ir = decltype(branching.ir(a, w, out));
  using branching_body = body_of<branching_ir>;
  static_assert(ctg::ir::is_let_op<typename branching_body::op_type>);
  using branches =
      std::remove_cvref_t<decltype(ctg::ir::kid<0>(ctg::ir::kid<1>(std::declval<branching_body const&>())))>;
  static_assert(ctg::ir::is_if_op<typename branches::op_type>);
  // Every slot the lowered kernel uses lies below the count its frames get.
  using offload = std::remove_cvref_t<decltype(ctg::detail::get<0>(std::declval<branching_ir const&>().offloads))>;
  static_assert(ctg::eval::loop_shape<offload>::slots <= branching_ir::slots);
  CHECK(branching_ir::slots > pure_ir::slots);
}

