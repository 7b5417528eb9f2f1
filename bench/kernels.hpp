// The ctgrad kernels that the CPU and the GPU benchmarks both time: one
// definition, so the two backends are measured on the same code.
#pragma once
#include <ctgrad/ctgrad.hpp>

namespace bench {

// y = sin(x) x, elementwise.
inline auto map_kernel = ctg::kernel<"map">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
});

// One step of the 1-D wave equation, rows of u indexed by time step:
// u[t+1] = 2 u[t] - u[t-1] + c (u[t][i-1] - 2 u[t][i] + u[t][i+1]), zero outside.
inline auto wave_kernel = ctg::kernel<"wave">([](auto u, int t, float c) {
  return ctg::range(u.shape(ctg::c<1>), [=](auto i) {
    auto const n = u.shape(ctg::c<1>);
    return u(t + 1, i) = 2.0f * u(t, i) - u(t - 1, i) +
                         c * (ctg::select(i > 0, u(t, i - 1), 0.0f) - 2.0f * u(t, i) +
                              ctg::select(i < n - 1, u(t, i + 1), 0.0f));
  });
});

// Hooke springs between masses a[s] and b[s]: forces scattered to both ends.
inline auto spring_kernel = ctg::kernel<"springs">([](auto x, auto a, auto b, auto rest, auto f, float k) {
  return ctg::range(a.size(), [=](auto s) {
    return ctg::let(x[a[s]] - x[b[s]], [=](auto d) {
      return ctg::let(ctg::norm(d), [=](auto len) {
        return ctg::let(d * (-k * (len - rest[s]) / len), [=](auto force) {
          return ctg::block(f[a[s]] += force, f[b[s]] -= force);
        });
      });
    });
  });
});

// A particle in an array of structs (28 bytes), and one explicit step on its
// members: v += dt g / m, x += dt v. bench/views_strided.cpp and the GPU
// views benchmark run it on strided views of the structs and on owning fields.
struct particle {
  Eigen::Vector3f x;
  Eigen::Vector3f v;
  float mass;
};
inline auto particle_step = ctg::kernel<"step">([](auto x, auto v, auto mass, float dt) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::block(v[i] = v[i] + dt * ctg::vec(0.0f, -9.8f, 0.0f) / mass[i], x[i] = x[i] + dt * v[i]);
  });
});

}  // namespace bench
