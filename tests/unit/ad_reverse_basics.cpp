// Reverse mode, store and accumulate semantics (DESIGN.md section 3), across
// kernels run by hand, and the parallel paths of gradient accumulation.
// Expected values are closed forms derived in the comments.
#include <doctest/doctest.h>

#include <utility>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

namespace {
std::vector<double> const x0{0.5, -1.25, 2.0, 3.5};
std::vector<double> const g0{1.0, 2.0, -3.0, 0.25};  // seeds for y.grad
}  // namespace

TEST_CASE("store: adj(e) += dst.grad, then dst.grad = 0") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  x.copy_from(x0);
  y.grad().copy_from(g0);
  x.grad().fill(10.0);  // the adjoint adds to what is there
  auto k = ctg::kernel<"store">([](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = 3 * x[i]; }); });
  k(x, y);
  k.grad(x, y);
  for (int i = 0; i < 4; ++i) {
    CHECK(y.at(i) == Approx(3 * x0[i]));
    CHECK(x.grad().at(i) == Approx(10.0 + 3 * g0[i]).epsilon(1e-14));
    CHECK(y.grad().at(i) == 0.0);
  }
}

TEST_CASE("accumulate: += passes dst.grad on without zeroing it, -= negates it") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"}), z({4}, {.name = "z"});
  x.copy_from(x0);
  y.grad().copy_from(g0);
  z.grad().copy_from(g0);
  x.grad().fill(10.0);
  auto add = ctg::kernel<"add">([](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] += 3 * x[i]; }); });
  auto sub = ctg::kernel<"sub">([](auto x, auto z) { return ctg::range(4, [=](auto i) { return z[i] -= 5 * x[i]; }); });
  add(x, y);
  sub(x, z);
  add.grad(x, y);
  for (int i = 0; i < 4; ++i) {
    CHECK(x.grad().at(i) == Approx(10.0 + 3 * g0[i]).epsilon(1e-14));
    CHECK(y.grad().at(i) == g0[i]);
  }
  sub.grad(x, z);
  for (int i = 0; i < 4; ++i) {
    CHECK(x.grad().at(i) == Approx(10.0 + 3 * g0[i] - 5 * g0[i]).epsilon(1e-14));
    CHECK(z.grad().at(i) == g0[i]);
    CHECK(z.at(i) == Approx(-5 * x0[i]));
  }
}

TEST_CASE("within one kernel the statements are swept in reverse order") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"}), z({4}, {.name = "z"});
  x.copy_from(x0);
  // y = x; y += 2x  gives y = 3x: the += is swept first (adds 2g), then the
  // store (adds g and zeroes): dy/dx = 3.
  auto store_then_add = ctg::kernel<"store_then_add">([](auto x, auto y) {
    return ctg::range(4, [=](auto i) { return ctg::block(y[i] = x[i], y[i] += 2 * x[i]); });
  });
  // z += 2x; z = x  gives z = x: the store is swept first and zeroes z.grad,
  // so the earlier += sees nothing: dz/dx = 1.
  auto add_then_store = ctg::kernel<"add_then_store">([](auto x, auto z) {
    return ctg::range(4, [=](auto i) { return ctg::block(z[i] += 2 * x[i], z[i] = x[i]); });
  });
  store_then_add(x, y);
  add_then_store(x, z);
  y.grad().copy_from(g0);
  store_then_add.grad(x, y);
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == Approx(3 * g0[i]).epsilon(1e-14));
  x.zero_grad();
  z.grad().copy_from(g0);
  add_then_store.grad(x, z);
  for (int i = 0; i < 4; ++i) {
    CHECK(z.at(i) == Approx(x0[i]));
    CHECK(x.grad().at(i) == Approx(g0[i]).epsilon(1e-14));
    CHECK(z.grad().at(i) == 0.0);
  }
}

TEST_CASE("a chain of five kernels run back by hand: x.grad == 2*3*4*5 and the intermediates end at 0") {
  ctg::field<double, 0, ctg::grad> x({.name = "x"}), a({.name = "a"}), b({.name = "b"}), c({.name = "c"}),
      d({.name = "d"}), e({.name = "e"});
  x.at() = 0.7;
  auto k1 = ctg::kernel<"k1">([](auto x, auto a) { return a() = x(); });
  auto k2 = ctg::kernel<"k2">([](auto a, auto b) { return b() = 2 * a(); });
  auto k3 = ctg::kernel<"k3">([](auto b, auto c) { return c() = 3 * b(); });
  auto k4 = ctg::kernel<"k4">([](auto c, auto d) { return d() = 4 * c(); });
  auto k5 = ctg::kernel<"k5">([](auto d, auto e) { return e() = 5 * d(); });
  k1(x, a), k2(a, b), k3(b, c), k4(c, d), k5(d, e);
  CHECK(e.at() == Approx(120 * 0.7));
  e.grad().at() = 1.0;
  k5.grad(d, e);
  CHECK(d.grad().at() == 5.0);
  CHECK(e.grad().at() == 0.0);
  k4.grad(c, d);
  k3.grad(b, c);
  k2.grad(a, b);
  CHECK(a.grad().at() == 120.0);
  k1.grad(x, a);
  CHECK(x.grad().at() == 120.0);
  CHECK(a.grad().at() == 0.0);
  CHECK(b.grad().at() == 0.0);
  CHECK(c.grad().at() == 0.0);
  CHECK(d.grad().at() == 0.0);
  CHECK(e.grad().at() == 0.0);
}

TEST_CASE("loss = 4x through three kernels that all write the loss field") {
  SUBCASE("in place: loss = x; loss = 2 loss; loss = 2 loss (each reverse zeroes loss.grad, then adds 2g)") {
    ctg::field<double, 0, ctg::grad> x({.name = "x"}), loss({.name = "loss"});
    x.at() = 1.5;
    auto k1 = ctg::kernel<"set">([](auto x, auto loss) { return loss() = x(); });
    auto k2 = ctg::kernel<"twice_a">([](auto loss) { return loss() = loss() * 2; });
    auto k3 = ctg::kernel<"twice_b">([](auto loss) { return loss() = 2.0 * loss(); });
    k1(x, loss), k2(loss), k3(loss);
    CHECK(loss.at() == 6.0);
    loss.grad().at() = 1.0;
    k3.grad(loss);
    CHECK(loss.grad().at() == 2.0);  // zeroed, then 2 * 1 from the read
    k2.grad(loss);
    CHECK(loss.grad().at() == 4.0);
    k1.grad(x, loss);
    CHECK(loss.grad().at() == 0.0);
    CHECK(x.grad().at() == 4.0);
  }
  SUBCASE("store then two accumulations: loss = x; loss += x; loss += 2x") {
    ctg::field<double, 0, ctg::grad> x({.name = "x"}), loss({.name = "loss"});
    x.at() = 1.5;
    auto k1 = ctg::kernel<"set">([](auto x, auto loss) { return loss() = x(); });
    auto k2 = ctg::kernel<"add1">([](auto x, auto loss) { return loss() += x(); });
    auto k3 = ctg::kernel<"add2">([](auto x, auto loss) { return loss() += 2 * x(); });
    k1(x, loss), k2(x, loss), k3(x, loss);
    CHECK(loss.at() == 6.0);
    loss.grad().at() = 1.0;
    k3.grad(x, loss);
    k2.grad(x, loss);
    CHECK(loss.grad().at() == 1.0);  // accumulations leave it
    CHECK(x.grad().at() == 3.0);
    k1.grad(x, loss);
    CHECK(loss.grad().at() == 0.0);
    CHECK(x.grad().at() == 4.0);
  }
}

TEST_CASE("reduction loss += x[i]^2 over 200000 iterations on 8 threads: x.grad == 2x") {
  ad_test::thread_scope threads(8);
  int const n = 200000;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.001 * i) + 0.01 * (i % 13);
  auto k = ctg::kernel<"sumsq">([](auto x, auto loss, int n) {
    return ctg::range(n, [=](auto i) { return loss() += x[i] * x[i]; });
  });
  k(x, loss, n);
  loss.grad().at() = 1.0;
  k.grad(x, loss, n);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += x.grad().at(i) != Approx(2 * x.at(i)).epsilon(1e-14);
  CHECK(bad == 0);
  CHECK(loss.grad().at() == 1.0);
}

TEST_CASE("many iterations reading the same elements: the gradient of x[i % m] is accumulated atomically") {
  ad_test::thread_scope threads(8);
  int const n = 200000, m = 7;
  ctg::field<double, 1, ctg::grad> x({m}, {.name = "x"});
  ctg::field<double, 1> w({n}, {.name = "w"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int j = 0; j < m; ++j) x.at(j) = 0.5 + 0.25 * j;
  for (int i = 0; i < n; ++i) w.at(i) = 1.0 + (i % 5);
  auto k = ctg::kernel<"shared_reads">([](auto x, auto w, auto loss, int n, int m) {
    return ctg::range(n, [=](auto i) { return loss() += x[i % m] * x[i % m] * w[i]; });
  });
  k(x, w, loss, n, m);
  loss.grad().at() = 1.0;
  k.grad(x, w, loss, n, m);
  // d loss / d x_j = 2 x_j * sum of w[i] over i = j (mod m)
  std::vector<double> wsum(m, 0.0);
  for (int i = 0; i < n; ++i) wsum[i % m] += 1.0 + (i % 5);
  for (int j = 0; j < m; ++j) CHECK(x.grad().at(j) == Approx(2 * x.at(j) * wsum[j]).epsilon(1e-12));
}

TEST_CASE("scatter y[idx[i]] += f(x[i]) and gather z[i] = c * x[idx[i]] with many collisions") {
  ad_test::thread_scope threads(8);
  int const n = 100000, m = 13;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({m}, {.name = "y"}), z({n}, {.name = "z"}),
      src({m}, {.name = "src"});
  ctg::field<int, 1> idx({n}, {.name = "idx"});
  for (int i = 0; i < n; ++i) {
    x.at(i) = 0.001 * (i % 1000) - 0.3;
    idx.at(i) = int((long long)i * 7919 % m);
  }
  for (int j = 0; j < m; ++j) src.at(j) = 1.0 + j;
  auto scatter = ctg::kernel<"scatter">([](auto x, auto y, auto idx, int n) {
    return ctg::range(n, [=](auto i) { return y[idx[i]] += x[i] + x[i] * x[i]; });
  });
  auto gather = ctg::kernel<"gather">([](auto src, auto z, auto idx, int n) {
    return ctg::range(n, [=](auto i) { return z[i] = 1.5 * src[idx[i]]; });
  });
  scatter(x, y, idx, n);
  gather(src, z, idx, n);
  for (int j = 0; j < m; ++j) y.grad().at(j) = 0.5 * (j + 1);
  for (int i = 0; i < n; ++i) z.grad().at(i) = 1.0 + (i % 3);
  scatter.grad(x, y, idx, n);
  gather.grad(src, z, idx, n);
  // scatter: x.grad[i] = y.grad[idx[i]] * (1 + 2 x[i]); y.grad is left as it was.
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    double const want = 0.5 * (idx.at(i) + 1) * (1 + 2 * x.at(i));
    bad += x.grad().at(i) != Approx(want).epsilon(1e-13);
  }
  CHECK(bad == 0);
  for (int j = 0; j < m; ++j) CHECK(y.grad().at(j) == 0.5 * (j + 1));
  // gather: src.grad[j] = 1.5 * sum of z.grad[i] over idx[i] == j; z.grad zeroed.
  std::vector<double> want(m, 0.0);
  for (int i = 0; i < n; ++i) want[idx.at(i)] += 1.5 * (1.0 + (i % 3));
  for (int j = 0; j < m; ++j) CHECK(src.grad().at(j) == Approx(want[j]).epsilon(1e-12));
  double zg = 0;
  for (int i = 0; i < n; ++i) zg += std::abs(z.grad().at(i));
  CHECK(zg == 0.0);
}

TEST_CASE("plain path y[i] = sin(x[i]) * exp(-x[i]^2) on 8 threads") {
  ad_test::thread_scope threads(8);
  int const n = 50000;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  for (int i = 0; i < n; ++i) x.at(i) = -2.0 + 4.0 * i / n;
  auto k = ctg::kernel<"plain">([](auto x, auto y) {
    return ctg::each(x, [=](auto i) { return y[i] = ctg::sin(x[i]) * ctg::exp(-x[i] * x[i]); });
  });
  k(x, y);
  for (int i = 0; i < n; ++i) y.grad().at(i) = 1.0 + 0.5 * (i % 4);
  k.grad(x, y);
  // f'(x) = (cos x - 2x sin x) exp(-x^2)
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    double const v = x.at(i);
    double const want = (1.0 + 0.5 * (i % 4)) * (std::cos(v) - 2 * v * std::sin(v)) * std::exp(-v * v);
    bad += x.grad().at(i) != Approx(want).epsilon(1e-12).scale(1.0);
    bad += y.grad().at(i) != 0.0;
  }
  CHECK(bad == 0);
}

TEST_CASE("rank-2 ndrange and each: per-element and shared-column gradients") {
  ad_test::thread_scope threads(8);
  int const rows = 300, cols = 7;
  ctg::field<double, 2, ctg::grad> x({rows, cols}, {.name = "x"}), y({rows, cols}, {.name = "y"});
  ctg::field<double, 1, ctg::grad> w({cols}, {.name = "w"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) x.at(i, j) = 0.01 * i - 0.1 * j + 0.3;
  for (int j = 0; j < cols; ++j) w.at(j) = 1.0 + 0.5 * j;
  auto reduce = ctg::kernel<"reduce2d">([](auto x, auto w, auto loss, int rows, int cols) {
    return ctg::ndrange(rows, cols, [=](auto i, auto j) { return loss() += x(i, j) * x(i, j) * w[j]; });
  });
  auto map = ctg::kernel<"map2d">([](auto x, auto w, auto y) {
    return ctg::each(x, [=](auto i, auto j) { return y(i, j) = ctg::sin(x(i, j)) * w[j]; });
  });
  reduce(x, w, loss, rows, cols);
  loss.grad().at() = 1.0;
  reduce.grad(x, w, loss, rows, cols);
  // d/dx(i,j) = 2 x(i,j) w[j];  d/dw[j] = sum_i x(i,j)^2
  for (int j = 0; j < cols; ++j) {
    double s = 0;
    for (int i = 0; i < rows; ++i) {
      s += x.at(i, j) * x.at(i, j);
      CHECK(x.grad().at(i, j) == Approx(2 * x.at(i, j) * w.at(j)).epsilon(1e-13));
    }
    CHECK(w.grad().at(j) == Approx(s).epsilon(1e-12));
  }
  x.zero_grad();
  w.zero_grad();
  map(x, w, y);
  y.grad().fill(1.0);
  map.grad(x, w, y);
  // d/dx(i,j) = cos x(i,j) w[j];  d/dw[j] = sum_i sin x(i,j)
  for (int j = 0; j < cols; ++j) {
    double s = 0;
    for (int i = 0; i < rows; ++i) {
      s += std::sin(x.at(i, j));
      CHECK(x.grad().at(i, j) == Approx(std::cos(x.at(i, j)) * w.at(j)).epsilon(1e-13));
    }
    CHECK(w.grad().at(j) == Approx(s).epsilon(1e-12));
  }
}

TEST_CASE("the adjoint never writes primal fields; a field it reads must not change after the forward") {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"}), out({4}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.copy_from(x0);
  y.fill(2.0);
  auto k = ctg::kernel<"product">([](auto x, auto y, auto out, auto loss) {
    return ctg::range(4, [=](auto i) { return ctg::block(out[i] = x[i] * y[i], loss() += out[i] * 0.5); });
  });
  k(x, y, out, loss);
  double const loss_after_forward = std::as_const(loss).at();
  // The adjoint does not read out's values (0.5 out is linear): overwrite
  // them with a sentinel.
  out.fill(99.0);
  loss.grad().at() = 1.0;
  k.grad(x, y, out, loss);
  CHECK(std::as_const(loss).at() == loss_after_forward);
  for (int i = 0; i < 4; ++i) {
    CHECK(std::as_const(out).at(i) == 99.0);
    CHECK(std::as_const(x).at(i) == x0[i]);
    CHECK(x.grad().at(i) == Approx(0.5 * 2.0).epsilon(1e-14));
    CHECK(y.grad().at(i) == Approx(0.5 * x0[i]).epsilon(1e-14));
  }
  // y is read by the adjoint (d/dx = 0.5 y): changing it after the forward
  // pass would give the gradient of another computation.
  y.fill(-3.0);
  CHECK_THROWS_WITH_AS(k.grad(x, y, out, loss), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

// The pattern of a simulator differentiated by hand, without a tape: state
// indexed by the step, every step's kernels launched forward, then their
// adjoints in reverse. A later step writes other rows of the fields an
// earlier step's adjoint reads; only a write to those rows is a change.
TEST_CASE("k.grad called alone: later steps writing other rows of a field indexed by the step are no change") {
  int const steps = 6, n = 5;
  ctg::field<double, 2, ctg::grad> x({steps + 1, n}, {.name = "x"}), v({steps, n}, {.name = "v"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  // v(t) = sin(x(t)) (reads row t of x); x(t + 1) = x(t) + 0.1 v(t) x(t) (writes row t + 1).
  auto force = ctg::kernel<"force">(
      [](auto x, auto v, int t) { return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return v(t, i) = ctg::sin(x(t, i)); }); });
  auto advance = ctg::kernel<"advance">([](auto x, auto v, int t) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return x(t + 1, i) = x(t, i) + 0.1 * v(t, i) * x(t, i); });
  });
  auto measure = ctg::kernel<"measure">([](auto x, auto loss, int t) {
    return ctg::range(x.shape(ctg::c<1>), [=](auto i) { return loss() += x(t, i) * x(t, i); });
  });
  auto x0s = [](int i) { return 0.3 + 0.2 * i; };
  auto simulate = [&](std::vector<double> const& start) {
    std::vector<double> s = start;
    for (int t = 0; t < steps; ++t)
      for (auto& xi : s) xi = xi + 0.1 * std::sin(xi) * xi;
    double l = 0;
    for (double xi : s) l += xi * xi;
    return l;
  };
  for (int i = 0; i < n; ++i) x.at(0, i) = x0s(i);
  for (int t = 0; t < steps; ++t) force(x, v, t), advance(x, v, t);
  measure(x, loss, steps);
  loss.grad().at() = 1.0;
  measure.grad(x, loss, steps);
  for (int t = steps - 1; t >= 0; --t) advance.grad(x, v, t), force.grad(x, v, t);
  std::vector<double> start(n);
  for (int i = 0; i < n; ++i) start[std::size_t(i)] = x0s(i);
  auto const want = ad_test::fd_gradient(simulate, start);
  for (int i = 0; i < n; ++i) CHECK(x.grad().at(0, i) == Approx(want[std::size_t(i)]).epsilon(1e-6));

  // Rewriting a row an adjoint reads is a change: force's adjoint at step 2
  // reads x(2, .), which advance at step 1 writes again here.
  for (int t = 0; t < steps; ++t) force(x, v, t), advance(x, v, t);
  advance(x, v, 1);
  CHECK_NOTHROW(force.grad(x, v, 4));  // reads row 4: untouched since the last forward launch of force
  CHECK_THROWS_WITH_AS(force.grad(x, v, 2), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
  // So is a write of the whole field from the host.
  for (int t = 0; t < steps; ++t) force(x, v, t);
  x.fill(1.0);
  CHECK_THROWS_WITH_AS(force.grad(x, v, 4), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}
