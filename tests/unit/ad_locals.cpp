// Reverse mode through locals (let, reassignment, +=, component stores on
// vector locals, if_ on a local the branch modifies) and through funcs.
// Expected gradients: closed forms, or central differences of the same
// computation written in plain C++.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <utility>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;

TEST_CASE("let with several locals, each reassigned from the others") {
  std::vector<double> const xv{0.3, -0.8, 1.1, 0.05}, yv{1.2, 0.4, -0.7, 2.0};
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"}), out({4}, {.name = "out"});
  x.copy_from(xv);
  y.copy_from(yv);
  auto k = ctg::kernel<"several">([](auto x, auto y, auto out) {
    return ctg::range(4, [=](auto i) {
      return ctg::let(x[i], y[i], 0.0, [=](auto a, auto b, auto c) {
        return ctg::block(c = a * b, a = ctg::sin(c) + b, b = b * a, out[i] = a + b * c);
      });
    });
  });
  auto plain = [](std::vector<double> const& p) {
    double a = p[0], b = p[1], c = 0;
    c = a * b;
    a = std::sin(c) + b;
    b = b * a;
    return a + b * c;
  };
  k(x, y, out);
  out.grad().fill(1.0);
  k.grad(x, y, out);
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    CHECK(out.at(i) == Approx(plain({xv[i], yv[i]})).epsilon(1e-14));
    auto const g = ad_test::fd_gradient(plain, {xv[i], yv[i]});
    CHECK(x.grad().at(i) == Approx(g[0]).epsilon(1e-7));
    CHECK(y.grad().at(i) == Approx(g[1]).epsilon(1e-7));
  }
}

TEST_CASE("reassignment v = v*v; v = sin(v) and updates +=, -=, *= on a local") {
  std::vector<double> const xv{0.4, -1.3, 2.1};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), p({3}, {.name = "p"}), q({3}, {.name = "q"});
  x.copy_from(xv);
  auto k = ctg::kernel<"reassign">([](auto x, auto p, auto q) {
    return ctg::range(3, [=](auto i) {
      return ctg::block(ctg::let(x[i], [=](auto v) { return ctg::block(v = v * v, v = ctg::sin(v), p[i] = v); }),
                        ctg::let(0.0, [=](auto acc) {
                          return ctg::block(acc += x[i] * x[i], acc += ctg::sin(x[i]), acc -= 0.5 * x[i],
                                            acc *= x[i], q[i] = acc);
                        }));
    });
  });
  k(x, p, q);
  p.grad().fill(1.0);
  q.grad().fill(1.0);
  k.grad(x, p, q);
  for (int i = 0; i < 3; ++i) {
    double const v = xv[i];
    // p = sin(x^2):  2x cos(x^2);  q = (x^2 + sin x - x/2) x:  (2x + cos x - 1/2) x + (x^2 + sin x - x/2)
    double const dp = 2 * v * std::cos(v * v);
    double const dq = (2 * v + std::cos(v) - 0.5) * v + (v * v + std::sin(v) - 0.5 * v);
    CHECK(x.grad().at(i) == Approx(dp + dq).epsilon(1e-13));
  }
}

TEST_CASE("component assignment on a vector local") {
  std::vector<double> const xv{0.6, -1.4, 2.2};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"components">([](auto x, auto out) {
    return ctg::range(3, [=](auto i) {
      return ctg::let(ctg::vec(0.0, 0.0, 0.0), [=](auto v) {
        return ctg::block(v[0_c] = x[i] * x[i], v[1_c] = ctg::sin(x[i]), v[2_c] = v[0_c] * v[1_c],
                          v[0_c] = v[0_c] + v[2_c], out[i] = ctg::dot(v, ctg::vec(1.0, 2.0, 3.0)));
      });
    });
  });
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  for (int i = 0; i < 3; ++i) {
    double const t = xv[i];
    // out = (x^2 + x^2 sin x) + 2 sin x + 3 x^2 sin x = x^2 + 4 x^2 sin x + 2 sin x
    CHECK(out.at(i) == Approx(t * t + 4 * t * t * std::sin(t) + 2 * std::sin(t)).epsilon(1e-14));
    double const want = 2 * t + 8 * t * std::sin(t) + 4 * t * t * std::cos(t) + 2 * std::cos(t);
    CHECK(x.grad().at(i) == Approx(want).epsilon(1e-13));
  }
}

TEST_CASE("coefficients of a matrix local read one by one") {
  // det(2 A) spelled by coefficients: its gradient in A is 4 cof(A), with
  // cof(A) = [[a11, -a10], [-a01, a00]].
  using M = Eigen::Matrix2d;
  ctg::field<M, 1, ctg::grad> a({2}, {.name = "a"});
  ctg::field<double, 1, ctg::grad> out({2}, {.name = "out"});
  a.at(0) << 1.5, -0.5, 2.0, 0.25;
  a.at(1) << -1.0, 3.0, 0.5, 2.0;
  auto k = ctg::kernel<"det_by_coefficients">([](auto a, auto out) {
    return ctg::range(2, [=](auto i) {
      return ctg::let(2.0 * a[i], [=](auto g) {
        return out[i] = g(0_c, 0_c) * g(1_c, 1_c) - g(0_c, 1_c) * g(1_c, 0_c);
      });
    });
  });
  k(a, out);
  out.grad().fill(1.0);
  k.grad(a, out);
  for (int i = 0; i < 2; ++i) {
    M const m = a.at(i);
    M cofactor;
    cofactor << m(1, 1), -m(1, 0), -m(0, 1), m(0, 0);
    CHECK(out.at(i) == Approx(4.0 * (m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0))).epsilon(1e-14));
    CHECK(a.grad().at(i).isApprox(4.0 * cofactor, 1e-14));
  }
}

TEST_CASE("if_ whose condition reads a local that the taken branch changes") {
  // First if_: x > 1 shrinks v to 0.1 x^2, after which the condition is false;
  // the reverse pass must still sweep the branch that ran.
  std::vector<double> const xv{2.0, 1.5, 0.8, 0.3, 3.0};
  int const n = int(xv.size());
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), out({n}, {.name = "out"});
  x.copy_from(xv);
  auto k = ctg::kernel<"branchy">([](auto x, auto out, int n) {
    return ctg::range(n, [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::if_(v > 1.0, v = v * v * 0.1), ctg::if_(v > 0.5, v = ctg::sin(v), v = v * 3.0),
                          out[i] = v);
      });
    });
  });
  k(x, out, n);
  out.grad().fill(1.0);
  k.grad(x, out, n);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const t = xv[i];
    double v = t, dv = 1.0;  // value and d v / d x, branch by branch
    if (v > 1.0) dv *= 0.2 * v, v = 0.1 * v * v;
    if (v > 0.5)
      dv *= std::cos(v), v = std::sin(v);
    else
      dv *= 3.0, v = 3.0 * v;
    CHECK(out.at(i) == Approx(v).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(dv).epsilon(1e-13));
  }
}

TEST_CASE("value-returning funcs (let ... result), a func calling a func, and statement funcs") {
  auto softplus_sq = ctg::func<"softplus_sq">([](auto a) {
    return ctg::let(a, [=](auto v) { return ctg::block(v = ctg::log(1.0 + ctg::exp(v)), v = v * v, ctg::result(v)); });
  });
  auto wrap = ctg::func<"wrap">([=](auto a) { return softplus_sq(a) + ctg::sin(a); });
  auto put = ctg::func<"put">([](auto out, auto i, auto e) { return out[i] = e; });
  auto add_sq = ctg::func<"add_sq">([](auto loss, auto e) { return loss() += e * e; });

  std::vector<double> const xv{-0.7, 0.2, 1.6};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  x.copy_from(xv);
  auto k = ctg::kernel<"funcs">([=](auto x, auto out, auto loss) {
    return ctg::range(3, [=](auto i) {
      return ctg::block(put(out, i, softplus_sq(x[i]) * x[i] + wrap(2.0 * x[i])), add_sq(loss, x[i] * 3.0));
    });
  });
  k(x, out, loss);
  out.grad().fill(1.0);
  loss.grad().at() = 0.5;
  k.grad(x, out, loss);
  auto f = [](double t) {
    double const s = std::log(1 + std::exp(t));
    return s * s;
  };
  auto df = [](double t) { return 2 * std::log(1 + std::exp(t)) / (1 + std::exp(-t)); };
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const t = xv[i];
    CHECK(out.at(i) == Approx(f(t) * t + f(2 * t) + std::sin(2 * t)).epsilon(1e-14));
    // out: f(x) + x f'(x) + 2 f'(2x) + 2 cos(2x);  loss: 0.5 * 2 * (3x) * 3
    double const want = f(t) + t * df(t) + 2 * df(2 * t) + 2 * std::cos(2 * t) + 0.5 * 18 * t;
    CHECK(x.grad().at(i) == Approx(want).epsilon(1e-13));
  }
}


TEST_CASE("a func's value inside a vector whose component is read, and inside an index") {
  // Before the call is lowered the vector has no value type yet: reading a
  // component of it (or indexing with the call) must wait for lowering.
  auto twice = ctg::func<"twice">([](auto a) {
    return ctg::let(a, [=](auto u) { return ctg::block(u = u * 2.0, ctg::result(u)); });
  });
  auto k = ctg::kernel<"components">([=](auto x, auto out) {
    return ctg::range(x.size(), [=](auto i) {
      return out[i] = ctg::vec(twice(x[i]), x[i])[0_c] +
                      (ctg::mat<2, 2>(x[i], 0.0, 0.0, 1.0) * ctg::vec(twice(x[i]), x[i]))[1_c] * x[i] +
                      x[ctg::cast<int>(twice(x[i])) % 3];
    });
  });
  std::vector<double> const xv{1.5, 0.25, 1.25};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), out({3}, {.name = "out"});
  x.copy_from(xv);
  k(x, out);
  out.grad().fill(1.0);
  k.grad(x, out);
  // out_i = 2 x_i + x_i^2 + x[int(2 x_i) % 3]: the slots read are 0, 0 and 2.
  int const slot[3] = {0, 0, 2};
  std::vector<double> want_grad(3, 0.0);
  for (int i = 0; i < 3; ++i) {
    CHECK(out.at(i) == Approx(2 * xv[i] + xv[i] * xv[i] + xv[slot[i]]).epsilon(1e-14));
    want_grad[i] += 2 + 2 * xv[i];
    want_grad[slot[i]] += 1;
  }
  for (int i = 0; i < 3; ++i) CHECK(x.grad().at(i) == Approx(want_grad[i]).epsilon(1e-14));
}

TEST_CASE("math functions of plain numbers: a func called with a number, functions of a scalar argument") {
  // smoothstep(0.25) and smoothstep(h) hand clamp a number; pow(h, 2) and
  // min(h, 0.5) have no expression among their operands at all. Integers
  // become double in the functions that do not map integers to integers
  // (sqrt(i), sin(n), atan2(1, 2), pow(2, -1), as <cmath> takes them); abs
  // and max keep them, so that abs(i - 1) still indexes a field.
  auto smoothstep = ctg::func<"smoothstep">([](auto t) {
    return ctg::let(ctg::clamp(t, 0.0, 1.0), [=](auto c) { return ctg::block(ctg::result(c * c * (3.0 - 2.0 * c))); });
  });
  auto k = ctg::kernel<"numbers">([=](auto x, auto out, double h, int n) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(out[i] = smoothstep(0.25) + smoothstep(h) + ctg::pow(h, 2) + ctg::min(h, 0.5) +
                                 ctg::atan2(h, 2) * x[i] + ctg::max(3, 4) * ctg::pow(x[i], 2),
                        out[i] += ctg::sqrt(i) + ctg::sin(n) + ctg::atan2(1, 2) * x[ctg::abs(i - 1)] +
                                  ctg::pow(2, -1) * ctg::cast<double>(ctg::max(i, 1)));
    });
  });
  std::vector<double> const xv{-0.4, 1.3};
  ctg::field<double, 1, ctg::grad> x({2}, {.name = "x"}), out({2}, {.name = "out"});
  x.copy_from(xv);
  double const h = 0.75;
  int const n = 2;
  k(x, out, h, n);
  out.grad().fill(1.0);
  k.grad(x, out, h, n);
  // smoothstep(0.25) = 0.15625, smoothstep(0.75) = 0.84375; iteration i
  // reads x[|i - 1|]: x[1], then x[0].
  double const a = std::atan2(0.75, 2.0), b = std::atan2(1.0, 2.0);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    double const t = xv[i];
    CHECK(out.at(i) == Approx(0.15625 + 0.84375 + 0.5625 + 0.5 + a * t + 4 * t * t + std::sqrt(double(i)) +
                              std::sin(2.0) + b * xv[1 - i] + 0.5)
                           .epsilon(1e-14));
  }
  for (int i = 0; i < 2; ++i) CHECK(x.grad().at(i) == Approx(a + 8 * xv[i] + b).epsilon(1e-14));
}
TEST_CASE("a local shared by a plain statement offload and a loop in the same kernel") {
  // Top level: a serial statement, then a parallel loop that reads a field the
  // statement wrote. The adjoint runs the offloads in reverse order.
  ctg::field<double, 0, ctg::grad> s({.name = "s"}), t({.name = "t"});
  ctg::field<double, 1, ctg::grad> x({5}, {.name = "x"}), y({5}, {.name = "y"});
  s.at() = 0.9;
  for (int i = 0; i < 5; ++i) x.at(i) = 0.2 * i - 0.3;
  auto k = ctg::kernel<"mixed">([](auto s, auto t, auto x, auto y) {
    return ctg::block(ctg::let(s(), [=](auto v) { return ctg::block(v = v * v + 1.0, t() = ctg::exp(v)); }),
                      ctg::range(5, [=](auto i) { return y[i] = t() * x[i] * x[i]; }));
  });
  k(s, t, x, y);
  y.grad().fill(1.0);
  k.grad(s, t, x, y);
  double const tv = std::exp(0.81 + 1.0);
  double sumx2 = 0;
  for (int i = 0; i < 5; ++i) {
    double const xi = 0.2 * i - 0.3;
    sumx2 += xi * xi;
    CHECK(x.grad().at(i) == Approx(2 * tv * xi).epsilon(1e-13));
  }
  // y = t x^2 with t = exp(s^2 + 1): dt/ds = 2 s t; t.grad is zeroed by the store.
  CHECK(s.grad().at() == Approx(sumx2 * 2 * 0.9 * tv).epsilon(1e-13));
  CHECK(t.grad().at() == 0.0);
}

TEST_CASE("a let whose lambda returns a value is that value: an expression, or a let nested in it") {
  std::vector<double> const xv{0.3, -0.8, 1.1};
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), y({3}, {.name = "y"}), z({3}, {.name = "z"});
  x.copy_from(xv);
  // y = v sin(v) with v = 2x; z = w^2 with w = 3x + 1, the inner let built in the outer one's lambda.
  auto k = ctg::kernel<"value_lets">([](auto x, auto y, auto z) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(
          y[i] = ctg::let(2.0 * x[i], [=](auto v) { return ctg::let(ctg::sin(v), [=](auto s) { return v * s; }); }),
          z[i] = 1.0 + ctg::let(3.0 * x[i], [=](auto u) { return ctg::let(u + 1.0, [=](auto w) { return w * w; }); }));
    });
  });
  k(x, y, z);
  y.grad().fill(1.0);
  z.grad().fill(0.5);
  k.grad(x, y, z);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const v = 2 * xv[i], w = 3 * xv[i] + 1;
    CHECK(y.at(i) == Approx(v * std::sin(v)).epsilon(1e-14));
    CHECK(z.at(i) == Approx(1 + w * w).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(2 * (std::sin(v) + v * std::cos(v)) + 0.5 * 6 * w).epsilon(1e-13));
  }
}

TEST_CASE("a func's element argument keeps the value it had at the call when the func writes that field") {
  // a = u[i] is passed as an element; the func stores u[i] = 3a first and reads a after.
  auto scale_then_square = ctg::func<"scale_then_square">([](auto u, auto y, auto i, auto a) {
    return ctg::block(u[i] = a * 3.0, y[i] = a * a + ctg::sin(a));
  });
  auto k = ctg::kernel<"call_in_place">([=](auto u, auto y) {
    return ctg::range(u.size(), [=](auto i) { return scale_then_square(u, y, i, u[i]); });
  });
  auto total = ctg::kernel<"total">([](auto y, auto u, auto loss) {
    return ctg::range(y.size(), [=](auto i) { return loss() += y[i] + 0.5 * u[i]; });
  });
  std::vector<double> const uv{2.0, -0.5, 1.25};
  ctg::field<double, 1, ctg::grad> u({3}, {.name = "u"}), y({3}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  u.copy_from(uv);
  {
    ctg::tape tape(loss);
    k(u, y);
    total(y, u, loss);
    tape.backward();
  }
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const a = uv[i];
    CHECK(u.at(i) == Approx(3 * a).epsilon(1e-15));
    CHECK(y.at(i) == Approx(a * a + std::sin(a)).epsilon(1e-15));
    // loss = sum (a^2 + sin a) + 0.5 * 3a: d/da = 2a + cos a + 1.5.
    CHECK(u.grad().at(i) == Approx(2 * a + std::cos(a) + 1.5).epsilon(1e-13));
  }
}

// An assignment whose value nothing reads passes no adjoint on: its local's
// adjoint there is zero, and zero times an infinite partial (sqrt at 0) or a
// NaN value would be NaN in a gradient that does not depend on it.
// For the kernels below of one input x and two outputs y and z: x holds
// `values`, k runs forward, and its adjoint runs with both outputs seeded
// with 1.
namespace {
struct one_input_two_outputs {
  static constexpr int n = 4;
  std::vector<double> values;
  ctg::field<double, 1, ctg::grad> x{{n}, {.name = "x"}}, y{{n}, {.name = "y"}}, z{{n}, {.name = "z"}};
  explicit one_input_two_outputs(std::vector<double> v) : values(std::move(v)) { x.copy_from(values); }
  template <class K>
  void forward_then_grad(K const& k) {
    k(x, y, z);
    y.grad().fill(1.0);
    z.grad().fill(1.0);
    k.grad(x, y, z);
  }
};
}  // namespace

TEST_CASE("assignments whose value nothing reads leave the gradient finite") {
  // sqrt' is infinite at 0; sqrt(-0.5) and log(-0.5) are NaN.
  one_input_two_outputs f({0.0, 0.25, -0.5, 4.0});
  auto k = ctg::kernel<"unread_values">([](auto x, auto y, auto z) {
    return ctg::range(one_input_two_outputs::n, [=](auto i) {
      return ctg::block(
          // overwritten before it is read, and a local never read at all
          ctg::let(0.0, 0.0, [=](auto a, auto b) {
            return ctg::block(a = ctg::sqrt(x[i]), b = ctg::log(x[i]), a = 3.0 * x[i], y[i] = a * x[i]);
          }),
          // a let-init overwritten before it is read; an if_ that overwrites
          // on both sides
          ctg::let(ctg::sqrt(x[i]), [=](auto c) {
            return ctg::block(c = 2.0 * x[i], c = ctg::sqrt(c * c + 1.0), ctg::if_(x[i] > 1.0, c = c * x[i], c = c - x[i]),
                              z[i] = c);
          }));
    });
  });
  f.forward_then_grad(k);
  for (int i = 0; i < one_input_two_outputs::n; ++i) {
    CAPTURE(i);
    double const v = f.values[std::size_t(i)];
    double const r = std::sqrt(4 * v * v + 1);  // c before the if_
    CHECK(f.y.at(i) == Approx(3 * v * v).epsilon(1e-14));
    // d/dx [3x^2] = 6x; d/dx of z: r' = 4x / r, then times x (+ r) or minus 1.
    double const dz = v > 1 ? 4 * v / r * v + r : 4 * v / r - 1;
    CHECK(f.x.grad().at(i) == Approx(6 * v + dz).epsilon(1e-12));
  }
}

// A value assigned at the end of a loop body and read at the start of the
// next iteration is live: its adjoint reaches the operation.
TEST_CASE("a value read by the next iteration of a nested loop passes its adjoint on") {
  static constexpr int n = 3;
  std::vector<double> const xv{0.25, 1.0, 4.0};
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  x.copy_from(xv);
  auto k = ctg::kernel<"carried_value">([](auto x, auto y) {
    return ctg::range(n, [=](auto i) {
      return ctg::let(0.0, [=](auto a) {
        return ctg::range(3, [=](auto j) {
          return ctg::block(y[i] += a * x[i], a = ctg::sqrt(x[i]) + ctg::cast<double>(j),
                            ctg::if_(x[i] > 2.0, a = a * 1.0));
        });
      });
    });
  });
  k(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const v = xv[i], s = std::sqrt(v);
    // y = x (0 + s + (s + 1)) = 2 x^1.5 + x
    CHECK(y.at(i) == Approx(2 * v * s + v).epsilon(1e-14));
    CHECK(x.grad().at(i) == Approx(3 * s + 1).epsilon(1e-13));
  }
}

// Inside a loop: a local the body assigns and nothing reads (not the next
// iteration, not after the loop), and one only a while_'s condition reads.
TEST_CASE("a loop body's assignments that nothing reads leave the gradient finite") {
  // sqrt' is infinite at 0 and sqrt(-1) is NaN: the unread u and w must not
  // carry 0 * that into x's gradient.
  one_input_two_outputs f({0.0, 0.5, -1.0, 2.0});
  auto k = ctg::kernel<"unread_in_loops", ctg::adstack_capacity<8>>([](auto x, auto y, auto z) {
    return ctg::range(one_input_two_outputs::n, [=](auto i) {
      return ctg::block(
          ctg::let(x[i], x[i], [=](auto v, auto u) {
            return ctg::block(ctg::range(2, [=](auto) { return ctg::block(u = ctg::sqrt(v), v = v * 3.0); }), y[i] = v);
          }),
          ctg::let(x[i], 0.0, 0, [=](auto v, auto w, auto count) {
            return ctg::block(ctg::while_(count < 3, ctg::block(w = ctg::sqrt(v), v = v * 2.0, count = count + 1)),
                              z[i] = v * v);
          }));
    });
  });
  f.forward_then_grad(k);
  for (int i = 0; i < one_input_two_outputs::n; ++i) {
    CAPTURE(i);
    double const v = f.values[std::size_t(i)];
    CHECK(f.y.at(i) == Approx(9 * v).epsilon(1e-14));
    CHECK(f.z.at(i) == Approx(64 * v * v).epsilon(1e-14));
    // y = 9x, z = (8x)^2
    CHECK(f.x.grad().at(i) == Approx(9 + 128 * v).epsilon(1e-13));
  }
}

// A let body that returns a bare local, a field element or a component (a
// func that reads a[idx] into a local and returns it): the let is that value.
TEST_CASE("a let body returning a bare local, a field element or a component is the let's value") {
  std::vector<double> const av{0.5, -1.5, 2.0};
  ctg::field<double, 1, ctg::grad> a({3}, {.name = "a"}), d({3}, {.name = "d"}), e({3}, {.name = "e"}),
      c({3}, {.name = "c"});
  a.copy_from(av);
  auto read = ctg::func<"read">([](auto a, auto idx) { return ctg::let(a[idx] * a[idx], [=](auto x) { return x; }); });
  auto k = ctg::kernel<"bare_values">([=](auto a, auto d, auto e, auto c) {
    return ctg::range(a.size(), [=](auto i) {
      return ctg::block(d[i] = read(a, i) + 1.0,
                        e[i] = ctg::let((i + 1) % 3, [=](auto j) { return a[j]; }) * 3.0,
                        c[i] = ctg::let(ctg::vec(a[i], 2.0 * a[i] * a[i]), [=](auto v) { return v[1_c]; }));
    });
  });
  k(a, d, e, c);
  d.grad().fill(1.0), e.grad().fill(1.0), c.grad().fill(1.0);
  k.grad(a, d, e, c);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    double const ai = av[std::size_t(i)];
    CHECK(d.at(i) == Approx(ai * ai + 1.0));
    CHECK(e.at(i) == Approx(3.0 * av[std::size_t((i + 1) % 3)]));
    CHECK(c.at(i) == Approx(2.0 * ai * ai));
    // d: 2 a_i; e: element i is read by iteration i - 1, times 3; c: 4 a_i.
    CHECK(a.grad().at(i) == Approx(2.0 * ai + 3.0 + 4.0 * ai));
  }
}

// A local whose every read lies in an if_ arm or a select side not taken
// passes nothing to the expression that computed it: sqrt(x) at x < 0 is a
// NaN whose partial, times the local's zero adjoint, made the gradient NaN.
// A read that ran with a zero partial still passes 0 * inf on (docs/02).
// The carried loop makes the offload interleave iterations on the CPU, with
// lanes of both kinds in one group.
TEST_CASE("a local that only a branch not taken reads passes no adjoint: no NaN from its unused value") {
  int const n = 37;
  std::vector<double> xv(n);
  for (int i = 0; i < n; ++i) xv[std::size_t(i)] = (i % 3 == 0 ? -0.5 : 0.25) * (1.0 + 0.1 * i);
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"}), z({n}, {.name = "z"}),
      w({n}, {.name = "w"});
  x.copy_from(xv);
  auto k = ctg::kernel<"guarded_roots">([](auto x, auto y, auto z, auto w) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(ctg::sqrt(x[i]), x[i], [=](auto r, auto acc) {
        return ctg::block(ctg::if_(x[i] > 0.0, y[i] = r * 3.0 + x[i], y[i] = x[i]),
                          z[i] = ctg::select(x[i] > 0.0, r, 0.0) + x[i],
                          ctg::range(3, [=](auto) { return acc = acc * 0.5 + ctg::select(x[i] > 0.0, r, 1.0); }),
                          w[i] = acc);
      });
    });
  });
  k(x, y, z, w);
  y.grad().fill(1.0), z.grad().fill(1.0), w.grad().fill(1.0);
  k.grad(x, y, z, w);
  for (int i = 0; i < n; ++i) {
    CAPTURE(i);
    double const v = xv[std::size_t(i)];
    // y: 1.5 / sqrt(x) + 1 or 1; z: 0.5 / sqrt(x) + 1 or 1; w = x / 8 + (1 + 1/2 + 1/4) r or + 7/4.
    double const root = v > 0 ? 0.5 / std::sqrt(v) : 0.0;
    CHECK(x.grad().at(i) == Approx((3 * root + 1) + (root + 1) + (0.125 + 1.75 * root)));
  }
}
