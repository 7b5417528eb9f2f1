// Forward semantics of the kernel constructs, each against a value computed
// independently on the host.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <numeric>
#include <vector>

using namespace ctg::literals;

TEST_CASE("rank-0, rank-1 and rank-2 access, stores and plain arithmetic") {
  ctg::field<float, 0> s;
  ctg::field<float, 1> a(5), b(5);
  ctg::field<double, 2> m(3, 4);
  s.at() = 2.5f;
  for (int i = 0; i < 5; ++i) a.at(i) = float(i + 1);
  auto k = ctg::kernel<"arith">([](auto s, auto a, auto b, auto m) {
    return ctg::block(ctg::range(5, [=](auto i) { return b[i] = (a[i] * s() - 1) / 2 + a(i); }),
                      ctg::ndrange(3, 4, [=](auto i, auto j) { return m(i, j) = i * 10 + j - 0.5; }));
  });
  k(s, a, b, m);
  for (int i = 0; i < 5; ++i) CHECK(b.at(i) == doctest::Approx(((i + 1) * 2.5f - 1) / 2 + (i + 1)));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(m.at(i, j) == doctest::Approx(i * 10 + j - 0.5));
}

TEST_CASE("plain numbers take the type of the expression they meet") {
  ctg::field<float, 1> out(3);
  ctg::field<int, 1> iout(3);
  auto k = ctg::kernel<"weak">([](auto out, auto iout) {
    return ctg::range(3, [=](auto i) {
      // 0.1 becomes float next to a float; i / 2 is integer division.
      return ctg::block(out[i] = ctg::cast<float>(i) * 0.1 + i / 2, iout[i] = i % 2 + 7 / 2);
    });
  });
  k(out, iout);
  for (int i = 0; i < 3; ++i) {
    CHECK(out.at(i) == doctest::Approx(float(i) * 0.1f + float(i / 2)));
    CHECK(iout.at(i) == i % 2 + 3);
  }
}

TEST_CASE("integer division and remainder follow C++") {
  ctg::field<int, 1> q(7), r(7);
  auto k = ctg::kernel<"divmod">([](auto q, auto r) {
    return ctg::range(7, [=](auto i) { return ctg::block(q[i] = (i - 3) / 2, r[i] = (i - 3) % 2); });
  });
  k(q, r);
  for (int i = 0; i < 7; ++i) {
    CHECK(q.at(i) == (i - 3) / 2);
    CHECK(r.at(i) == (i - 3) % 2);
  }
}

TEST_CASE("comparisons, logic and select") {
  ctg::field<int, 1> out(10);
  ctg::field<float, 1> sel(10);
  auto k = ctg::kernel<"logic">([](auto out, auto sel) {
    return ctg::range(10, [=](auto i) {
      return ctg::block(out[i] = ctg::cast<int>((i > 2 && i <= 6) || i == 9 || !(i != 0)),
                        sel[i] = ctg::select(i < 5, ctg::cast<float>(i) * 2, -1.0f));
    });
  });
  k(out, sel);
  for (int i = 0; i < 10; ++i) {
    CHECK(out.at(i) == int((i > 2 && i <= 6) || i == 9 || i == 0));
    CHECK(sel.at(i) == (i < 5 ? float(i) * 2 : -1.0f));
  }
}

TEST_CASE("select evaluates only the chosen side") {
  // x[i - 1] at i == 0 would be out of range; select must not read it.
  ctg::field<float, 1> x(4), y(4);
  for (int i = 0; i < 4; ++i) x.at(i) = float(i + 1);
  auto k = ctg::kernel<"guarded">([](auto x, auto y) {
    return ctg::range(4, [=](auto i) { return y[i] = ctg::select(i > 0, x[i - 1], 0.0f); });
  });
  k(x, y);
  CHECK(y.at(0) == 0.0f);
  for (int i = 1; i < 4; ++i) CHECK(y.at(i) == float(i));
}

TEST_CASE("math table, forward values") {
  ctg::field<double, 1> x(1), out(20);
  x.at(0) = 0.3;
  auto k = ctg::kernel<"math">([](auto x, auto out) {
    return ctg::let(x[0], [=](auto v) {
      return ctg::block(out[0] = ctg::sin(v), out[1] = ctg::cos(v), out[2] = ctg::tan(v), out[3] = ctg::tanh(v),
                        out[4] = ctg::asin(v), out[5] = ctg::acos(v), out[6] = ctg::atan(v), out[7] = ctg::exp(v),
                        out[8] = ctg::log(v), out[9] = ctg::sqrt(v), out[10] = ctg::rsqrt(v), out[11] = ctg::abs(-v),
                        out[12] = ctg::floor(v * 10), out[13] = ctg::ceil(v * 10), out[14] = ctg::atan2(v, 0.7),
                        out[15] = ctg::pow(v, 2.5), out[16] = ctg::min(v, 0.2), out[17] = ctg::max(v, 0.2),
                        out[18] = ctg::clamp(v * 10, 0.0, 1.0), out[19] = ctg::round(v * 10) + ctg::sign(-v));
    });
  });
  k(x, out);
  double const v = 0.3;
  double const want[20] = {std::sin(v),  std::cos(v),         std::tan(v),      std::tanh(v),   std::asin(v),
                           std::acos(v), std::atan(v),        std::exp(v),      std::log(v),    std::sqrt(v),
                           1 / std::sqrt(v), v,                std::floor(3.0),  std::ceil(3.0), std::atan2(v, 0.7),
                           std::pow(v, 2.5), 0.2,              0.3,              1.0,            3.0 - 1.0};
  for (int i = 0; i < 20; ++i) CHECK(out.at(i) == doctest::Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("let with several locals, reassignment and result through a func") {
  ctg::field<float, 1> x(4), y(4);
  for (int i = 0; i < 4; ++i) x.at(i) = float(i);
  auto poly = ctg::func<"poly">([](auto v) {
    return ctg::let(v, 0.0f, [=](auto a, auto acc) {
      return ctg::block(acc = a * a, acc += 2 * a, acc -= 1, a = a + 1, acc *= a, ctg::result(acc));
    });
  });
  auto k = ctg::kernel<"let">([=](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = poly(x[i]) + 1; }); });
  k(x, y);
  for (int i = 0; i < 4; ++i) {
    float a = float(i);
    float acc = a * a + 2 * a - 1;
    a += 1;
    acc *= a;
    CHECK(y.at(i) == doctest::Approx(acc + 1));
  }
}

TEST_CASE("if_ with one and two arms, while_, nested range with runtime bounds") {
  ctg::field<int, 1> n(3), out(3), steps(3);
  ctg::field<int, 0> bound;
  bound.at() = 5;
  n.at(0) = 1, n.at(1) = 6, n.at(2) = 27;
  auto k = ctg::kernel<"control">([](auto n, auto out, auto steps, auto bound) {
    return ctg::range(3, [=](auto i) {
      return ctg::let(n[i], 0, 0, [=](auto v, auto count, auto total) {
        return ctg::block(
            // Collatz steps: a while_ with a two-armed if_ inside.
            ctg::while_(v != 1, ctg::block(ctg::if_(v % 2 == 0, v = v / 2, v = 3 * v + 1), count += 1)),
            steps[i] = count,
            // Sum of j over [i, bound()) with the field-loaded bound.
            ctg::range(i, bound(), [=](auto j) { return total += j; }),
            ctg::if_(total > 100, total = -1),  // one arm, never taken
            out[i] = total);
      });
    });
  });
  k(n, out, steps, bound);
  auto collatz = [](int v) {
    int c = 0;
    while (v != 1) {
      v = v % 2 == 0 ? v / 2 : 3 * v + 1;
      ++c;
    }
    return c;
  };
  for (int i = 0; i < 3; ++i) {
    CHECK(steps.at(i) == collatz(n.at(i)));
    int total = 0;
    for (int j = i; j < 5; ++j) total += j;
    CHECK(out.at(i) == total);
  }
}

TEST_CASE("static_range unrolls with compile-time indices; c<N> and _c constants") {
  ctg::field<float, 2> m(2, 3);
  ctg::field<float, 1> rowsum(2);
  auto k = ctg::kernel<"static">([](auto m, auto rowsum) {
    return ctg::block(ctg::range(2, [=](auto i) {
                        return ctg::block(ctg::static_range<3>([=](auto j) { return m(i, j) = i * 3 + j; }),
                                          rowsum[i] = m(i, 0_c) + m(i, ctg::c<1>) + m(i, 2_c));
                      }),
                      ctg::static_range<1, 2>([=](auto j) { return m(0_c, j) = m(0_c, j) * 10; }));
  });
  k(m, rowsum);
  CHECK(m.at(0, 0) == 0.0f);
  CHECK(m.at(0, 1) == 10.0f);
  CHECK(m.at(0, 2) == 2.0f);
  CHECK(m.at(1, 2) == 5.0f);
  CHECK(rowsum.at(0) == 3.0f);
  CHECK(rowsum.at(1) == 12.0f);
}

TEST_CASE("each over a field, range with two bounds, serial_range carries values in order") {
  ctg::field<float, 2> g(3, 2);
  ctg::field<float, 1> prefix(6);
  auto k = ctg::kernel<"each">([](auto g, auto prefix) {
    return ctg::block(ctg::each(g, [=](auto i, auto j) { return g(i, j) = i + 0.5f * j; }),
                      ctg::range(1, 6, [=](auto i) { return prefix[i] = 1.0f; }),
                      ctg::serial_range(1, 6, [=](auto i) { return prefix[i] = prefix[i - 1] + prefix[i]; }));
  });
  k(g, prefix);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) CHECK(g.at(i, j) == doctest::Approx(i + 0.5f * j));
  for (int i = 0; i < 6; ++i) CHECK(prefix.at(i) == float(i));
}

TEST_CASE("atomics: += and -= from every iteration, atomic_min and atomic_max") {
  ctg::field<double, 0> sum;
  ctg::field<int, 1> hist(4);
  ctg::field<float, 0> lo, hi;
  lo.at() = 1e9f;
  hi.at() = -1e9f;
  int const n = 100000;
  auto k = ctg::kernel<"atomics">([](auto sum, auto hist, auto lo, auto hi, int n) {
    return ctg::range(n, [=](auto i) {
      return ctg::block(sum() += ctg::cast<double>(i), sum() -= 0.5, hist[i % 4] += 1,
                        ctg::atomic_min(lo(), ctg::cast<float>(i) - 3.0f), ctg::atomic_max(hi(), ctg::cast<float>(i)));
    });
  });
  k(sum, hist, lo, hi, n);
  CHECK(sum.at() == doctest::Approx(double(n) * (n - 1) / 2 - 0.5 * n));
  for (int b = 0; b < 4; ++b) CHECK(hist.at(b) == n / 4);
  CHECK(lo.at() == -3.0f);
  CHECK(hi.at() == float(n - 1));
}

TEST_CASE("scalar parameters and field shapes inside kernels") {
  ctg::field<float, 2> a(4, 3);
  auto k = ctg::kernel<"params">([](auto a, float scale, int offset) {
    return ctg::ndrange(a.shape(0_c), a.shape(1_c), [=](auto i, auto j) { return a(i, j) = scale * (i + offset) + j; });
  });
  k(a, 2.0f, 3);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(a.at(i, j) == 2.0f * (i + 3) + j);
}

TEST_CASE("stop_grad is the identity in the forward pass") {
  ctg::field<float, 1> x(3), y(3);
  x.at(1) = 4.0f;
  auto k = ctg::kernel<"stop">([](auto x, auto y) {
    return ctg::range(3, [=](auto i) { return y[i] = ctg::stop_grad(x[i] * 2) + 1; });
  });
  k(x, y);
  CHECK(y.at(1) == 9.0f);
}

TEST_CASE("statement funcs, a func holding a loop, offloads mixed with statements") {
  ctg::field<float, 1> x(8);
  ctg::field<float, 0> total;
  auto fill = ctg::func<"fill">([](auto x) { return ctg::range(8, [=](auto i) { return x[i] = i * 1.0f; }); });
  auto accumulate = ctg::func<"accumulate">([](auto x, auto total) {
    return ctg::serial_range(8, [=](auto i) { return total() = total() + x[i]; });
  });
  auto k = ctg::kernel<"mixed">([=](auto x, auto total) {
    return ctg::block(total() = 100.0f, fill(x), accumulate(x, total), total() = total() * 2);
  });
  k(x, total);
  CHECK(total.at() == (100.0f + 28.0f) * 2);
}

// Selects whose condition compares the loop index with a bound fixed for the
// launch: the chunk runs its interior, where all of them hold, without
// evaluating them (selects and if_ alike). Every form of guard in its own
// loop (each loop's interior ends at that guard's bound), on one and two
// threads (chunks that split), against the same stencils written as plain
// loops.
TEST_CASE("index guards: every comparison form, chunks split at the guards") {
  int const n = 20000;
  ctg::field<double, 1> x(n);
  ctg::field<double, 2> out(10, n);
  for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.01 * i) + 0.001 * i;
  auto stencils = ctg::kernel<"guarded">([](auto x, auto out, int a, int b) {
    auto const n = x.size();
    return ctg::block(ctg::range(n, [=](auto i) { return out(0, i) = ctg::select(i > a, x[i - 1], -1.0); }),
                      ctg::range(n, [=](auto i) { return out(1, i) = ctg::select(i >= a, x[i - 2], -2.0); }),
                      ctg::range(n, [=](auto i) { return out(2, i) = ctg::select(i < n - b, x[i + 1], -3.0); }),
                      ctg::range(n, [=](auto i) { return out(3, i) = ctg::select(i <= n - b, x[i + 2], -4.0); }),
                      ctg::range(n, [=](auto i) { return out(4, i) = ctg::select(a < i, x[i], -5.0); }),
                      ctg::range(n, [=](auto i) { return out(5, i) = ctg::select(a <= i, x[i], -6.0); }),
                      ctg::range(n, [=](auto i) { return out(6, i) = ctg::select(n - b > i, x[i], -7.0); }),
                      ctg::range(n, [=](auto i) { return out(7, i) = ctg::select(n - b >= i, x[i], -8.0); }),
                      ctg::range(n, [=](auto i) {
                        return out(8, i) = ctg::select(i >= a && i < n - b, x[i], -9.0);
                      }),
                      ctg::range(n, [=](auto i) {
                        return ctg::if_(i > a, out(9, i) = x[i - 1] * 2.0, out(9, i) = -10.0);
                      }));
  });
  auto const want = [&](int k, int i, int a, int b) {
    auto const at = [&](int j) { return x.at(j); };
    switch (k) {
      case 0: return i > a ? at(i - 1) : -1.0;
      case 1: return i >= a ? at(i - 2) : -2.0;
      case 2: return i < n - b ? at(i + 1) : -3.0;
      case 3: return i <= n - b ? at(i + 2) : -4.0;
      case 4: return a < i ? at(i) : -5.0;
      case 5: return a <= i ? at(i) : -6.0;
      case 6: return n - b > i ? at(i) : -7.0;
      case 7: return n - b >= i ? at(i) : -8.0;
      case 8: return i >= a && i < n - b ? at(i) : -9.0;
      default: return i > a ? at(i - 1) * 2.0 : -10.0;
    }
  };
  int const previous = ctg::num_threads();
  for (int threads : {1, 2}) {
    ctg::set_num_threads(threads);
    // Bounds inside the range (one per chunk edge region), at its edges
    // (the smallest that keep the reads in range), and crossing (an empty
    // interior for the last loop).
    for (auto const& bounds : {std::pair{2, 3}, std::pair{4000, 9000}, std::pair{12000, 11000}}) {
      int const a = bounds.first, b = bounds.second;  // not bindings: doctest's messages capture them
      stencils(x, out, a, b);
      for (int k = 0; k < 10; ++k) {
        int wrong = 0;
        for (int i = 0; i < n; ++i) wrong += out.at(k, i) != want(k, i, a, b);
        CHECK_MESSAGE(wrong == 0, "loop ", k, ", threads ", threads, ", a ", a, ", b ", b);
      }
    }
  }
  ctg::set_num_threads(previous);
}

TEST_CASE("index guards: a loop that does not start at zero, a guard false in the middle") {
  ctg::field<float, 1> x(64), out(64);
  for (int i = 0; i < 64; ++i) x.at(i) = float(i) * 0.5f;
  auto k = ctg::kernel<"offset_range">([](auto x, auto out) {
    return ctg::range(5, 60, [=](auto i) {
      return out[i] = ctg::select(i > 7, x[i - 8], 100.0f) + ctg::select(i < 9, x[i], 1000.0f);
    });
  });
  k(x, out);
  for (int i = 0; i < 64; ++i) {
    float const want = i < 5 || i >= 60 ? 0.0f : (i > 7 ? x.at(i - 8) : 100.0f) + (i < 9 ? x.at(i) : 1000.0f);
    CHECK(out.at(i) == want);
  }
}

TEST_CASE("a 3-D box cut into chunks that start inside rows: every iteration once, forward and adjoint") {
  // 7 x 11 x 13 = 1001 iterations on three threads: chunks of about 41 start
  // and end inside rows of 13 and carry over both outer axes, which each
  // chunk walks row by row from its first index (backend/plan.hpp).
  int const na = 7, nb = 11, nc = 13;
  ctg::field<double, 3, ctg::grad> x({na, nb, nc}, {.name = "x"}), y({na, nb, nc}, {.name = "y"});
  auto square = ctg::kernel<"square_3d">([](auto x, auto y) {
    return ctg::ndrange(x.shape(0_c), x.shape(1_c), x.shape(2_c), [=](auto i, auto j, auto k) {
      return y(i, j, k) = x(i, j, k) * x(i, j, k) + i * 10000 + j * 100 + k;
    });
  });
  auto value = [](int i, int j, int k) { return 0.5 + 0.01 * ((i * 7 + j * 3 + k) % 17); };
  int const previous = ctg::num_threads();
  for (int threads : {1, 3}) {
    ctg::set_num_threads(threads);
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j)
        for (int k = 0; k < nc; ++k) {
          x.at(i, j, k) = value(i, j, k);
          y.at(i, j, k) = -1.0;
          y.grad().at(i, j, k) = double(1 + (i + j + k) % 3);
        }
    x.grad().fill(0.0);
    square(x, y);
    square.grad(x, y);
    int wrong_value = 0, wrong_grad = 0;
    for (int i = 0; i < na; ++i)
      for (int j = 0; j < nb; ++j)
        for (int k = 0; k < nc; ++k) {
          double const v = value(i, j, k);
          wrong_value += y.at(i, j, k) != v * v + i * 10000 + j * 100 + k;
          // An iteration run twice would add twice, one skipped not at all.
          wrong_grad += x.grad().at(i, j, k) != 2.0 * v * double(1 + (i + j + k) % 3);
        }
    CHECK_MESSAGE(wrong_value == 0, "threads ", threads);
    CHECK_MESSAGE(wrong_grad == 0, "threads ", threads);
  }
  ctg::set_num_threads(previous);
}
