// k.value_and_grad(args...): the values k(args...) writes and the gradients
// k.grad(args...) adds, in one sweep where that is valid (ad/fusion.hpp),
// otherwise the two launches. Each result is checked against closed forms or
// a hand-written forward and adjoint, on one thread and on several; which
// kernels run one sweep is asserted.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;

namespace {

template <class K, class... A>
constexpr bool one_sweep(K const&, A const&...) {
  return K::template fuses_value_and_gradient<A...>();
}

double x_at(int i) { return std::sin(0.37 * i) + 0.1 * (i % 3); }
double seed_at(int i) { return 1.0 + 0.5 * std::cos(0.01 * i); }

}  // namespace

TEST_CASE("value_and_grad: a map, y = sin(x) x, in one sweep") {
  int const n = 10007;
  auto k = ctg::kernel<"map">(
      [](auto x, auto y) { return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; }); });
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
    CHECK(one_sweep(k, x, y));
    for (int i = 0; i < n; ++i) x.at(i) = x_at(i), y.grad().at(i) = seed_at(i), x.grad().at(i) = 0.25;
    k.value_and_grad(x, y);
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      double const xi = x_at(i);
      // d(sin(x) x)/dx = cos(x) x + sin(x); y.grad is consumed (zeroed) as by k.grad.
      wrong += y.at(i) != Approx(std::sin(xi) * xi);
      wrong += x.grad().at(i) != Approx(0.25 + seed_at(i) * (std::cos(xi) * xi + std::sin(xi)));
      wrong += y.grad().at(i) != 0.0;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("value_and_grad: a sum into one element keeps per-thread partial sums of values and reads the seed once") {
  int const n = 100003;
  auto k = ctg::kernel<"sum_of_squares">([](auto x, auto loss, auto count) {
    return ctg::range(x.size(), [=](auto i) { return ctg::block(loss() += x[i] * x[i], count(1_c) += 1); });
  });
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"});
    ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
    ctg::field<int, 1> count({2}, {.name = "count"});
    CHECK(one_sweep(k, x, loss, count));
    // Values that are exact in any order: small integers.
    long long want = 7;
    for (int i = 0; i < n; ++i) x.at(i) = double(i % 5 - 2), want += (i % 5 - 2) * (i % 5 - 2);
    loss.at() = 7.0;
    loss.grad().at() = 3.0;
    count.fill(0);
    k.value_and_grad(x, loss, count);
    CHECK(loss.at() == double(want));
    CHECK(count.at(1) == n);
    CHECK(count.at(0) == 0);
    CHECK(loss.grad().at() == 3.0);  // += passes the seed on without clearing it
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += x.grad().at(i) != 3.0 * 2.0 * double(i % 5 - 2);
    CHECK(wrong == 0);
  }
}

TEST_CASE("value_and_grad: a carried recurrence with the adstack, against a hand-written adjoint") {
  int const n = 2003, iters = 12;
  double const a = 0.9, b = 0.7;
  auto k = ctg::kernel<"recurrence">([](auto x, auto out, int iters, double a, double b) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
      });
    });
  });
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
    CHECK(one_sweep(k, x, out, iters, a, b));
    for (int i = 0; i < n; ++i) x.at(i) = x_at(i), out.grad().at(i) = seed_at(i);
    k.value_and_grad(x, out, iters, a, b);
    int wrong = 0;
    std::vector<double> v(std::size_t(iters + 1));
    for (int i = 0; i < n; ++i) {
      v[0] = 0.0;
      for (int j = 0; j < iters; ++j) v[std::size_t(j + 1)] = std::sin(v[std::size_t(j)]) * a + x_at(i) * b;
      // v_{j+1} = sin(v_j) a + x b: dx += g b, g <- g a cos(v_j), from the last step back.
      double g = seed_at(i), dx = 0.0;
      for (int j = iters - 1; j >= 0; --j) {
        dx += g * b;
        g *= a * std::cos(v[std::size_t(j)]);
      }
      wrong += out.at(i) != Approx(v[std::size_t(iters)]);
      wrong += x.grad().at(i) != Approx(dx);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("value_and_grad: stores in the arms of an if_, sums in an inner loop, two offloads") {
  int const n = 513, m = 6;
  auto k = ctg::kernel<"branches">([](auto x, auto w, auto y, auto row_sums, auto total) {
    return ctg::block(ctg::range(x.size(), [=](auto i) {
                        return ctg::block(ctg::if_(x[i] > 0.0, y[i] = x[i] * x[i], y[i] = 3.0 * x[i]),
                                          ctg::range(w.shape(1_c), [=](auto j) { return row_sums[i] += w(i, j) * x[i]; }));
                      }),
                      ctg::range(x.size(), [=](auto i) { return total() -= ctg::exp(x[i]); }));
  });
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"}), row_sums({n}, {.name = "row_sums"});
    ctg::field<double, 2, ctg::grad> w({n, m}, {.name = "w"});
    ctg::field<double, 0, ctg::grad> total({.name = "total"});
    CHECK(one_sweep(k, x, w, y, row_sums, total));
    for (int i = 0; i < n; ++i) {
      x.at(i) = x_at(i), y.grad().at(i) = seed_at(i), row_sums.at(i) = 1.0, row_sums.grad().at(i) = 0.5 * seed_at(i);
      for (int j = 0; j < m; ++j) w.at(i, j) = 0.1 * j - 0.2;
    }
    total.at() = 2.0;
    total.grad().at() = -1.5;
    k.value_and_grad(x, w, y, row_sums, total);
    double want_total = 2.0;
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      double const xi = x_at(i), gy = seed_at(i), gr = 0.5 * seed_at(i);
      double sum_w = 0.0;
      for (int j = 0; j < m; ++j) sum_w += 0.1 * j - 0.2;
      want_total -= std::exp(xi);
      wrong += y.at(i) != Approx(xi > 0.0 ? xi * xi : 3.0 * xi);
      wrong += row_sums.at(i) != Approx(1.0 + sum_w * xi);
      double const dx = gy * (xi > 0.0 ? 2.0 * xi : 3.0) + gr * sum_w + 1.5 * std::exp(xi);
      wrong += x.grad().at(i) != Approx(dx);
      for (int j = 0; j < m; ++j) wrong += w.grad().at(i, j) != Approx(gr * xi);
    }
    CHECK(wrong == 0);
    CHECK(total.at() == Approx(want_total));
  }
}

TEST_CASE("value_and_grad: kernels one sweep cannot run are the two launches, with the same result") {
  int const n = 257;
  // Reads what it writes (u in place; linear, so k.grad needs no old value).
  auto in_place = ctg::kernel<"in_place">(
      [](auto u, auto s) { return ctg::range(u.size(), [=](auto i) { return u[i] = u[i] + 3.0 * s[i]; }); });
  // A field stored twice: the last store wins, which a sweep from the last
  // statement to the first would not keep.
  auto twice = ctg::kernel<"stored_twice">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return ctg::block(y[i] = x[i], y[i] = 2.0 * x[i]); });
  });
  // A store then a sum into the same field, in two offloads.
  auto reset_then_sum = ctg::kernel<"reset_then_sum">([](auto x, auto loss) {
    return ctg::block(loss() = 0.0, ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i]; }));
  });
  // A scatter through an index field, which the forward pass adds through
  // per-thread copies.
  auto scatter = ctg::kernel<"scatter">([](auto x, auto bin, auto hist) {
    return ctg::range(x.size(), [=](auto i) { return hist[bin[i]] += x[i]; });
  });
  ctg::field<double, 1, ctg::grad> u({n}, {.name = "u"}), s({n}, {.name = "s"}), x({n}, {.name = "x"}),
      y({n}, {.name = "y"}), hist({7}, {.name = "hist"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  ctg::field<int, 1> bin({n}, {.name = "bin"});
  CHECK(!one_sweep(in_place, u, s));
  CHECK(!one_sweep(twice, x, y));
  CHECK(!one_sweep(reset_then_sum, x, loss));
  CHECK(!one_sweep(scatter, x, bin, hist));
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    for (int i = 0; i < n; ++i) {
      u.at(i) = x_at(i), s.at(i) = 1.0 + 0.01 * i, u.grad().at(i) = seed_at(i), s.grad().at(i) = 0.0;
      x.at(i) = x_at(i), x.grad().at(i) = 0.0, y.grad().at(i) = seed_at(i), bin.at(i) = (i * 3) % 7;
    }
    in_place.value_and_grad(u, s);
    twice.value_and_grad(x, y);
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      double const si = 1.0 + 0.01 * i;
      wrong += u.at(i) != Approx(x_at(i) + 3.0 * si);
      wrong += u.grad().at(i) != Approx(seed_at(i));        // d(u + 3 s)/du
      wrong += s.grad().at(i) != Approx(3.0 * seed_at(i));  // d(u + 3 s)/ds
      wrong += y.at(i) != Approx(2.0 * x_at(i));
      wrong += x.grad().at(i) != Approx(2.0 * seed_at(i));
    }
    CHECK(wrong == 0);
    loss.at() = 5.0;
    loss.grad().at() = 2.0;
    x.grad().fill(0.0);
    reset_then_sum.value_and_grad(x, loss);
    double want = 0.0;
    for (int i = 0; i < n; ++i) want += x_at(i) * x_at(i);
    CHECK(loss.at() == Approx(want));
    wrong = 0;
    for (int i = 0; i < n; ++i) wrong += x.grad().at(i) != Approx(2.0 * 2.0 * x_at(i));
    CHECK(wrong == 0);
    hist.fill(0.0);
    for (int b = 0; b < 7; ++b) hist.grad().at(b) = double(b + 1);
    x.grad().fill(0.0);
    scatter.value_and_grad(x, bin, hist);
    std::vector<double> want_hist(7, 0.0);
    for (int i = 0; i < n; ++i) want_hist[std::size_t((i * 3) % 7)] += x_at(i);
    wrong = 0;
    for (int b = 0; b < 7; ++b) wrong += hist.at(b) != Approx(want_hist[std::size_t(b)]);
    for (int i = 0; i < n; ++i) wrong += x.grad().at(i) != double((i * 3) % 7 + 1);
    CHECK(wrong == 0);
  }
}

TEST_CASE("value_and_grad: errors name the kernel and the field; a tape refuses it") {
  ctg::field<double, 1, ctg::grad> x({8}, {.name = "x"}), y({8}, {.name = "y"});
  ctg::field<int, 1> at({8}, {.name = "at"});
  for (int i = 0; i < 8; ++i) at.at(i) = i == 5 ? 8 : i;
  auto gather = ctg::kernel<"gather">(
      [](auto x, auto at, auto y) { return ctg::range(y.size(), [=](auto i) { return y[i] = 2.0 * x[at[i]]; }); });
  REQUIRE(one_sweep(gather, x, at, y));
  try {
    gather.value_and_grad(x, at, y);
    FAIL("an index out of range must throw");
  } catch (ctg::index_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("'gather'") != std::string::npos);
    CHECK(what.find("'x'") != std::string::npos);
  }
  for (int i = 0; i < 8; ++i) at.at(i) = 7 - i;
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  ctg::tape t(loss);
  CHECK_THROWS_WITH_AS(gather.value_and_grad(x, at, y), doctest::Contains("CTG-TAPE-009"), ctg::autodiff_error);
}

TEST_CASE("value_and_grad: values the gradient does not need are computed too (locals, fields without gradients)") {
  int const n = 1001;
  auto k = ctg::kernel<"outputs">([](auto x, auto y, auto label, auto pair) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i] * 2.0, [=](auto twice) {
        return ctg::block(label[i] = ctg::cast<int>(twice * 10.0), y[i] = ctg::exp(x[i]) + twice,
                          pair[i] = ctg::vec(twice, x[i] * x[i]));
      });
    });
  });
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<int, 1> label({n}, {.name = "label"});
  ctg::field<Eigen::Vector2d, 1, ctg::grad> pair({n}, {.name = "pair"});
  CHECK(one_sweep(k, x, y, label, pair));
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    for (int i = 0; i < n; ++i) {
      x.at(i) = x_at(i), x.grad().at(i) = 0.0, y.grad().at(i) = seed_at(i);
      pair.grad().at(i) = Eigen::Vector2d(0.5, -seed_at(i));
    }
    label.fill(-1);
    k.value_and_grad(x, y, label, pair);
    int wrong = 0;
    for (int i = 0; i < n; ++i) {
      double const xi = x_at(i);
      wrong += label.at(i) != int(xi * 2.0 * 10.0);
      wrong += y.at(i) != Approx(std::exp(xi) + 2.0 * xi);
      wrong += pair.at(i)[0] != Approx(2.0 * xi);
      wrong += pair.at(i)[1] != Approx(xi * xi);
      wrong += x.grad().at(i) != Approx(seed_at(i) * (std::exp(xi) + 2.0) + 0.5 * 2.0 - seed_at(i) * 2.0 * xi);
      wrong += pair.grad().at(i) != Eigen::Vector2d::Zero();
    }
    CHECK(wrong == 0);
  }
}

namespace {

// Runs `k` both ways on copies of the same fields (values and gradient
// seeds) and compares every buffer: value_and_grad in one sweep against the
// forward launch then the adjoint, which the other tests check against
// closed forms.
template <class T, int R, ctg::flags F>
ctg::field<T, R, F> copy_of(ctg::field<T, R, F> const& f) {
  auto out = f.clone(ctg::host);
  if constexpr (ctg::has_flag(F, ctg::flags::grad)) out.grad().copy_from(f.grad());
  return out;
}
template <class T, int R, ctg::flags F>
int differences(ctg::field<T, R, F> const& a, ctg::field<T, R, F> const& b) {
  auto close = [](auto const& x, auto const& y) {
    if constexpr (std::is_floating_point_v<std::remove_cvref_t<decltype(x)>>)
      return std::abs(x - y) <= 1e-12 * (1.0 + std::abs(y));
    else if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(x)>>)
      return x == y;
    else
      return (x - y).norm() <= 1e-12 * (1.0 + y.norm());
  };
  int wrong = 0;
  auto const va = a.to_vector(), vb = b.to_vector();
  for (std::size_t k = 0; k < va.size(); ++k) wrong += !close(va[k], vb[k]);
  if constexpr (ctg::has_flag(F, ctg::flags::grad)) {
    auto const ga = a.grad().to_vector(), gb = b.grad().to_vector();
    for (std::size_t k = 0; k < ga.size(); ++k) wrong += !close(ga[k], gb[k]);
  }
  return wrong;
}
template <class K, class... Fs>
void both_ways(K const& k, Fs const&... fields) {
  CHECK(K::template fuses_value_and_gradient<Fs...>());
  auto one = std::make_tuple(copy_of(fields)...);
  auto two = std::make_tuple(copy_of(fields)...);
  std::apply([&](auto const&... f) { k.value_and_grad(f...); }, one);
  std::apply([&](auto const&... f) { k(f...), k.grad(f...); }, two);
  int wrong = 0;
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    ((wrong += differences(std::get<Is>(one), std::get<Is>(two))), ...);
  }(std::index_sequence_for<Fs...>{});
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("value_and_grad: one sweep equals the two launches on while_, static_range, funcs, vectors, ndrange") {
  int const n = 301;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"}), z({n}, {.name = "z"});
  ctg::field<double, 2, ctg::grad> m({n, 3}, {.name = "m"}), out2({n, 3}, {.name = "out2"});
  ctg::field<Eigen::Vector3d, 1, ctg::grad> p({n}, {.name = "p"}), q({n}, {.name = "q"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  ctg::field<double, 0> top({.name = "top"});
  ctg::field<int, 1> steps({n}, {.name = "steps"});
  for (int i = 0; i < n; ++i) {
    x.at(i) = x_at(i), y.grad().at(i) = seed_at(i), z.grad().at(i) = -seed_at(i);
    p.at(i) = Eigen::Vector3d(x_at(i), 0.5, -x_at(i));
    q.grad().at(i) = Eigen::Vector3d(seed_at(i), 1.0, 0.25);
    for (int j = 0; j < 3; ++j) m.at(i, j) = 0.1 * (i % 7) - 0.2 * j, out2.grad().at(i, j) = seed_at(i + j);
  }
  loss.grad().at() = 0.75;
  top.at() = -1e300;
  auto squash = ctg::func<"squash">([](auto v) { return v / (1.0 + v * v); });
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    // A while_ whose trip count depends on the element (the adstack; v
    // grows by at least 0.075 a trip, so at most 64 trips), a select, a
    // func, and a max into a field without gradient.
    both_ways(ctg::kernel<"grow", ctg::adstack_capacity<64>>([=](auto x, auto y, auto top, auto steps) {
                return ctg::range(x.size(), [=](auto i) {
                  return ctg::let(ctg::abs(x[i]) + 0.5, 0, [=](auto v, auto k) {
                    return ctg::block(ctg::while_(v < 4.0, ctg::block(v = v * 1.3 + 0.1 + 0.05 * squash(x[i]), k = k + 1)),
                                      y[i] = ctg::select(x[i] > 0.0, v * x[i], v), steps[i] = k,
                                      ctg::atomic_max(top(), v));
                  });
                });
              }),
              x, y, top, steps);
    // static_range, a serial offload and a parallel one with their own outputs.
    both_ways(ctg::kernel<"unrolled">([](auto x, auto z, auto loss) {
                return ctg::block(loss() += x[0_c] * x[1_c], ctg::range(x.size(), [=](auto i) {
                                    return ctg::let(x[i], [=](auto v) {
                                      return ctg::block(ctg::static_range<3>([=](auto) { return v = ctg::sin(v) + x[i]; }),
                                                        z[i] = v * v);
                                    });
                                  }));
              }),
              x, z, loss);
    // Sums into one element of a field with a gradient and of one without
    // (whose seed the adjoint must not read: it has no gradient buffer).
    both_ways(ctg::kernel<"sums">([](auto x, auto loss, auto steps) {
                return ctg::range(x.size(), [=](auto i) { return ctg::block(loss() -= ctg::exp(x[i]), steps(2_c) += 1); });
              }),
              x, loss, steps);
    // Vector elements, and a 2-D ndrange with a sum over the row.
    both_ways(ctg::kernel<"vectors">([](auto p, auto q, auto m, auto out2) {
                return ctg::block(ctg::range(p.size(), [=](auto i) { return q[i] = p[i] * ctg::norm(p[i]) + ctg::vec(1.0, 2.0, 3.0); }),
                                  ctg::ndrange(m.shape(0_c), m.shape(1_c),
                                               [=](auto i, auto j) { return out2(i, j) = ctg::exp(m(i, j)) * p[i][1_c]; }));
              }),
              p, q, m, out2);
  }
}
