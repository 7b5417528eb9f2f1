// More nested-loop shapes in reverse mode: many parallel outer iterations each
// with its own adstack traffic (checked against a hand-written tangent), a loop
// inside a top-level let, a nested ndrange, an if_ on a carried local inside a
// loop, a loop bound held in a local, and a CSR-style gather with bounds read
// from an index field.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;

TEST_CASE("5000 parallel iterations of a nonlinear inner recurrence on 8 threads, against a hand-written tangent") {
  ad_test::thread_scope threads(8);
  int const n = 5000, iters = 20;
  double const a = 0.9, b = 0.7;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> fa({.name = "a"}), fb({.name = "b"});
  for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.37 * i);
  fa.at() = a, fb.at() = b;
  auto k = ctg::kernel<"many">([](auto x, auto a, auto b, auto out, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a() + x[i] * b(); }), out[i] = v);
      });
    });
  });
  k(x, fa, fb, out, iters);
  out.grad().fill(1.0);
  k.grad(x, fa, fb, out, iters);
  // v_0 = x, v_{j+1} = a sin v_j + b x. Tangents: dv/dx, dv/da, dv/db.
  double ga = 0, gb = 0;
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    double const xi = x.at(i);
    double v = xi, tx = 1, ta = 0, tb = 0;
    for (int j = 0; j < iters; ++j) {
      double const c = std::cos(v) * a;
      tx = c * tx + b;
      ta = c * ta + std::sin(v);
      tb = c * tb + xi;
      v = std::sin(v) * a + xi * b;
    }
    bad += out.at(i) != Approx(v).epsilon(1e-13);
    bad += x.grad().at(i) != Approx(tx).epsilon(1e-12);
    ga += ta, gb += tb;
  }
  CHECK(bad == 0);
  CHECK(fa.grad().at() == Approx(ga).epsilon(1e-11));
  CHECK(fb.grad().at() == Approx(gb).epsilon(1e-11));
}

TEST_CASE("a loop inside a top-level let runs serially, in order, and is reversed in order") {
  int const m = 6;
  ctg::field<double, 0, ctg::grad> x({.name = "x"}), out({.name = "out"});
  ctg::field<double, 1, ctg::grad> w({m}, {.name = "w"});
  std::vector<double> const wv{0.5, -0.3, 0.8, 0.1, -0.6, 0.4};
  x.at() = 0.35;
  w.copy_from(wv);
  auto k = ctg::kernel<"let_loop">([](auto x, auto w, auto out) {
    return ctg::let(x(), [=](auto v) {
      return ctg::block(ctg::range(w.size(), [=](auto j) { return v = ctg::sin(v) * 1.2 + w[j] * v; }), out() = v);
    });
  });
  auto plain = [&](std::vector<double> const& p) {  // p = (x, w)
    double v = p[0];
    for (int j = 0; j < m; ++j) v = std::sin(v) * 1.2 + p[1 + j] * v;
    return v;
  };
  std::vector<double> p{0.35};
  p.insert(p.end(), wv.begin(), wv.end());
  k(x, w, out);
  CHECK(out.at() == Approx(plain(p)).epsilon(1e-14));
  out.grad().at() = 1.0;
  k.grad(x, w, out);
  auto const g = ad_test::fd_gradient(plain, p);
  CHECK(x.grad().at() == Approx(g[0]).epsilon(1e-7));
  for (int j = 0; j < m; ++j) CHECK(w.grad().at(j) == Approx(g[1 + j]).epsilon(1e-7));
}

TEST_CASE("nested ndrange over a 2-d box, swept backwards, with if_ on the carried local") {
  int const n = 3, r = 2, c = 3;
  std::vector<double> const xv{0.2, 0.9, -0.4};
  std::vector<double> const wv{0.3, -0.5, 0.7, 0.2, 0.6, -0.1};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<double, 2, ctg::grad> w({r, c}, {.name = "w"});
  x.copy_from(xv);
  w.copy_from(wv);
  auto k = ctg::kernel<"box">([](auto x, auto w, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::ndrange(w.shape(ctg::c<0>), w.shape(ctg::c<1>), [=](auto j, auto l) {
                            return ctg::if_(v > 0.5, v = v * v * w(j, l) + 0.3, v = ctg::sin(v + w(j, l)) + 0.4);
                          }),
                          out[i] = v);
      });
    });
  });
  auto plain = [&](std::vector<double> const& p) {  // p = (x, w row-major)
    double L = 0;
    for (int i = 0; i < n; ++i) {
      double v = p[i];
      for (int j = 0; j < r; ++j)
        for (int l = 0; l < c; ++l) {
          double const wjl = p[n + j * c + l];
          v = v > 0.5 ? v * v * wjl + 0.3 : std::sin(v + wjl) + 0.4;
        }
      L += v;
    }
    return L;
  };
  std::vector<double> p = xv;
  p.insert(p.end(), wv.begin(), wv.end());
  k(x, w, out);
  out.grad().fill(1.0);
  k.grad(x, w, out);
  auto const g = ad_test::fd_gradient(plain, p);
  for (int i = 0; i < n; ++i) CHECK(x.grad().at(i) == Approx(g[i]).epsilon(1e-7));
  for (int j = 0; j < r; ++j)
    for (int l = 0; l < c; ++l) CHECK(w.grad().at(j, l) == Approx(g[n + j * c + l]).epsilon(1e-7));
}

TEST_CASE("a nested loop whose bound is an integer local, with ctg::adstack_capacity") {
  std::vector<double> const xv{0.3, 1.4, 2.6, 0.05};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"local_bound", ctg::adstack_capacity<16>>([](auto x, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], ctg::cast<int>(x[i] * 3.0) + 1, [=](auto v, auto trips) {
        return ctg::block(ctg::range(trips, [=](auto) { return v = ctg::sin(v) * x[i] + 0.5; }), out[i] = v);
      });
    });
  });
  auto plain = [](double t, int trips) {
    double v = t;
    for (int j = 0; j < trips; ++j) v = std::sin(v) * t + 0.5;
    return v;
  };
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    int const trips = int(xv[i] * 3.0) + 1;  // constant near xv[i]
    CHECK(out.at(i) == Approx(plain(xv[i], trips)).epsilon(1e-14));
    auto f = [&](std::vector<double> const& q) { return plain(q[0], trips); };
    CHECK(x.grad().at(i) == Approx(ad_test::central_difference(f, {xv[i]}, 0)).epsilon(1e-7));
  }
}

TEST_CASE("CSR gather y[i] = sum_j val[j] x[col[j]]^2 with bounds ptr[i], ptr[i+1] from an index field") {
  ad_test::thread_scope threads(8);
  int const rows = 400, cols = 17;
  std::vector<int> ptr{0}, col;
  std::vector<double> val;
  for (int i = 0; i < rows; ++i) {
    int const len = i % 5;
    for (int t = 0; t < len; ++t) col.push_back((i * 3 + t * 7) % cols), val.push_back(0.1 * (t + 1));
    ptr.push_back(int(col.size()));
  }
  int const nnz = int(col.size());
  ctg::field<int, 1> fptr({rows + 1}, {.name = "ptr"}), fcol({nnz}, {.name = "col"});
  ctg::field<double, 1, ctg::grad> fval({nnz}, {.name = "val"}), x({cols}, {.name = "x"}), y({rows}, {.name = "y"});
  fptr.copy_from(ptr);
  fcol.copy_from(col);
  fval.copy_from(val);
  for (int c = 0; c < cols; ++c) x.at(c) = 0.5 + 0.1 * c;
  auto k = ctg::kernel<"csr">([](auto ptr, auto col, auto val, auto x, auto y) {
    return ctg::range(y.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto acc) {
        return ctg::block(ctg::range(ptr[i], ptr[i + 1], [=](auto j) { return acc += val[j] * x[col[j]] * x[col[j]]; }),
                          y[i] = ctg::sin(acc));
      });
    });
  });
  k(fptr, fcol, fval, x, y);
  y.grad().fill(1.0);
  k.grad(fptr, fcol, fval, x, y);
  // dL/dx_c = sum_i cos(acc_i) sum_{j in row i, col j = c} 2 val_j x_c; dL/dval_j = cos(acc_i) x_col^2
  std::vector<double> gx(cols, 0.0), gval(nnz, 0.0);
  for (int i = 0; i < rows; ++i) {
    double acc = 0;
    for (int j = ptr[i]; j < ptr[i + 1]; ++j) acc += val[j] * x.at(col[j]) * x.at(col[j]);
    for (int j = ptr[i]; j < ptr[i + 1]; ++j) {
      gx[col[j]] += std::cos(acc) * 2 * val[j] * x.at(col[j]);
      gval[j] = std::cos(acc) * x.at(col[j]) * x.at(col[j]);
    }
  }
  for (int c = 0; c < cols; ++c) CHECK(x.grad().at(c) == Approx(gx[c]).epsilon(1e-12));
  int bad = 0;
  for (int j = 0; j < nnz; ++j) bad += fval.grad().at(j) != Approx(gval[j]).epsilon(1e-13);
  CHECK(bad == 0);
}

// ---- trip counts sized from integer fields -------------------------------------------
// A nested loop with a carried local needs its largest trip count when the
// launch sizes the adstack, worked out from the range of its bound over the
// values of the fields it reads. Bounds that divide by a field holding both
// signs, take an absolute value, shift or mask, or go through a cast that
// wraps were refused (CTG-AD-003 at compile time or at the launch) or sized
// short (an overflow at the launch) before.
namespace sized_bounds {

// out[i] = v after trips(i) steps of v <- sin(v) 1.1 + 0.2 from v = x[i]; the
// bound reads c, which holds 2n integers.
template <ctg::detail::fixed_string Name, class Bound>
auto recurrence(Bound) {
  return ctg::kernel<Name>([](auto x, auto c, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(Bound{}(c, i, x.size()), [=](auto) { return v = ctg::sin(v) * 1.1 + 0.2; }),
                          out[i] = v);
      });
    });
  });
}

template <class Kernel, class Counts>
void check(Kernel const& k, std::vector<int> const& c, Counts const& trips) {
  int const n = int(c.size()) / 2;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  ctg::field<int, 1> cf({2 * n}, {.name = "c"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.1 + 0.2 * i;
  cf.copy_from(c);
  k(x, cf, out);
  out.grad().fill(1.0);
  k.grad(x, cf, out);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double v = x.at(i), dv = 1.0;  // a hand-written tangent of the recurrence
    for (int t = 0; t < trips(c[std::size_t(i)], c[std::size_t(i + n)]); ++t) dv *= std::cos(v) * 1.1, v = std::sin(v) * 1.1 + 0.2;
    CHECK(out.at(i) == Approx(v).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(dv).epsilon(1e-12));
  }
}

// The bounds: c[i] / c[i + n] (either sign), |c[i]|, a shift and a mask,
// and c[i] as an unsigned char (-1 and -3 are 255 and 253 steps, 263 is 7).
struct quotient {
  auto operator()(auto c, auto i, auto n) const { return c[i] / c[i + n]; }
};
struct magnitude {
  auto operator()(auto c, auto i, auto) const { return ctg::abs(c[i]); }
};
struct halved_masked {
  auto operator()(auto c, auto i, auto n) const { return (c[i] >> 1) + (c[i + n] & 7); }
};
struct wrapped {
  auto operator()(auto c, auto i, auto) const { return ctg::cast<int>(ctg::cast<unsigned char>(c[i])); }
};

}  // namespace sized_bounds

TEST_CASE("trip counts from integer fields: division by either sign, abs, shifts, masks, casts that wrap") {
  using namespace sized_bounds;
  check(recurrence<"quotient_bound">(quotient{}), {-20, 12, 7, 9, -2, 3, -1, 2},
        [](int a, int b) { return a / b; });
  check(recurrence<"abs_bound">(magnitude{}), {-5, 3, 0, -1, 0, 0, 0, 0}, [](int a, int) { return a < 0 ? -a : a; });
  check(recurrence<"shift_mask_bound">(halved_masked{}), {9, 4, -3, 1, 13, -1, 6, 8},
        [](int a, int b) { return (a >> 1) + (b & 7); });
  check(recurrence<"wrapped_bound">(wrapped{}), {-1, -3, 2, 263, 0, 0, 0, 0},
        [](int a, int) { return int(static_cast<unsigned char>(a)); });
}

TEST_CASE("the ranges of integer operations in the type they compute in") {
  using ctg::analysis::as_type;
  using ctg::analysis::interval;
  auto same = [](interval a, interval b) { return a.known == b.known && (!a.known || (a.lo == b.lo && a.hi == b.hi)); };
  static_assert(same(as_type<unsigned char>({256, 259, true}), {0, 3, true}));     // wraps alike: 0..3
  static_assert(same(as_type<unsigned char>({254, 257, true}), {0, 255, true}));   // 254, 255, 0, 1
  static_assert(same(as_type<unsigned>({-1, -1, true}), interval::exact(4294967295LL)));
  static_assert(same(as_type<short>({0, 70000, true}), {-32768, 32767, true}));
  static_assert(same(as_type<int>({-5, 5, true}), {-5, 5, true}));
  static_assert(same(as_type<unsigned long long>({-1, 0, true}), interval::unknown()));
  static_assert(same(ctg::analysis::quotient({-20, 12, true}, {-2, 3, true}), {-20, 20, true}));
  static_assert(same(ctg::analysis::quotient({1, 1, true}, {0, 0, true}), interval::unknown()));
}

TEST_CASE("a bound whose range over a field allows more trips than memory holds: CTG-AD-003, or the capacity given") {
  // c = 2^32 + 25 and -2^32 + 4 as ints are 25 and 4 steps, but the range
  // of the values c holds, cast to int, is every int: no adstack sized from
  // it fits in memory.
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"}), out({2}, {.name = "out"});
  ctg::field<long long, 1> c({2}, {.name = "c"});
  x.copy_from(std::vector<double>{0.3, 0.7});
  c.copy_from(std::vector<long long>{(1LL << 32) + 25, -(1LL << 32) + 4});
  auto body = [](auto x, auto c, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(ctg::cast<int>(c[i]), [=](auto) { return v = ctg::sin(v) * 1.1 + 0.2; }),
                          out[i] = v);
      });
    });
  };
  auto unsized = ctg::kernel<"wide_bound">(body);
  unsized(x, c, out);
  out.grad().fill(1.0);
  CHECK_THROWS_WITH_AS(unsized.grad(x, c, out), doctest::Contains("CTG-AD-003 cannot size the adstack"),
                       ctg::autodiff_error);
  auto sized = ctg::kernel<"wide_bound_capacity", ctg::adstack_capacity<32>>(body);
  sized(x, c, out);
  out.grad().fill(1.0);
  x.grad().fill(0.0);
  sized.grad(x, c, out);
  int const trips[] = {25, 4};
  for (int i = 0; i < 2; ++i) {
    double v = x.at(i), dv = 1.0;
    for (int t = 0; t < trips[i]; ++t) dv *= std::cos(v) * 1.1, v = std::sin(v) * 1.1 + 0.2;
    CHECK(out.at(i) == Approx(v).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(dv).epsilon(1e-12));
  }
}
