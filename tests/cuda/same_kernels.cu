// The same kernels on host and device fields: forward values, gradients and
// tangents must agree (up to the order of floating-point atomics).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <ctgrad/ctgrad.hpp>
#include <vector>

using namespace ctg::literals;

namespace {

template <class F>
auto on_device(F const& f) {
  return f.clone(ctg::device);
}

// The largest relative difference between two arrays, reported once (with
// where it is) rather than once per element.
template <class T>
void check_close(std::vector<T> const& a, std::vector<T> const& b, double tol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  std::size_t where = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double err = std::abs(double(a[i]) - double(b[i])) / (1.0 + std::abs(double(b[i])));
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();  // a NaN must not pass
    if (err > worst || (where == 0 && err == worst)) worst = err, where = i;
  }
  INFO("worst at " << where << ": " << double(a[where]) << " vs " << double(b[where]));
  CHECK(worst <= tol);
}

}  // namespace

TEST_CASE("map: forward and adjoint on the device match the host") {
  int const n = 1 << 20;
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  std::vector<float> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001f * float(i % 3000) - 1.0f, seeds[i] = 1.0f + float(i % 7);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  auto dx = on_device(x), dy = on_device(y);
  dy.grad().copy_from(seeds);
  auto k = ctg::kernel<"map">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i] + ctg::exp(x[i] * 0.5f); });
  });
  k(x, y);
  k(dx, dy);
  check_close(dy.to_vector(), y.to_vector(), 1e-5);
  k.grad(x, y);
  k.grad(dx, dy);
  check_close(dx.grad().to_vector(), x.grad().to_vector(), 1e-5);
  check_close(dy.grad().to_vector(), std::vector<float>(n, 0.0f), 0);  // stores clear their gradient
}

TEST_CASE("reduction and scatter: atomics on the device") {
  int const n = 1 << 18;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"});
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss"});
  ctg::field<int, 1> bucket({n}, {.name = "bucket"});
  ctg::field<double, 1, ctg::grad> hist({64}, {.name = "hist"});
  std::vector<double> xs(n);
  std::vector<int> bs(n);
  for (int i = 0; i < n; ++i) xs[i] = std::sin(0.01 * i), bs[i] = (i * 7919) % 64;
  x.copy_from(xs);
  bucket.copy_from(bs);
  auto dx = on_device(x);
  auto dloss = on_device(loss);
  auto dbucket = on_device(bucket);
  auto dhist = on_device(hist);
  auto k = ctg::kernel<"reduce">([](auto x, auto loss, auto bucket, auto hist) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(loss() += x[i] * x[i], hist[bucket[i]] += ctg::tanh(x[i]));
    });
  });
  k(x, loss, bucket, hist);
  k(dx, dloss, dbucket, dhist);
  CHECK(dloss.to_vector()[0] == doctest::Approx(loss.at()).epsilon(1e-10));
  check_close(dhist.to_vector(), hist.to_vector(), 1e-10);
  loss.grad().fill(1.0);
  dloss.grad().fill(1.0);
  std::vector<double> hseed(64);
  for (int b = 0; b < 64; ++b) hseed[b] = 0.5 + b;
  hist.grad().copy_from(hseed);
  dhist.grad().copy_from(hseed);
  k.grad(x, loss, bucket, hist);
  k.grad(dx, dloss, dbucket, dhist);
  auto g = dx.grad().to_vector();
  for (int i = 0; i < n; i += 997) {
    double const t = std::tanh(xs[i]);
    CHECK(g[i] == doctest::Approx(2 * xs[i] + hseed[bs[i]] * (1 - t * t)).epsilon(1e-10));
  }
}

TEST_CASE("nested carried recurrence: the adstack on the device") {
  int const n = 4096;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<int, 0> steps({}, {.name = "steps"});
  steps.at() = 24;
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.2 + 0.5 * std::sin(0.37 * i);
  x.copy_from(xs);
  y.grad().fill(1.0);
  auto dx = on_device(x), dy = on_device(y);
  auto dsteps = on_device(steps);
  dy.grad().fill(1.0);
  // The loop sits in a value-returning func (its name travels in the kernel's type).
  auto iterate = ctg::func<"iterate">([](auto x0, auto steps) {
    return ctg::let(x0, [=](auto v) {
      return ctg::block(ctg::range(steps(), [=](auto) { return v = ctg::sin(v) * 1.3 + x0 * 0.2; }), ctg::result(v));
    });
  });
  auto k = ctg::kernel<"recurrence">([=](auto x, auto y, auto steps) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = iterate(x[i], steps); });
  });
  k(x, y, steps);
  k(dx, dy, dsteps);
  check_close(dy.to_vector(), y.to_vector(), 1e-12);
  k.grad(x, y, steps);
  k.grad(dx, dy, dsteps);
  check_close(dx.grad().to_vector(), x.grad().to_vector(), 1e-12);
}

TEST_CASE("while_ with an explicit adstack capacity; overflow raises") {
  int const n = 1000;
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.5f + 0.001f * float(i);
  x.copy_from(xs);
  auto body = [](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::while_(v < 10.0f, v = v * v + 1.0f), y[i] = v);
      });
    });
  };
  auto roomy = ctg::kernel<"roomy", ctg::adstack_capacity<16>>(body);
  auto tight = ctg::kernel<"tight", ctg::adstack_capacity<1>>(body);
  auto dx = on_device(x), dy = on_device(y);
  y.grad().fill(1.0f);
  dy.grad().fill(1.0f);
  roomy(x, y);
  roomy(dx, dy);
  roomy.grad(x, y);
  roomy.grad(dx, dy);
  check_close(dx.grad().to_vector(), x.grad().to_vector(), 1e-6);
  CHECK_THROWS_AS(tight.grad(dx, dy), ctg::autodiff_error);
}

TEST_CASE("vector elements, serial offloads and tangents on the device") {
  int const n = 512;
  using V3 = Eigen::Vector3f;
  ctg::field<V3, 1, ctg::grad | ctg::dual> p({n}, {.name = "p"});
  ctg::field<float, 1, ctg::grad | ctg::dual> e({n}, {.name = "e"});
  ctg::field<float, 0, ctg::grad | ctg::dual> total({}, {.name = "total"});
  std::vector<V3> ps(n);
  for (int i = 0; i < n; ++i) ps[i] = V3(std::cos(0.1f * i), std::sin(0.2f * i), 0.01f * i);
  p.copy_from(ps);
  auto dp = on_device(p);
  auto de = on_device(e);
  auto dtotal = on_device(total);
  auto k = ctg::kernel<"energy">([](auto p, auto e, auto total) {
    return ctg::block(ctg::range(p.size(), [=](auto i) {
                        return e[i] = ctg::norm(ctg::cross(p[i], ctg::vec(0.0f, 0.0f, 1.0f))) + p[i][2_c] * p[i][2_c];
                      }),
                      total() = 0.0f, ctg::serial_range(p.size(), [=](auto i) { return total() = total() + e[i]; }));
  });
  k(p, e, total);
  k(dp, de, dtotal);
  CHECK(dtotal.to_vector()[0] == doctest::Approx(total.at()).epsilon(1e-4));
  total.grad().fill(1.0f);
  dtotal.grad().fill(1.0f);
  k.grad(p, e, total);
  k.grad(dp, de, dtotal);
  auto hg = p.grad().to_vector(), dg = dp.grad().to_vector();
  for (int i = 0; i < n; ++i) CHECK((hg[i] - dg[i]).norm() < 1e-4f * (1 + hg[i].norm()));
  std::vector<V3> dir(n, V3(1, 0.5f, -0.25f));
  p.dual().copy_from(dir);
  dp.dual().copy_from(dir);
  k.fwd(p, e, total);
  k.fwd(dp, de, dtotal);
  CHECK(dtotal.dual().to_vector()[0] == doctest::Approx(total.dual().at()).epsilon(1e-4));
}

TEST_CASE("mass-spring scatter with vector locals: forward and adjoint on the device match the host") {
  using vec2 = Eigen::Vector2f;
  // More springs than a launch has threads: each thread runs several iterations.
  int const masses = 1 << 20, springs = 1 << 22;
  ctg::field<vec2, 1, ctg::grad> x({masses}, {.name = "x"}), f({masses}, {.name = "f"});
  ctg::field<int, 1> a({springs}, {.name = "a"}), b({springs}, {.name = "b"});
  ctg::field<float, 1, ctg::grad> rest({springs}, {.name = "rest"});
  std::vector<vec2> xs(masses), seed(masses);
  std::vector<int> as(springs), bs(springs);
  unsigned state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < masses; ++i) xs[std::size_t(i)] = vec2(float(i % 1024), float(i / 1024));
  for (int s = 0; s < springs; ++s) {
    as[std::size_t(s)] = int(next() % masses);
    bs[std::size_t(s)] = (as[std::size_t(s)] + 1 + int(next() % 64)) % masses;
  }
  for (int i = 0; i < masses; ++i) seed[std::size_t(i)] = vec2(std::sin(0.1f * float(i)), std::cos(0.3f * float(i)));
  x.copy_from(xs);
  a.copy_from(as);
  b.copy_from(bs);
  rest.fill(1.0f);
  auto dx = on_device(x);
  auto df = on_device(f);
  auto drest = on_device(rest);
  auto da = on_device(a);
  auto db = on_device(b);
  auto k = ctg::kernel<"springs">([](auto x, auto a, auto b, auto rest, auto f, float stiffness) {
    return ctg::range(a.size(), [=](auto s) {
      return ctg::let(x[a[s]] - x[b[s]], [=](auto d) {
        return ctg::let(ctg::norm(d), [=](auto len) {
          return ctg::let(d * (-stiffness * (len - rest[s]) / len), [=](auto force) {
            return ctg::block(f[a[s]] += force, f[b[s]] -= force);
          });
        });
      });
    });
  });
  k(x, a, b, rest, f, 10.0f);
  k(dx, da, db, drest, df, 10.0f);
  auto hf = f.to_vector(), dfv = df.to_vector();
  double worst = 0;
  for (int i = 0; i < masses; ++i) {
    double const e = double((hf[std::size_t(i)] - dfv[std::size_t(i)]).norm()) / (1 + hf[std::size_t(i)].norm());
    worst = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(worst, e);
  }
  CHECK(worst < 1e-4);
  f.grad().copy_from(seed);
  df.grad().copy_from(seed);
  k.grad(x, a, b, rest, f, 10.0f);
  k.grad(dx, da, db, drest, df, 10.0f);
  auto hg = x.grad().to_vector(), dg = dx.grad().to_vector();
  int nan_x = 0, nan_rest = 0;
  for (auto const& v : dg) nan_x += std::isnan(v(0)) ? 1 : 0;
  for (float v : drest.grad().to_vector()) nan_rest += std::isnan(v) ? 1 : 0;
  INFO("NaN coefficients on the device: x.grad " << nan_x << ", rest.grad " << nan_rest);
  worst = 0;
  int where = 0;
  for (int i = 0; i < masses; ++i) {
    double e = double((hg[std::size_t(i)] - dg[std::size_t(i)]).norm()) / (1 + hg[std::size_t(i)].norm());
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
    if (e > worst) worst = e, where = i;
  }
  CHECK(nan_x == 0);
  CHECK(nan_rest == 0);
  INFO("worst at mass " << where << ": host (" << hg[std::size_t(where)](0) << ", " << hg[std::size_t(where)](1)
                        << ") device (" << dg[std::size_t(where)](0) << ", " << dg[std::size_t(where)](1) << ")");
  CHECK(worst < 1e-4);
  check_close(drest.grad().to_vector(), rest.grad().to_vector(), 1e-4);
}

TEST_CASE("errors on the device: mixed memory spaces, indices out of range") {
  ctg::field<float, 1> h({4}, {.name = "h"});
  ctg::field<float, 1> d({4}, {.name = "d", .space = ctg::device});
  auto copy = ctg::kernel<"copy">([](auto a, auto b) { return ctg::range(4, [=](auto i) { return b[i] = a[i]; }); });
  CHECK_THROWS_AS(copy(h, d), ctg::launch_error);
#if CTG_BOUNDS_CHECK
  auto shifted = ctg::kernel<"shifted">([](auto a, auto b) { return ctg::range(4, [=](auto i) { return b[i] = a[i + 1]; }); });
  ctg::field<float, 1> d2({4}, {.name = "d2", .space = ctg::device});
  CHECK_THROWS_AS(shifted(d, d2), ctg::index_error);
#endif
}

TEST_CASE("a tape records device launches and replays them") {
  int const n = 256;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = ctg::device}), y({n}, {.name = "y", .space = ctg::device});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss", .space = ctg::device});
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.01 * i;
  x.copy_from(xs);
  auto square = ctg::kernel<"square">([](auto x, auto y) { return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; }); });
  auto total = ctg::kernel<"total">([](auto y, auto loss) { return ctg::range(y.size(), [=](auto i) { return loss() += y[i]; }); });
  {
    ctg::tape tape(loss);
    square(x, y);
    total(y, loss);
    CHECK(tape.size() == 2);
    tape.backward();
  }
  auto g = x.grad().to_vector();
  for (int i = 0; i < n; ++i) CHECK(g[std::size_t(i)] == doctest::Approx(2 * xs[std::size_t(i)]));
}
