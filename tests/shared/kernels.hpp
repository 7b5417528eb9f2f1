// Kernels run in one memory space, checked against closed forms and plain
// loops written here: an element-wise map, a reduction and a scatter with
// atomics, a select with casts and stop_grad, the op table's less common
// functions, a nested carried recurrence and a while_ loop on the adstack,
// vector elements with a serial offload and tangents, a mass-spring scatter
// with vector locals, the launch errors, a tape of two launches, guards
// that short-circuit, a chain of operations 42 levels tall. The tolerances
// allow for float rounding and, on the device, for contracted multiply-adds
// and another order of the atomic sums.
#pragma once
#include <cstdint>
#include <utility>

#include "backend_support.hpp"

namespace backend_tests {

// y = sin(x) x + exp(x / 2) over a million floats (a quarter of that on the
// host); dy/dx = cos(x) x + sin(x) + exp(x / 2) / 2.
inline void map_forward_and_adjoint(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 20, 1 << 18);
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<float> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001f * float(i % 3000) - 1.0f, seeds[i] = 1.0f + float(i % 7);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  auto k = ctg::kernel<"map">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i] + ctg::exp(x[i] * 0.5f); });
  });
  k(x, y);
  k.grad(x, y);
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double const v = xs[i];
    want_y[i] = std::sin(v) * v + std::exp(0.5 * v);
    want_grad[i] = seeds[i] * (std::cos(v) * v + std::sin(v) + 0.5 * std::exp(0.5 * v));
  }
  check_close(y.to_vector(), want_y, 1e-5);
  check_close(x.grad().to_vector(), want_grad, 1e-5);
  check_close(y.grad().to_vector(), std::vector<float>(n, 0.0f), 0);  // stores clear their gradient
}

// y = select(x > 0, float(double(x) 3) x, sin(x)) + stop_grad(x) x: the
// adjoint records only the side a select takes, converts a cast's value from
// its operand's record, and passes stop_grad's value on without a gradient.
// dy/dx = (x > 0 ? 6 x : cos(x)) + x.
inline void select_cast_stop_grad(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 16, 1 << 14);
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<float> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001f * float(i % 2000) - 1.0f, seeds[i] = 1.0f + float(i % 5);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  auto k = ctg::kernel<"select_cast">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return y[i] = ctg::select(x[i] > 0.0f, ctg::cast<float>(ctg::cast<double>(x[i]) * 3.0) * x[i], ctg::sin(x[i])) +
                    ctg::stop_grad(x[i]) * x[i];
    });
  });
  k(x, y);
  k.grad(x, y);
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double const v = xs[i];
    want_y[i] = (v > 0 ? 3 * v * v : std::sin(v)) + v * v;
    want_grad[i] = seeds[i] * ((v > 0 ? 6 * v : std::cos(v)) + v);
  }
  check_close(y.to_vector(), want_y, 1e-5);
  check_close(x.grad().to_vector(), want_grad, 1e-5);
}

// The op table's hyperbolic, base-2 and base-10, cube-root and truncating
// rows and fmod in one expression of floats: each backend calls its own
// math library's function for each. dy/dx is the sum of their closed forms.
inline void more_math_functions(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 16, 1 << 14);
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<float> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001f * float(i % 2000) - 1.0f, seeds[i] = 1.0f + float(i % 3);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  auto k = ctg::kernel<"more_math">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return y[i] = ctg::sinh(x[i]) + ctg::cosh(0.5f * x[i]) + ctg::asinh(2.0f * x[i]) + ctg::atanh(0.5f * x[i]) +
                    ctg::exp2(x[i]) + ctg::log2(x[i] + 1.5f) + ctg::log10(x[i] + 1.5f) + ctg::cbrt(x[i] + 2.0f) +
                    ctg::trunc(3.0f * x[i]) + ctg::fmod(3.0f * x[i], 0.7f);
    });
  });
  k(x, y);
  k.grad(x, y);
  std::vector<double> want_y(n), want_grad(n);
  double const ln2 = std::log(2.0), ln10 = std::log(10.0);
  for (int i = 0; i < n; ++i) {
    double const v = xs[i];
    want_y[i] = std::sinh(v) + std::cosh(0.5 * v) + std::asinh(2 * v) + std::atanh(0.5 * v) + std::exp2(v) +
                std::log2(v + 1.5) + std::log10(v + 1.5) + std::cbrt(v + 2) + std::trunc(3 * v) +
                std::fmod(3.0f * xs[i], 0.7f);  // in float, as the kernel computes it: exact, jumps included
    double const c = std::cbrt(v + 2);
    want_grad[i] = seeds[i] * (std::cosh(v) + 0.5 * std::sinh(0.5 * v) + 2 / std::sqrt(4 * v * v + 1) +
                               0.5 / (1 - 0.25 * v * v) + ln2 * std::exp2(v) + 1 / ((v + 1.5) * ln2) +
                               1 / ((v + 1.5) * ln10) + 1 / (3 * c * c) + 3);
  }
  check_close(y.to_vector(), want_y, 1e-5);
  check_close(x.grad().to_vector(), want_grad, 1e-5);
}

// loss = sum x^2 and hist[bucket[i]] += tanh(x[i]): every thread adds into
// shared elements.
inline void reduction_and_scatter(ctg::memory_space space) {
  int const n = 1 << 18, buckets = 64;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space});
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss", .space = space});
  ctg::field<int, 1> bucket({n}, {.name = "bucket", .space = space});
  ctg::field<double, 1, ctg::grad> hist({buckets}, {.name = "hist", .space = space});
  std::vector<double> xs(n);
  std::vector<int> bs(n);
  for (int i = 0; i < n; ++i) xs[i] = std::sin(0.01 * i), bs[i] = (i * 7919) % buckets;
  x.copy_from(xs);
  bucket.copy_from(bs);
  auto k = ctg::kernel<"reduce">([](auto x, auto loss, auto bucket, auto hist) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(loss() += x[i] * x[i], hist[bucket[i]] += ctg::tanh(x[i]));
    });
  });
  k(x, loss, bucket, hist);
  double want_loss = 0;
  std::vector<double> want_hist(buckets, 0.0);
  for (int i = 0; i < n; ++i) want_loss += xs[i] * xs[i], want_hist[bs[i]] += std::tanh(xs[i]);
  CHECK(loss.to_vector()[0] == doctest::Approx(want_loss).epsilon(1e-10));
  check_close(hist.to_vector(), want_hist, 1e-10);

  loss.grad().fill(1.0);
  std::vector<double> hseed(buckets);
  for (int b = 0; b < buckets; ++b) hseed[b] = 0.5 + b;
  hist.grad().copy_from(hseed);
  k.grad(x, loss, bucket, hist);
  std::vector<double> want_grad(n);
  for (int i = 0; i < n; ++i) {
    double const t = std::tanh(xs[i]);
    want_grad[i] = 2 * xs[i] + hseed[bs[i]] * (1 - t * t);
  }
  check_close(x.grad().to_vector(), want_grad, 1e-10);
}

// v <- 1.3 sin(v) + 0.2 x0, 24 times, in a value-returning func: the adjoint
// pops each v from the adstack. dv'/dx0 = 1.3 cos(v) dv/dx0 + 0.2, carried
// forward by hand.
inline void nested_carried_recurrence(ctg::memory_space space) {
  int const n = 4096, step_count = 24;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  ctg::field<int, 0> steps({}, {.name = "steps", .space = space});
  steps.fill(step_count);
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.2 + 0.5 * std::sin(0.37 * i);
  x.copy_from(xs);
  y.grad().fill(1.0);
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
  k.grad(x, y, steps);
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double v = xs[i], dv = 1.0;
    for (int s = 0; s < step_count; ++s) {
      dv = 1.3 * std::cos(v) * dv + 0.2;
      v = std::sin(v) * 1.3 + xs[i] * 0.2;
    }
    want_y[i] = v, want_grad[i] = dv;
  }
  check_close(y.to_vector(), want_y, 1e-12);
  check_close(x.grad().to_vector(), want_grad, 1e-12);
}

// v <- v^2 + 1 while v < 10 (two to four times for x in [0.5, 1.5)): the
// adstack holds as many values as the loop ran, so a capacity of one slot
// overflows.
inline void while_with_adstack_capacity(ctg::memory_space space) {
  int const n = 1000;
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.5f + 0.001f * float(i);
  auto body = [](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) { return ctg::block(ctg::while_(v < 10.0f, v = v * v + 1.0f), y[i] = v); });
    });
  };
  auto roomy = ctg::kernel<"roomy", ctg::adstack_capacity<16>>(body);
  auto tight = ctg::kernel<"tight", ctg::adstack_capacity<1>>(body);
  auto run = [&](ctg::memory_space where) {
    ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = where}), y({n}, {.name = "y", .space = where});
    x.copy_from(xs);
    y.grad().fill(1.0f);
    roomy(x, y);
    roomy.grad(x, y);
    CHECK_THROWS_AS(tight.grad(x, y), ctg::autodiff_error);
    return std::pair{y.to_vector(), x.grad().to_vector()};
  };
  auto const [y, grad] = run(space);
  // The loop in float, as the kernel runs it, and the product of the
  // derivatives 2 v of its steps. A contracted v * v + 1 (the device's
  // multiply-add) moves each step by an ulp, which the squarings double.
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    float v = xs[i];
    double g = 1.0;
    while (v < 10.0f) g *= 2.0 * double(v), v = v * v + 1.0f;
    want_y[i] = v, want_grad[i] = g;
  }
  check_close(y, want_y, 1e-5);
  check_close(grad, want_grad, 1e-5);
  if (space == ctg::device) {
    // The host's run of the same kernel rounds the same steps: closer than the reference.
    auto const [host_y, host_grad] = run(ctg::host);
    check_close(y, host_y, 1e-6);
    check_close(grad, host_grad, 1e-6);
  }
}

// e[i] = |p[i] x z| + p[i].z^2 = sqrt(px^2 + py^2) + pz^2 and a serial sum
// total = sum e: the gradient per point is (px / r, py / r, 2 pz), the
// tangent of total along a direction the dot product with it.
inline void vector_elements_serial_offload_tangent(ctg::memory_space space) {
  int const n = 512;
  using V3 = Eigen::Vector3f;
  ctg::field<V3, 1, ctg::grad | ctg::dual> p({n}, {.name = "p", .space = space});
  ctg::field<float, 1, ctg::grad | ctg::dual> e({n}, {.name = "e", .space = space});
  ctg::field<float, 0, ctg::grad | ctg::dual> total({}, {.name = "total", .space = space});
  std::vector<V3> ps(n);
  for (int i = 0; i < n; ++i) ps[i] = V3(std::cos(0.1f * i), std::sin(0.2f * i), 0.01f * i);
  p.copy_from(ps);
  auto k = ctg::kernel<"energy">([](auto p, auto e, auto total) {
    using namespace ctg::literals;
    return ctg::block(ctg::range(p.size(), [=](auto i) {
                        return e[i] = ctg::norm(ctg::cross(p[i], ctg::vec(0.0f, 0.0f, 1.0f))) + p[i][2_c] * p[i][2_c];
                      }),
                      total() = 0.0f, ctg::serial_range(p.size(), [=](auto i) { return total() = total() + e[i]; }));
  });
  std::vector<double> want_e(n);
  std::vector<Eigen::Vector3d> want_grad(n);
  Eigen::Vector3d const direction(1, 0.5, -0.25);
  double want_total = 0, want_tangent = 0;
  for (int i = 0; i < n; ++i) {
    Eigen::Vector3d const q = ps[i].cast<double>();
    double const r = std::hypot(q(0), q(1));
    want_e[i] = r + q(2) * q(2);
    want_grad[i] = Eigen::Vector3d(q(0) / r, q(1) / r, 2 * q(2));
    want_total += want_e[i];
    want_tangent += want_grad[i].dot(direction);
  }
  k(p, e, total);
  check_close(e.to_vector(), want_e, 1e-5);
  CHECK(total.to_vector()[0] == doctest::Approx(want_total).epsilon(1e-4));
  total.grad().fill(1.0f);
  k.grad(p, e, total);
  check_close(p.grad().to_vector(), want_grad, 1e-4);
  p.dual().copy_from(std::vector<V3>(n, direction.cast<float>()));
  k.fwd(p, e, total);
  CHECK(total.dual().to_vector()[0] == doctest::Approx(want_tangent).epsilon(1e-4));
}

// f[a[s]] += force, f[b[s]] -= force over four springs per mass, 4 M springs
// on the device (more than a launch has threads: each thread runs several),
// 256 K on the host, with force = -k (len - rest) d / len, d = x[a] - x[b],
// len = |d|.
inline void mass_spring_scatter(ctg::memory_space space) {
  using vec2 = Eigen::Vector2f;
  using vec2d = Eigen::Vector2d;
  int const masses = elements_for(space, 1 << 20, 1 << 16), springs = 4 * masses;
  float const stiffness = 10.0f;
  ctg::field<vec2, 1, ctg::grad> x({masses}, {.name = "x", .space = space});
  ctg::field<vec2, 1, ctg::grad> f({masses}, {.name = "f", .space = space});
  ctg::field<int, 1> a({springs}, {.name = "a", .space = space}), b({springs}, {.name = "b", .space = space});
  ctg::field<float, 1, ctg::grad> rest({springs}, {.name = "rest", .space = space});
  std::vector<vec2> xs(masses), seed(masses);
  std::vector<int> as(springs), bs(springs);
  std::uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < masses; ++i) xs[i] = vec2(float(i % 1024), float(i / 1024));
  for (int s = 0; s < springs; ++s) {
    as[s] = int(next() % masses);
    bs[s] = (as[s] + 1 + int(next() % 64)) % masses;
  }
  for (int i = 0; i < masses; ++i) seed[i] = vec2(std::sin(0.1f * float(i)), std::cos(0.3f * float(i)));
  x.copy_from(xs);
  a.copy_from(as);
  b.copy_from(bs);
  rest.fill(1.0f);
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
  k(x, a, b, rest, f, stiffness);
  f.grad().copy_from(seed);
  k.grad(x, a, b, rest, f, stiffness);

  // The forces and the adjoint by hand, in double. Seeded with w = seed[a] -
  // seed[b], spring s adds w . force to the loss, so
  //   d/dd    = -k (len - rest) / len w - k rest (w . d) d / len^3  (into x[a]; minus it into x[b])
  //   d/drest = k (w . d) / len.
  // Each sum's scale (the magnitudes it adds up) bounds the kernel's float
  // rounding, whatever the order of its atomics.
  std::vector<vec2d> want_f(masses, vec2d::Zero()), want_gx(masses, vec2d::Zero());
  std::vector<double> f_scale(masses, 0.0), gx_scale(masses, 0.0), want_grest(springs), grest_scale(springs);
  double const k_s = stiffness, r = 1.0;
  for (int s = 0; s < springs; ++s) {
    int const i = as[s], j = bs[s];
    vec2d const d = (xs[i] - xs[j]).cast<double>();
    vec2d const w = (seed[i] - seed[j]).cast<double>();
    double const len = d.norm();
    vec2d const force = d * (-k_s * (len - r) / len);
    vec2d const d_adjoint = -k_s * (len - r) / len * w - k_s * r * w.dot(d) * d / (len * len * len);
    want_f[i] += force, want_f[j] -= force;
    f_scale[i] += force.norm(), f_scale[j] += force.norm();
    want_gx[i] += d_adjoint, want_gx[j] -= d_adjoint;
    gx_scale[i] += d_adjoint.norm(), gx_scale[j] += d_adjoint.norm();
    want_grest[s] = k_s * w.dot(d) / len;
    grest_scale[s] = k_s * w.norm() * d.norm() / len;
  }
  // The largest error of a result relative to its scale, reported once.
  auto const check_scaled = [](auto const& got, auto const& want, std::vector<double> const& scale, double tol) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    std::size_t where = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double const e = relative_error(got[i], want[i], 1.0 + scale[i]);
      if (e > worst) worst = e, where = i;
    }
    INFO("worst at " << where << ": " << got[where] << " vs " << want[where] << " (scale " << scale[where] << ")");
    CHECK(worst <= tol);
  };
  check_scaled(f.to_vector(), want_f, f_scale, 1e-5);
  auto const gx = x.grad().to_vector();
  auto const grest = rest.grad().to_vector();
  int nan_x = 0, nan_rest = 0;
  for (auto const& v : gx) nan_x += v.hasNaN() ? 1 : 0;
  for (float v : grest) nan_rest += std::isnan(v) ? 1 : 0;
  CHECK(nan_x == 0);
  CHECK(nan_rest == 0);
  check_scaled(gx, want_gx, gx_scale, 1e-5);
  check_scaled(grest, want_grest, grest_scale, 1e-5);
}

// A launch whose fields lie in two memory spaces raises launch_error, and so
// does one whose kernel drops a statement it built (CTG-EXPR-010, before any
// work reaches the backend); an index out of range raises index_error (when
// bounds are checked).
inline void launch_errors(ctg::memory_space space) {
  ctg::field<float, 1> a({4}, {.name = "a", .space = space}), b({4}, {.name = "b", .space = space});
  auto copy = ctg::kernel<"copy">([](auto a, auto b) { return ctg::range(4, [=](auto i) { return b[i] = a[i]; }); });
  CHECK_NOTHROW(copy(a, b));
  auto drops = ctg::kernel<"drops">([](auto a, auto b) {
    return ctg::range(4, [=](auto i) {
      a[i] = 5.0f;  // built and dropped
      return b[i] = a[i];
    });
  });
  CHECK_THROWS_WITH_AS(drops(a, b), doctest::Contains("CTG-EXPR-010"), ctg::launch_error);
#if defined(CTG_HAS_CUDA)
  ctg::field<float, 1> elsewhere({4}, {.name = "elsewhere", .space = other_space(space)});
  CHECK_THROWS_AS(copy(a, elsewhere), ctg::launch_error);
  CHECK_THROWS_AS(copy(elsewhere, a), ctg::launch_error);
#else
  // Built without CUDA, a field cannot be in the other space: asking for it is the error.
  auto const field_elsewhere = [&] {
    return ctg::field<float, 1>({4}, {.name = "elsewhere", .space = other_space(space)});
  };
  CHECK_THROWS_AS(field_elsewhere(), ctg::launch_error);
#endif
#if CTG_BOUNDS_CHECK
  auto shifted = ctg::kernel<"shifted">([](auto a, auto b) {
    return ctg::range(4, [=](auto i) { return b[i] = a[i + 1]; });
  });
  CHECK_THROWS_AS(shifted(a, b), ctg::index_error);
#endif
}

// A component index computed at run time and out of range (here the loop
// index, 0..3, into vectors of 3 and matrices of 2 x 2) is an index_error
// naming the field, in the forward pass, the adjoint and the tangent, and
// nothing is written past an element (AddressSanitizer saw the writes past
// the buffer before the check). A constant index is CTG-EXPR-009.
inline void component_index_errors(ctg::memory_space space) {
#if CTG_BOUNDS_CHECK
  constexpr ctg::flags both = ctg::grad | ctg::dual;
  ctg::field<Eigen::Vector3d, 1, both> p({4}, {.name = "p", .space = space});
  ctg::field<Eigen::Matrix2d, 1> m({4}, {.name = "m", .space = space});
  ctg::field<double, 1, both> out({4}, {.name = "out", .space = space});
  p.fill(Eigen::Vector3d(1, 2, 3));
  m.fill(Eigen::Matrix2d::Identity());
  auto const names = [](char const* field) {
    std::string const whose = std::string("(an element of parameter #0 (field '") + field + "'";
    return doctest::Contains(doctest::String(whose.c_str()));
  };
  auto read = ctg::kernel<"read_component">([](auto p, auto out) {
    return ctg::range(4, [=](auto i) { return out[i] = 2.0 * p[i][i]; });
  });
  CHECK_THROWS_WITH_AS(read(p, out), names("p"), ctg::index_error);
  CHECK_THROWS_WITH_AS(read(p, out), doctest::Contains("component index (3) computed at run time is out of range for "
                                                       "a vector of 3 components"),
                       ctg::index_error);
  // The adjoint writes p's gradient at the same coefficient; it reads no
  // value the forward pass writes, so it runs without one.
  out.grad().fill(1.0);
  p.grad().fill(Eigen::Vector3d::Zero());
  CHECK_THROWS_WITH_AS(read.grad(p, out), names("p"), ctg::index_error);
  p.dual().fill(Eigen::Vector3d::Ones());
  CHECK_THROWS_WITH_AS(read.fwd(p, out), names("p"), ctg::index_error);

  auto write = ctg::kernel<"write_component">([](auto p) {
    return ctg::range(4, [=](auto i) { return p[i][i] += 10.0; });
  });
  CHECK_THROWS_WITH_AS(write(p), names("p"), ctg::index_error);
  std::vector<Eigen::Vector3d> const after = p.to_vector();
  CHECK(after[3] == Eigen::Vector3d(1, 2, 3));  // the iteration out of range wrote nothing
  CHECK(after[2] == Eigen::Vector3d(1, 2, 13));

  auto rows = ctg::kernel<"matrix_row">([](auto m, auto out) {
    return ctg::range(4, [=](auto i) { return out[i] = m[i](i, 0); });
  });
  CHECK_THROWS_WITH_AS(rows(m, out), doctest::Contains("component index (2, 0) computed at run time is out of range "
                                                       "for a 2 x 2 matrix (an element of parameter #0 (field 'm'"),
                       ctg::index_error);

  auto local = ctg::kernel<"local_component">([](auto out) {
    return ctg::range(4, [=](auto i) {
      return ctg::let(ctg::vec(0.0, 0.0, 0.0), [=](auto v) { return ctg::block(v[i] = 1.0, out[i] = v[ctg::c<0>]); });
    });
  });
  CHECK_THROWS_WITH_AS(local(out), doctest::Contains("(a local or a computed value)"), ctg::index_error);

  // The passes that write a coefficient: the adjoint of a component store
  // (the gradient it reads), of a local's component assignment and of a
  // computed vector's component, and the tangents of the first two.
  auto store = ctg::kernel<"store_component">([](auto p, auto out) {
    return ctg::range(4, [=](auto i) { return p[i][i] = 3.0 * out[i]; });
  });
  CHECK_THROWS_WITH_AS(store.grad(p, out), names("p"), ctg::index_error);
  CHECK_THROWS_WITH_AS(store.fwd(p, out), names("p"), ctg::index_error);
  auto through_local = ctg::kernel<"through_local">([](auto p, auto out) {
    return ctg::range(4, [=](auto i) {
      return ctg::let(ctg::vec(0.0, 0.0, 0.0),
                      [=](auto v) { return ctg::block(v[i] = p[i][ctg::c<0>], out[i] = v[ctg::c<0>]); });
    });
  });
  CHECK_THROWS_WITH_AS(through_local.grad(p, out), doctest::Contains("(a local or a computed value)"),
                       ctg::index_error);
  CHECK_THROWS_WITH_AS(through_local.fwd(p, out), doctest::Contains("(a local or a computed value)"),
                       ctg::index_error);
  auto computed = ctg::kernel<"computed_component">([](auto p, auto out) {
    return ctg::range(4, [=](auto i) { return out[i] = (p[i] * 2.0)[i]; });
  });
  CHECK_THROWS_WITH_AS(computed.grad(p, out), doctest::Contains("(a local or a computed value)"), ctg::index_error);
#else
  (void)space;
#endif
}

// value_and_grad in one sweep: y = sin(x) x stored, loss += x^2 summed into
// one element (per-thread partial sums of the values beside the seed).
inline void value_and_gradient_in_one_sweep(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 20, 1 << 16);
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss", .space = space});
  std::vector<double> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001 * double(i % 3000) - 1.0, seeds[i] = 1.0 + double(i % 7);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  loss.fill(0.5);
  loss.grad().fill(-2.0);
  auto k = ctg::kernel<"value_and_grad">([](auto x, auto y, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return ctg::block(y[i] = ctg::sin(x[i]) * x[i], loss() += x[i] * x[i]); });
  });
  constexpr bool one_sweep = decltype(k)::fuses_value_and_gradient<decltype(x), decltype(y), decltype(loss)>();
  CHECK(one_sweep);
  k.value_and_grad(x, y, loss);
  std::vector<double> want_y(n), want_grad(n);
  double want_loss = 0.5;
  for (int i = 0; i < n; ++i) {
    double const v = xs[i];
    want_y[i] = std::sin(v) * v;
    want_loss += v * v;
    want_grad[i] = seeds[i] * (std::cos(v) * v + std::sin(v)) - 2.0 * 2.0 * v;
  }
  check_close(y.to_vector(), want_y, 1e-12);
  CHECK(loss.to_vector()[0] == doctest::Approx(want_loss).epsilon(1e-10));
  check_close(x.grad().to_vector(), want_grad, 1e-12);
  check_close(y.grad().to_vector(), std::vector<double>(n, 0.0), 0);
  check_close(loss.grad().to_vector(), std::vector<double>{-2.0}, 0);
}

// One field passed under two and three parameter names, read under all of
// them: the gradients of the names add. y[i] = a[i] b[i + 1] with a = b = x
// gives x.grad[j] = s[j] x[j + 1] + s[j - 1] x[j - 1] (s = y's seed), also in
// value_and_grad's one sweep; y[i] = a[i] b[i] c[i] gives 3 s x^2; on a tape,
// loss += sum a[i] sin(b[i]) before and after x doubles in place gives
// sin x + x cos x + 2 sin 2x + 4 x cos 2x. A field written under one of its
// names is still refused (CTG-AD-012).
inline void one_field_read_twice(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 16, 1 << 12);
  using vector_t = ctg::field<double, 1, ctg::grad>;
  vector_t x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<double> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.001 * double(i % 1500) - 0.5, seeds[i] = 1.0 + double(i % 5);
  x.copy_from(xs);
  auto shifted = ctg::kernel<"shifted_product">([](auto a, auto b, auto y) {
    return ctg::range(a.size() - 1, [=](auto i) { return y[i] = a[i] * b[i + 1]; });
  });
  std::vector<double> want(n, 0.0);
  for (int j = 0; j < n; ++j) {
    if (j + 1 < n) want[j] += seeds[j] * xs[j + 1];
    if (j >= 1) want[j] += seeds[j - 1] * xs[j - 1];
  }
  y.grad().copy_from(seeds);
  shifted(x, x, y);
  shifted.grad(x, x, y);
  check_close(x.grad().to_vector(), want, 1e-12);

  x.zero_grad();
  y.grad().copy_from(seeds);
  shifted.value_and_grad(x, x, y);
  check_close(x.grad().to_vector(), want, 1e-12);
  CHECK(y.to_vector()[3] == doctest::Approx(xs[3] * xs[4]).epsilon(1e-14));

  auto triple = ctg::kernel<"triple_product">([](auto a, auto b, auto c, auto y) {
    return ctg::range(a.size(), [=](auto i) { return y[i] = a[i] * b[i] * c[i]; });
  });
  x.zero_grad();
  y.grad().copy_from(seeds);
  triple(x, x, x, y);
  triple.grad(x, x, x, y);
  for (int j = 0; j < n; ++j) want[j] = 3.0 * seeds[j] * xs[j] * xs[j];
  check_close(x.grad().to_vector(), want, 1e-12);

  ctg::field<double, 0, ctg::grad> loss({.name = "loss", .space = space});
  auto dot_sin = ctg::kernel<"dot_sin">([](auto a, auto b, auto loss) {
    return ctg::range(a.size(), [=](auto i) { return loss() += a[i] * ctg::sin(b[i]); });
  });
  auto twice = ctg::kernel<"twice_in_place">([](auto a) {
    return ctg::range(a.size(), [=](auto i) { return a[i] = a[i] * 2.0; });
  });
  x.zero_grad();
  {
    ctg::tape tape(loss);
    dot_sin(x, x, loss);
    twice(x);
    dot_sin(x, x, loss);
    tape.backward();
  }
  for (int j = 0; j < n; ++j) {
    double const v = xs[j];
    want[j] = std::sin(v) + v * std::cos(v) + 2.0 * std::sin(2.0 * v) + 4.0 * v * std::cos(2.0 * v);
  }
  check_close(x.grad().to_vector(), want, 1e-12);

  auto scale = ctg::kernel<"scale_into">([](auto a, auto b) {
    return ctg::range(a.size(), [=](auto i) { return b[i] = 2.0 * a[i]; });
  });
  CHECK_THROWS_WITH_AS(scale.grad(x, x), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
}

// y = x^2, loss = sum y on a tape: backward() replays both adjoints, x.grad = 2 x.
inline void tape_of_two_launches(ctg::memory_space space) {
  int const n = 256;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss", .space = space});
  std::vector<double> xs(n), want_grad(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.01 * i, want_grad[i] = 2 * xs[i];
  x.copy_from(xs);
  auto square = ctg::kernel<"square">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i]; });
  });
  auto total = ctg::kernel<"total">([](auto y, auto loss) {
    return ctg::range(y.size(), [=](auto i) { return loss() += y[i]; });
  });
  {
    ctg::tape tape(loss);
    square(x, y);
    total(y, loss);
    CHECK(tape.size() == 2);
    tape.backward();
  }
  double want_loss = 0;
  for (double v : xs) want_loss += v * v;
  CHECK(loss.to_vector()[0] == doctest::Approx(want_loss).epsilon(1e-12));
  check_close(x.grad().to_vector(), want_grad, 1e-12);
}

// A chain of 32 steps, 42 levels tall (above ir::out_of_line_height, so its
// upper levels are built out of line): step k is sin, a scale by 1.5, adding
// a quarter of x again, or tanh of the negation. Values and the gradient
// against the chain rule applied step by step in double. nvcc's front end
// once took time exponential in such a chain's height to compile the
// adjoint's kernel (docs/05, *Tall expressions through nvcc*).
inline constexpr int tall_chain_steps = 32;
template <int K, class E, class X>
auto tall_chain(E const& e, X const& x) {
  if constexpr (K == tall_chain_steps)
    return e;
  else if constexpr (K % 4 == 0)
    return tall_chain<K + 1>(ctg::sin(e), x);
  else if constexpr (K % 4 == 1)
    return tall_chain<K + 1>(e * 1.5f, x);
  else if constexpr (K % 4 == 2)
    return tall_chain<K + 1>(e + x * 0.25f, x);
  else
    return tall_chain<K + 1>(ctg::tanh(-e), x);
}
static_assert(tall_chain_steps / 4 * 5 > ctg::ir::out_of_line_height);

inline void tall_expression(ctg::memory_space space) {
  int const n = elements_for(space, 1 << 16, 1 << 12);
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<float> xs(n), seeds(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.0007f * float(i % 4000) - 1.4f, seeds[i] = 1.0f + float(i % 3);
  x.copy_from(xs);
  y.grad().copy_from(seeds);
  auto k = ctg::kernel<"tall_chain">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = tall_chain<0>(x[i], x[i]); });
  });
  k(x, y);
  k.grad(x, y);
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double const x0 = xs[i];
    double v = x0, d = 1.0;
    for (int step = 0; step < tall_chain_steps; ++step) {
      if (step % 4 == 0) {
        d *= std::cos(v);
        v = std::sin(v);
      } else if (step % 4 == 1) {
        v *= 1.5;
        d *= 1.5;
      } else if (step % 4 == 2) {
        v += 0.25 * x0;
        d += 0.25;
      } else {
        v = std::tanh(-v);
        d *= -(1.0 - v * v);
      }
    }
    want_y[i] = v;
    want_grad[i] = seeds[i] * d;
  }
  check_close(y.to_vector(), want_y, 1e-4);
  check_close(x.grad().to_vector(), want_grad, 1e-4);
}

// && and || evaluate their second operand only where the first does not
// decide, as C++'s do: the guards keep x[i - 1] and x[j] inside the field
// (the index checks throw on a read at -1 or at n), in the forward pass, the
// adjoint's record and the tangent. y[i] = x[i-1] x[i] where i > 0 and
// x[i-1] > 0, else x[i]; z[i] = 2 x[i] where i == 0 or x[i-1] < 0, else
// x[i-1] x[i]; w[i] = (j - i) x[i], j the first index from i on whose x is
// not positive (n if none).
inline void guarded_reads(ctg::memory_space space) {
  std::vector<double> const xs{0.5, -1.25, 2.0, 3.5, 0.75, -0.5, 1.5, 0.25};
  int const n = int(xs.size());
  constexpr ctg::flags both = ctg::grad | ctg::dual;
  ctg::field<double, 1, both> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space}),
      z({n}, {.name = "z", .space = space}), w({n}, {.name = "w", .space = space});
  x.copy_from(xs);
  auto k = ctg::kernel<"guarded_reads", ctg::adstack_capacity<8>>([](auto x, auto y, auto z, auto w) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(ctg::if_(i > 0 && x[i - 1] > 0.0, y[i] = x[i - 1] * x[i], y[i] = x[i]),
                        ctg::if_(i == 0 || x[i - 1] < 0.0, z[i] = 2.0 * x[i], z[i] = x[i - 1] * x[i]),
                        ctg::let(i, [=](auto j) {
                          return ctg::block(ctg::while_(j < x.size() && x[j] > 0.0, j = j + 1),
                                            w[i] = ctg::cast<double>(j - i) * x[i]);
                        }));
    });
  });
  std::vector<double> want_y(xs.size()), want_z(xs.size()), want_w(xs.size()), want_grad(xs.size(), 0.0);
  for (std::size_t u = 0; u < xs.size(); ++u) {
    std::size_t j = u;
    while (j < xs.size() && xs[j] > 0.0) ++j;
    double const run = double(j - u);
    want_w[u] = run * xs[u];
    want_grad[u] += run;
    if (u > 0 && xs[u - 1] > 0.0)
      want_y[u] = xs[u - 1] * xs[u], want_grad[u] += xs[u - 1], want_grad[u - 1] += xs[u];
    else
      want_y[u] = xs[u], want_grad[u] += 1.0;
    if (u == 0 || xs[u - 1] < 0.0)
      want_z[u] = 2.0 * xs[u], want_grad[u] += 2.0;
    else
      want_z[u] = xs[u - 1] * xs[u], want_grad[u] += xs[u - 1], want_grad[u - 1] += xs[u];
  }
  k(x, y, z, w);
  check_close(y.to_vector(), want_y, 1e-12);
  check_close(z.to_vector(), want_z, 1e-12);
  check_close(w.to_vector(), want_w, 1e-12);
  // Reverse with every seed 1: the gradient of the sum of the outputs.
  y.grad().fill(1.0), z.grad().fill(1.0), w.grad().fill(1.0);
  k.grad(x, y, z, w);
  check_close(x.grad().to_vector(), want_grad, 1e-12);
  // Forward mode along e_m: the tangents' sum is the gradient's entry m.
  for (int m : {0, 3, n - 1}) {
    std::vector<double> direction(xs.size(), 0.0);
    direction[std::size_t(m)] = 1.0;
    x.dual().copy_from(direction);
    k.fwd(x, y, z, w);
    double tangent = 0;
    for (auto const* out : {&y, &z, &w})
      for (double d : out->dual().to_vector()) tangent += d;
    check_close(std::vector<double>{tangent}, std::vector<double>{want_grad[std::size_t(m)]}, 1e-12);
  }
}

}  // namespace backend_tests

#define CTGRAD_KERNEL_TESTS(REGISTER, space)                                                                   \
  REGISTER(space, map_forward_and_adjoint, "map: forward values and adjoint of sin(x) x + exp(x / 2)")         \
  REGISTER(space, reduction_and_scatter, "reduction and scatter: atomics into one scalar and 64 buckets")      \
  REGISTER(space, select_cast_stop_grad, "select, cast and stop_grad in an adjoint: the side taken only")      \
  REGISTER(space, more_math_functions, "sinh, cosh, asinh, atanh, exp2, log2, log10, cbrt, trunc, fmod")     \
  REGISTER(space, nested_carried_recurrence, "nested carried recurrence in a func: the adstack")               \
  REGISTER(space, while_with_adstack_capacity, "while_ with an explicit adstack capacity; overflow raises")    \
  REGISTER(space, vector_elements_serial_offload_tangent, "vector elements, a serial offload and tangents")    \
  REGISTER(space, mass_spring_scatter, "mass-spring scatter with vector locals: forces and adjoint by hand")   \
  REGISTER(space, launch_errors, "errors: mixed spaces, a dropped statement, indices")                         \
  REGISTER(space, component_index_errors, "errors: component indices out of range, in every pass")            \
  REGISTER(space, tape_of_two_launches, "a tape records two launches and replays them")                        \
  REGISTER(space, one_field_read_twice, "one field read under two and three names: their gradients add")      \
  REGISTER(space, value_and_gradient_in_one_sweep, "value_and_grad: values and gradients in one sweep")        \
  REGISTER(space, guarded_reads, "&& and || short-circuit: guarded reads stay inside the field")              \
  REGISTER(space, tall_expression, "a chain 42 levels tall: values and gradient by the chain rule")
