// docs/01-kernels.md: every construct of the kernel language, each run and
// checked against a value computed on the host.
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Dense>
#include <cmath>
#include <vector>

#include "check.hpp"

using namespace ctg::literals;  // 3_c

int main() {
  // [snippet: kernel]
  // Parameters: field handles (auto) and plain numbers (int, double, ...).
  auto scale = ctg::kernel<"scale">([](auto in, auto out, double factor) {
    return ctg::range(in.size(), [=](auto i) { return out[i] = in[i] * factor; });
  });
  ctg::field<float, 1> in(8), out(8);
  in.fill(2.0f);
  scale(in, out, 1.5);  // out[i] = 3 for every i
  // [snippet end]
  check(out.at(7) == 3.0f, "scale");

  // [snippet: access]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  ctg::field<double, 0> s;                      // s()
  ctg::field<double, 1> v(5);                   // v[i] or v(i)
  ctg::field<double, 2> m(3, 4);                // m(i, j)
  ctg::field<Eigen::Vector3d, 1> pts(2);        // pts[i][k]: component k
  ctg::field<Eigen::Matrix2d, 0> mat;           // mat()(r, c)
  auto access = ctg::kernel<"access">([](auto s, auto v, auto m, auto pts, auto mat) {
    return ctg::block(
        s() = 2.0,
        ctg::range(v.size(), [=](auto i) { return v[i] = v(i) + 1.0; }),
        ctg::ndrange(m.shape(0_c), m.shape(1_c), [=](auto i, auto j) { return m(i, j) = i * 10 + j; }),
        ctg::range(pts.size(), [=](auto i) { return pts[i][2_c] = s() * 3.0; }),
        mat()(0_c, 1_c) = 7.0);
  });
  access(s, v, m, pts, mat);
  // [snippet end]
  check(v.at(4) == 1.0 && m.at(2, 3) == 23.0 && pts.at(1).z() == 6.0 && mat.at()(0, 1) == 7.0, "access");

  // [snippet: stores]
  ctg::field<double, 1> hist(4);
  ctg::field<double, 0> lo, hi, sum;
  lo.at() = 1e9, hi.at() = -1e9;
  auto reduce = ctg::kernel<"reduce">([](auto hist, auto lo, auto hi, auto sum, int n) {
    return ctg::range(n, [=](auto i) {
      auto const x = ctg::cast<double>(i);
      return ctg::block(hist[i % 4] += 1.0,   // += and -= on field elements are atomic
                        sum() -= x,
                        ctg::atomic_min(lo(), x), ctg::atomic_max(hi(), x));
    });
  });
  reduce(hist, lo, hi, sum, 1000);
  // [snippet end]
  check(hist.at(3) == 250 && lo.at() == 0 && hi.at() == 999 && sum.at() == -999 * 1000 / 2, "stores");

  // [snippet: locals]
  ctg::field<double, 1> xs(4), ys(4);
  for (int i = 0; i < 4; ++i) xs.at(i) = i;
  // let(init..., [=](auto a, auto b...) { ... }): mutable locals, scoped by the lambda.
  auto poly = ctg::kernel<"poly">([](auto xs, auto ys) {
    return ctg::range(xs.size(), [=](auto i) {
      return ctg::let(xs[i], 0.0, [=](auto x, auto acc) {
        return ctg::block(acc = x * x, acc += 2 * x, acc *= 0.5, x = x - 1, ys[i] = acc + x);
      });
    });
  });
  poly(xs, ys);  // ys[i] = (x^2 + 2x) / 2 + x - 1
  // A let can also be a value: a block ending in ctg::result(e).
  auto cube = ctg::kernel<"cube">([](auto xs, auto ys) {
    return ctg::range(xs.size(), [=](auto i) {
      return ys[i] = 1.0 + ctg::let(xs[i], [=](auto x) { return ctg::block(x = x * x * x, ctg::result(x)); });
    });
  });
  // [snippet end]
  check(ys.at(3) == 9.5, "let");
  cube(xs, ys);
  check(ys.at(2) == 9.0, "let result");

  // [snippet: control]
  ctg::field<int, 1> n(4), steps(4);
  ctg::field<double, 1> sel(4);
  n.copy_from(std::vector<int>{1, 6, 7, 27});
  auto collatz = ctg::kernel<"collatz">([](auto n, auto steps, auto sel) {
    return ctg::range(n.size(), [=](auto i) {
      return ctg::let(n[i], 0, [=](auto v, auto count) {
        return ctg::block(
            ctg::while_(v != 1, ctg::block(ctg::if_(v % 2 == 0, v = v / 2, v = 3 * v + 1), count += 1)),
            steps[i] = count,
            ctg::if_(count > 100, steps[i] = -1),                       // if_ without else
            sel[i] = ctg::select(count > 10, 1.0, ctg::cast<double>(count)));  // evaluates one side only
      });
    });
  });
  collatz(n, steps, sel);
  // [snippet end]
  check(steps.at(0) == 0 && steps.at(1) == 8 && steps.at(2) == 16 && steps.at(3) == -1, "while_ / if_");
  check(sel.at(1) == 8.0 && sel.at(2) == 1.0, "select");

  // [snippet: loops]
  ctg::field<double, 2> g(3, 4);
  ctg::field<double, 1> row(3), prefix(6), tri(5);
  auto loops = ctg::kernel<"loops">([](auto g, auto row, auto prefix, auto tri) {
    return ctg::block(
        // Top-level loops are parallel: each is one offload, run in order.
        ctg::each(g, [=](auto i, auto j) { return g(i, j) = i + 0.5 * j; }),
        ctg::range(1, 6, [=](auto i) { return prefix[i] = 1.0; }),
        // serial_range: in order, one thread; iterations may read earlier ones.
        ctg::serial_range(1, 6, [=](auto i) { return prefix[i] = prefix[i - 1] + prefix[i]; }),
        ctg::range(row.size(), [=](auto i) {
          return ctg::let(0.0, [=](auto acc) {
            return ctg::block(
                // static_range<N>: unrolled at compile time, j is ctg::c<0>, ctg::c<1>, ...
                ctg::static_range<4>([=](auto j) { return acc += g(i, j); }),
                row[i] = acc);
          });
        }),
        ctg::range(tri.size(), [=](auto i) {
          return ctg::let(0.0, [=](auto acc) {
            // A nested loop runs serially inside its iteration; bounds may use outer indices.
            return ctg::block(ctg::range(i + 1, [=](auto j) { return acc += ctg::cast<double>(j); }), tri[i] = acc);
          });
        }));
  });
  loops(g, row, prefix, tri);
  // [snippet end]
  check(row.at(2) == 4 * 2 + 0.5 * 6 && prefix.at(5) == 5.0 && tri.at(4) == 10.0, "loops");

  // [snippet: funcs]
  // A func is a named piece of kernel code, inlined where it is called.
  auto smoothstep = ctg::func<"smoothstep">([](auto t) {
    return ctg::let(ctg::clamp(t, 0.0, 1.0), [=](auto c) { return ctg::block(ctg::result(c * c * (3.0 - 2.0 * c))); });
  });
  auto put = ctg::func<"put">([](auto out, auto i, auto value) { return out[i] = value; });  // a statement
  auto ramp = ctg::kernel<"ramp">([=](auto out) {
    return ctg::range(out.size(), [=](auto i) { return put(out, i, smoothstep(ctg::cast<double>(i) / 4.0)); });
  });
  ctg::field<double, 1> r(6);
  ramp(r);
  // [snippet end]
  check(r.at(0) == 0.0 && r.at(2) == 0.5 && r.at(5) == 1.0, "funcs");

  // [snippet: numbers]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  ctg::field<float, 1> f(3);
  ctg::field<int, 1> k(3);
  auto numbers = ctg::kernel<"numbers">([](auto f, auto k) {
    return ctg::block(ctg::range(3, [=](auto i) {
                        return ctg::block(
                            f[i] = f[i] * 0.5 + 1,                // plain numbers take the type they meet: float
                            k[i] = i / 2 + 7 % 4,                 // integer / and % as in C++
                            f[i] += ctg::cast<float>(i) * 0.25f,  // cast<T>: conversions are explicit
                            k[i] += ctg::cast<int>(ctg::floor(f[i] * 2.0f)));
                      }),
                      f[2_c] = f[ctg::c<2>] * 2);  // 2_c and ctg::c<2>: compile-time indices
  });
  numbers(f, k);
  // [snippet end]
  check(f.at(1) == 1.25f && k.at(1) == 3 + 2 && f.at(2) == 3.0f && k.at(2) == 1 + 3 + 3, "numbers");

  // [snippet: math]
  ctg::field<double, 1> y(8);
  ctg::field<double, 0> x0;
  x0.at() = 0.3;
  auto math = ctg::kernel<"math">([](auto y, auto x0) {
    auto const x = x0();
    return ctg::block(y[0] = ctg::sin(x) + ctg::cos(x) + ctg::tan(x) + ctg::tanh(x),
                      y[1] = ctg::asin(x) + ctg::acos(x) + ctg::atan(x) + ctg::atan2(x, 2.0),
                      y[2] = ctg::exp(x) + ctg::log(x) + ctg::sqrt(x) + ctg::rsqrt(x),
                      y[3] = ctg::pow(x, 2.5) + ctg::abs(-x) + ctg::sign(-x),
                      y[4] = ctg::min(x, 0.2) + ctg::max(x, 0.2) + ctg::clamp(3 * x, 0.0, 1.0),
                      y[5] = ctg::floor(10 * x) + ctg::ceil(10 * x) + ctg::round(10 * x),
                      y[6] = ctg::stop_grad(x * x));  // the value, with no gradient through it
  });
  math(y, x0);
  // [snippet end]
  check(close(y.at(3), std::pow(0.3, 2.5) + 0.3 - 1) && close(y.at(5), 3 + 3 + 3) && close(y.at(4), 0.2 + 0.3 + 0.9),
        "math");

  // [snippet: eigen]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  using V3 = Eigen::Vector3d;
  using M3 = Eigen::Matrix3d;
  ctg::field<V3, 1> a(2), b(2), c(2);
  ctg::field<M3, 1> o(2);
  ctg::field<double, 2> s2(2, 4);
  auto linalg = ctg::kernel<"linalg">([](auto a, auto b, auto c, auto o, auto s2) {
    return ctg::range(a.size(), [=](auto i) {
      return ctg::let(ctg::mat<3, 3>(2.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), [=](auto m) {  // row by row
        return ctg::block(
            c[i] = m * a[i] + 2.0 * ctg::cross(a[i], b[i]) - ctg::vec(1.0, 0.0, 0.0),  // * is the matrix product
            o[i] = ctg::outer(a[i], b[i]) + ctg::transpose(m) * ctg::inverse(m),
            s2(i, 0_c) = ctg::dot(a[i], b[i]), s2(i, 1_c) = ctg::norm(a[i]) + ctg::norm_sqr(b[i]),
            s2(i, 2_c) = ctg::det(m) + ctg::trace(m), s2(i, 3_c) = m(0_c, 0_c) * a[i][1_c]);
      });
    });
  });
  // [snippet end]
  a.at(0) = V3(1, 2, 3), a.at(1) = V3(-1, 0.5, 2), b.at(0) = V3(0.5, -1, 4), b.at(1) = V3(3, 2, 1);
  linalg(a, b, c, o, s2);
  M3 mm = M3::Identity();
  mm(0, 0) = 2;
  for (int i = 0; i < 2; ++i) {
    V3 const x = a.at(i), z = b.at(i);
    check((c.at(i) - (mm * x + 2.0 * x.cross(z) - V3(1, 0, 0))).norm() < 1e-12, "eigen c");
    check((o.at(i) - (x * z.transpose() + M3::Identity())).norm() < 1e-12, "eigen o");
    check(close(s2.at(i, 0), x.dot(z)) && close(s2.at(i, 1), x.norm() + z.squaredNorm()), "eigen dot/norm");
    check(close(s2.at(i, 2), 2.0 + 4.0) && close(s2.at(i, 3), 2 * x(1)), "eigen det/trace/component");
  }
  return 0;
}
