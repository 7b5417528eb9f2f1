// GPU benchmarks: ctgrad's generated kernels (forward and adjoint) against
// hand-written CUDA kernels doing the same work on the same data, timed with
// CUDA events. Each benchmark iteration times both variants back to back, so
// the reported ratio compares runs under the same clocks; gradients are
// compared before timing and a mismatch aborts the run.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

#include "kernels.hpp"

namespace {

using bench::map_kernel;
using bench::spring_kernel;
using bench::wave_kernel;

constexpr int threads = 256;

int blocks_for(long long n) { return int(std::min<long long>((n + threads - 1) / threads, 132LL * 32)); }

struct event_timer {
  cudaEvent_t start, stop;
  event_timer() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~event_timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <class F>
  double seconds(F&& f) {
    cudaEventRecord(start);
    f();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return double(ms) * 1e-3;
  }
};

void require(bool ok, std::string const& what) {
  if (!ok) {
    std::fprintf(stderr, "gradient mismatch: %s\n", what.c_str());
    std::exit(2);
  }
}

template <class T>
void compare(std::vector<T> const& a, std::vector<T> const& b, double tol, char const* what) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    double const x = a[i], y = b[i];
    require(std::abs(x - y) <= tol * (1 + std::abs(y)), std::string(what) + " at " + std::to_string(i));
  }
}

// Times ctgrad and hand-written variants alternately; reports the ctgrad time
// as the benchmark time, bytes per second, and the ratio of the paired sums.
template <class Ours, class Theirs>
void paired(benchmark::State& state, double bytes, Ours&& ours, Theirs&& theirs) {
  event_timer timer;
  ours();
  theirs();  // warm up
  cudaDeviceSynchronize();
  double total_ours = 0, total_theirs = 0;
  for (auto _ : state) {
    double const a = timer.seconds(ours);
    double const b = timer.seconds(theirs);
    total_ours += a;
    total_theirs += b;
    state.SetIterationTime(a);
  }
  state.counters["GB/s"] = benchmark::Counter(bytes * double(state.iterations()) / total_ours * 1e-9);
  state.counters["hand_GB/s"] = benchmark::Counter(bytes * double(state.iterations()) / total_theirs * 1e-9);
  state.counters["ratio_ctgrad_over_hand"] = total_ours / total_theirs;
}

// ---- map: y = sin(x) * x ----------------------------------------------------------------
__global__ void map_forward(float const* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = sinf(x[i]) * x[i];
}
__global__ void map_adjoint(float const* x, float* gx, float* gy, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float const g = gy[i];
    float const v = x[i];
    gx[i] += g * (cosf(v) * v + sinf(v));
    gy[i] = 0.0f;  // after the accumulation: the faster order on the GPU
  }
}

struct map_data {
  long long n = 1LL << 26;
  ctg::field<float, 1, ctg::grad> x{{int(1 << 26)}, {.name = "x", .space = ctg::device}};
  ctg::field<float, 1, ctg::grad> y{{int(1 << 26)}, {.name = "y", .space = ctg::device}};
  map_data() {
    std::vector<float> xs(static_cast<std::size_t>(n));
    for (long long i = 0; i < n; ++i) xs[std::size_t(i)] = float(std::sin(0.001 * double(i)));
    x.copy_from(xs);
  }
};

void BM_map_forward(benchmark::State& state) {
  map_data d;
  paired(
      state, 8.0 * double(d.n), [&] { map_kernel(d.x, d.y); },
      [&] { map_forward<<<blocks_for(d.n), threads>>>(d.x.data(), d.y.data(), d.n); });
}
void BM_map_adjoint(benchmark::State& state) {
  map_data d;
  map_kernel(d.x, d.y);
  // Verify: both adjoints from the same seed.
  std::vector<float> seed(static_cast<std::size_t>(d.n), 1.0f);
  d.y.grad().copy_from(seed);
  map_kernel.grad(d.x, d.y);
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  d.y.grad().copy_from(seed);
  map_adjoint<<<blocks_for(d.n), threads>>>(d.x.data(), d.x.grad().data(), d.y.grad().data(), d.n);
  compare(ours, d.x.grad().to_vector(), 1e-5, "map adjoint");
  paired(
      state, 16.0 * double(d.n), [&] { map_kernel.grad(d.x, d.y); },
      [&] { map_adjoint<<<blocks_for(d.n), threads>>>(d.x.data(), d.x.grad().data(), d.y.grad().data(), d.n); });
}

// ---- reference points: a plain copy (the card's streaming bandwidth) and a
// linear map whose adjoint is pure streaming ------------------------------------------------------
__global__ void copy_kernel(float const* x, float* y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = x[i];
}
__global__ void affine_adjoint(float* gx, float* gy, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float const g = gy[i];
    gx[i] += 2.0f * g;
    gy[i] = 0.0f;
  }
}
auto affine_kernel = ctg::kernel<"affine">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = 2.0f * x[i] + 1.0f; });
});

void BM_copy_reference(benchmark::State& state) {
  map_data d;
  event_timer timer;
  double total = 0;
  for (auto _ : state) {
    double const t = timer.seconds([&] { copy_kernel<<<blocks_for(d.n), threads>>>(d.x.data(), d.y.data(), d.n); });
    total += t;
    state.SetIterationTime(t);
  }
  state.counters["GB/s"] = benchmark::Counter(8.0 * double(d.n) * double(state.iterations()) / total * 1e-9);
}
void BM_affine_forward(benchmark::State& state) {
  map_data d;
  paired(
      state, 8.0 * double(d.n), [&] { affine_kernel(d.x, d.y); },
      [&] { copy_kernel<<<blocks_for(d.n), threads>>>(d.x.data(), d.y.data(), d.n); });
}
void BM_affine_adjoint(benchmark::State& state) {
  map_data d;
  paired(
      state, 16.0 * double(d.n), [&] { affine_kernel.grad(d.x, d.y); },
      [&] { affine_adjoint<<<blocks_for(d.n), threads>>>(d.x.grad().data(), d.y.grad().data(), d.n); });
}

// ---- 1-D wave stencil, fields indexed [t][i] --------------------------------------------------
constexpr int wave_cells = 1 << 22;
constexpr int wave_steps = 16;

__global__ void wave_forward(float* u, int t, int n, float c) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    long long const now = (long long)t * n, prev = (long long)(t - 1) * n, next = (long long)(t + 1) * n;
    float const left = i > 0 ? u[now + i - 1] : 0.0f;
    float const right = i < n - 1 ? u[now + i + 1] : 0.0f;
    u[next + i] = 2.0f * u[now + i] - u[prev + i] + c * (left - 2.0f * u[now + i] + right);
  }
}
// The adjoint with the same (scatter) structure as the generated one.
__global__ void wave_adjoint(float* gu, int t, int n, float c) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    long long const now = (long long)t * n, prev = (long long)(t - 1) * n, next = (long long)(t + 1) * n;
    float const g = gu[next + i];
    atomicAdd(&gu[now + i], (2.0f - 2.0f * c) * g);
    atomicAdd(&gu[prev + i], -g);
    if (i > 0) atomicAdd(&gu[now + i - 1], c * g);
    if (i < n - 1) atomicAdd(&gu[now + i + 1], c * g);
    gu[next + i] = 0.0f;
  }
}

struct wave_data {
  ctg::field<float, 2, ctg::grad> u{{wave_steps + 1, wave_cells}, {.name = "u", .space = ctg::device}};
  float c = 0.2f;
  wave_data() {
    std::vector<float> init(std::size_t(wave_steps + 1) * wave_cells, 0.0f);
    for (int i = 0; i < wave_cells; ++i) init[std::size_t(i)] = init[std::size_t(wave_cells + i)] = std::exp(-1e-6f * float(i - wave_cells / 2) * float(i - wave_cells / 2));
    u.copy_from(init);
  }
};

void BM_wave_forward(benchmark::State& state) {
  wave_data d;
  paired(
      state, 16.0 * double(wave_cells) * (wave_steps - 1),
      [&] {
        for (int t = 1; t < wave_steps; ++t) wave_kernel(d.u, t, d.c);
      },
      [&] {
        for (int t = 1; t < wave_steps; ++t) wave_forward<<<blocks_for(wave_cells), threads>>>(d.u.data(), t, wave_cells, d.c);
      });
}
void BM_wave_adjoint(benchmark::State& state) {
  wave_data d;
  for (int t = 1; t < wave_steps; ++t) wave_kernel(d.u, t, d.c);
  std::vector<float> seed(std::size_t(wave_steps + 1) * wave_cells, 0.0f);
  for (int i = 0; i < wave_cells; ++i) seed[std::size_t(wave_steps) * wave_cells + i] = 1.0f;
  auto run_ours = [&] {
    for (int t = wave_steps - 1; t >= 1; --t) wave_kernel.grad(d.u, t, d.c);
  };
  auto run_theirs = [&] {
    for (int t = wave_steps - 1; t >= 1; --t)
      wave_adjoint<<<blocks_for(wave_cells), threads>>>(d.u.grad().data(), t, wave_cells, d.c);
  };
  d.u.grad().copy_from(seed);
  run_ours();
  auto ours = d.u.grad().to_vector();
  d.u.grad().copy_from(seed);
  run_theirs();
  compare(ours, d.u.grad().to_vector(), 1e-4, "wave adjoint");
  paired(state, 24.0 * double(wave_cells) * (wave_steps - 1), run_ours, run_theirs);
}

// ---- mass-spring force scatter ------------------------------------------------------------
constexpr int masses = 1 << 20;
constexpr int springs = 1 << 22;

__global__ void spring_forward(float2 const* x, int const* a, int const* b, float const* rest, float2* f, int m,
                               float k) {
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < m; s += gridDim.x * blockDim.x) {
    float2 const d = make_float2(x[a[s]].x - x[b[s]].x, x[a[s]].y - x[b[s]].y);
    float const len = sqrtf(d.x * d.x + d.y * d.y);
    float const scale = -k * (len - rest[s]) / len;
    atomicAdd(&f[a[s]].x, scale * d.x);
    atomicAdd(&f[a[s]].y, scale * d.y);
    atomicAdd(&f[b[s]].x, -scale * d.x);
    atomicAdd(&f[b[s]].y, -scale * d.y);
  }
}

using vec2 = Eigen::Vector2f;
struct spring_data {
  ctg::field<vec2, 1, ctg::grad> x{{masses}, {.name = "x", .space = ctg::device}};
  ctg::field<vec2, 1, ctg::grad> f{{masses}, {.name = "f", .space = ctg::device}};
  ctg::field<int, 1> a{{springs}, {.name = "a", .space = ctg::device}}, b{{springs}, {.name = "b", .space = ctg::device}};
  ctg::field<float, 1, ctg::grad> rest{{springs}, {.name = "rest", .space = ctg::device}};
  float k = 10.0f;
  spring_data() {
    std::vector<vec2> xs(masses);
    std::vector<int> as(springs), bs(springs);
    std::vector<float> rs(springs);
    unsigned state = 12345;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    for (int i = 0; i < masses; ++i) xs[std::size_t(i)] = vec2(float(i % 1024), float(i / 1024));
    for (int s = 0; s < springs; ++s) {
      as[std::size_t(s)] = int(next() % masses);
      bs[std::size_t(s)] = (as[std::size_t(s)] + 1 + int(next() % 64)) % masses;
      rs[std::size_t(s)] = 1.0f;
    }
    x.copy_from(xs);
    a.copy_from(as);
    b.copy_from(bs);
    rest.copy_from(rs);
  }
};

void BM_springs_forward(benchmark::State& state) {
  spring_data d;
  spring_kernel(d.x, d.a, d.b, d.rest, d.f, d.k);
  auto ours = d.f.to_vector();
  d.f.fill(vec2::Zero());
  spring_forward<<<blocks_for(springs), threads>>>(reinterpret_cast<float2 const*>(d.x.data()), d.a.data(), d.b.data(),
                                                   d.rest.data(), reinterpret_cast<float2*>(d.f.data()), springs, d.k);
  auto theirs = d.f.to_vector();
  for (int i = 0; i < masses; i += 4099) require((ours[std::size_t(i)] - theirs[std::size_t(i)]).norm() <= 1e-3f * (1 + theirs[std::size_t(i)].norm()), "spring forces");
  paired(
      state, double(springs) * (8 + 4 + 4 * 4 + 4 * 4),
      [&] { spring_kernel(d.x, d.a, d.b, d.rest, d.f, d.k); },
      [&] {
        spring_forward<<<blocks_for(springs), threads>>>(reinterpret_cast<float2 const*>(d.x.data()), d.a.data(),
                                                         d.b.data(), d.rest.data(), reinterpret_cast<float2*>(d.f.data()),
                                                         springs, d.k);
      });
}

__global__ void spring_adjoint(float2 const* x, int const* a, int const* b, float const* rest, float2 const* gf,
                               float2* gx, int m, float k) {
  for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < m; s += gridDim.x * blockDim.x) {
    float2 const d = make_float2(x[a[s]].x - x[b[s]].x, x[a[s]].y - x[b[s]].y);
    float const len = sqrtf(d.x * d.x + d.y * d.y);
    // force = d * c, c = -k (len - r) / len; adjoint of f[a] += force, f[b] -= force.
    float2 const gforce = make_float2(gf[a[s]].x - gf[b[s]].x, gf[a[s]].y - gf[b[s]].y);
    float const c = -k * (len - rest[s]) / len;
    float const gc = gforce.x * d.x + gforce.y * d.y;
    // dc/dlen = -k r / len^2, dlen/dd = d / len
    float const glen = gc * (-k * rest[s] / (len * len));
    float2 const gd = make_float2(gforce.x * c + glen * d.x / len, gforce.y * c + glen * d.y / len);
    atomicAdd(&gx[a[s]].x, gd.x);
    atomicAdd(&gx[a[s]].y, gd.y);
    atomicAdd(&gx[b[s]].x, -gd.x);
    atomicAdd(&gx[b[s]].y, -gd.y);
  }
}

void BM_springs_adjoint(benchmark::State& state) {
  spring_data d;
  spring_kernel(d.x, d.a, d.b, d.rest, d.f, d.k);
  std::vector<vec2> seed(masses);
  for (int i = 0; i < masses; ++i) seed[std::size_t(i)] = vec2(std::sin(0.1f * float(i)), std::cos(0.3f * float(i)));
  d.f.grad().copy_from(seed);
  spring_kernel.grad(d.x, d.a, d.b, d.rest, d.f, d.k);
  auto ours = d.x.grad().to_vector();
  d.x.zero_grad();
  spring_adjoint<<<blocks_for(springs), threads>>>(reinterpret_cast<float2 const*>(d.x.data()), d.a.data(), d.b.data(),
                                                   d.rest.data(), reinterpret_cast<float2 const*>(d.f.grad().data()),
                                                   reinterpret_cast<float2*>(d.x.grad().data()), springs, d.k);
  auto theirs = d.x.grad().to_vector();
  for (int i = 0; i < masses; i += 4099) {
    if (!((ours[std::size_t(i)] - theirs[std::size_t(i)]).norm() <= 1e-2f * (1 + theirs[std::size_t(i)].norm()))) {
      std::string const what = "gradient mismatch: spring adjoint at mass " + std::to_string(i) + ": ctgrad (" +
                               std::to_string(ours[std::size_t(i)](0)) + ", " + std::to_string(ours[std::size_t(i)](1)) +
                               ") hand-written (" + std::to_string(theirs[std::size_t(i)](0)) + ", " +
                               std::to_string(theirs[std::size_t(i)](1)) + ")";
      state.SkipWithError(what.c_str());  // this benchmark stops here; the others still run
      return;
    }
  }
  paired(
      state, double(springs) * (8 + 4 * 4 + 4 * 4 + 4 * 4),
      [&] { spring_kernel.grad(d.x, d.a, d.b, d.rest, d.f, d.k); },
      [&] {
        spring_adjoint<<<blocks_for(springs), threads>>>(reinterpret_cast<float2 const*>(d.x.data()), d.a.data(),
                                                         d.b.data(), d.rest.data(),
                                                         reinterpret_cast<float2 const*>(d.f.grad().data()),
                                                         reinterpret_cast<float2*>(d.x.grad().data()), springs, d.k);
      });
}

// ---- carried nonlinear recurrence: the adstack on the device -----------------------------------------
constexpr int rec_n = 1 << 20;
constexpr int rec_steps = 64;

__global__ void recurrence_adjoint(float const* x, float const* gy, float* gx, float* stack, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    // Forward with the carried values kept, as a hand-written adjoint would.
    float v = x[i];
    float* mine = stack + (long long)i * rec_steps;
    for (int s = 0; s < rec_steps; ++s) {
      mine[s] = v;
      v = sinf(v) * 0.9f + x[i] * 0.1f;
    }
    float gv = gy[i], gxi = 0.0f;
    for (int s = rec_steps - 1; s >= 0; --s) {
      gxi += gv * 0.1f;
      gv = gv * cosf(mine[s]) * 0.9f;
    }
    gx[i] += gxi + gv;
  }
}

auto recurrence_kernel = ctg::kernel<"recurrence">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(x[i], [=](auto v) {
      return ctg::block(ctg::range(rec_steps, [=](auto) { return v = ctg::sin(v) * 0.9f + x[i] * 0.1f; }), y[i] = v);
    });
  });
});

void BM_recurrence_adjoint(benchmark::State& state) {
  ctg::field<float, 1, ctg::grad> x({rec_n}, {.name = "x", .space = ctg::device}), y({rec_n}, {.name = "y", .space = ctg::device});
  std::vector<float> xs(rec_n), seed(rec_n, 1.0f);
  for (int i = 0; i < rec_n; ++i) xs[std::size_t(i)] = 0.5f * std::sin(0.01f * float(i));
  x.copy_from(xs);
  float* stack = nullptr;
  cudaMalloc(&stack, sizeof(float) * std::size_t(rec_n) * rec_steps);
  recurrence_kernel(x, y);
  // The adjoint zeroes y.grad; both variants get the seed back before each run.
  auto ours = [&] {
    cudaMemcpyAsync(y.grad().data(), seed.data(), sizeof(float) * rec_n, cudaMemcpyHostToDevice);
    recurrence_kernel.grad(x, y);
  };
  auto theirs = [&] {
    cudaMemcpyAsync(y.grad().data(), seed.data(), sizeof(float) * rec_n, cudaMemcpyHostToDevice);
    recurrence_adjoint<<<blocks_for(rec_n), threads>>>(x.data(), y.grad().data(), x.grad().data(), stack, rec_n);
  };
  ours();
  auto a = x.grad().to_vector();
  x.zero_grad();
  theirs();
  compare(a, x.grad().to_vector(), 1e-4, "recurrence adjoint");
  paired(state, double(rec_n) * 16.0, ours, theirs);
  cudaFree(stack);
}


// ---- views: the step of bench/views_strided.cpp on an array of structs in
// device memory (x, v, mass side by side, 28 bytes per particle), through
// strided views, against the same kernel on three owning device fields and a
// hand-written kernel over the structs. Target: strided/owning <= 1.10.
using bench::particle;
constexpr int views_n = 1 << 24;
constexpr float views_dt = 1e-3f;

auto const& views_step = bench::particle_step;

__global__ void views_step_hand(particle* p, long long n, float dt) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    p[i].v += dt * Eigen::Vector3f(0.0f, -9.8f, 0.0f) / p[i].mass;
    p[i].x += dt * p[i].v;
  }
}

struct views_data {
  particle* structs = nullptr;
  particle* hand_structs = nullptr;
  ctg::field<Eigen::Vector3f, 1, ctg::grad | ctg::strided> xs, vs;
  ctg::field<float, 1, ctg::grad | ctg::strided> ms;
  ctg::field<Eigen::Vector3f, 1, ctg::grad> xo{{views_n}, {.name = "x", .space = ctg::device}},
      vo{{views_n}, {.name = "v", .space = ctg::device}};
  ctg::field<float, 1, ctg::grad> mo{{views_n}, {.name = "m", .space = ctg::device}};
  views_data() {
    std::vector<particle> p(views_n);
    std::vector<Eigen::Vector3f> x(views_n), v(views_n, Eigen::Vector3f::Zero());
    std::vector<float> m(views_n);
    for (int i = 0; i < views_n; ++i) {
      x[std::size_t(i)] = Eigen::Vector3f(0.001f * float(i % 97), 1.0f, -0.5f);
      m[std::size_t(i)] = 1.0f + 0.01f * float(i % 7);
      p[std::size_t(i)] = {x[std::size_t(i)], v[std::size_t(i)], m[std::size_t(i)]};
    }
    std::size_t const bytes = sizeof(particle) * std::size_t(views_n);
    require(cudaMalloc(&structs, bytes) == cudaSuccess && cudaMalloc(&hand_structs, bytes) == cudaSuccess,
            "views: cudaMalloc");
    cudaMemcpy(structs, p.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(hand_structs, p.data(), bytes, cudaMemcpyHostToDevice);
    std::int64_t const stride = sizeof(particle);
    xs = ctg::strided_view<ctg::grad>(&structs->x, {views_n}, {stride}, {.name = "x", .space = ctg::device});
    vs = ctg::strided_view<ctg::grad>(&structs->v, {views_n}, {stride}, {.name = "v", .space = ctg::device});
    ms = ctg::strided_view<ctg::grad>(&structs->mass, {views_n}, {stride}, {.name = "m", .space = ctg::device});
    xo.copy_from(x), vo.copy_from(v), mo.copy_from(m);
  }
  ~views_data() {
    cudaFree(structs);
    cudaFree(hand_structs);
  }
};

void BM_views_step_forward(benchmark::State& state) {
  views_data d;
  // One step on each: the views, the owning fields and the hand-written
  // kernel agree.
  views_step(d.xs, d.vs, d.ms, views_dt);
  views_step(d.xo, d.vo, d.mo, views_dt);
  views_step_hand<<<blocks_for(views_n), threads>>>(d.hand_structs, views_n, views_dt);
  auto const strided_x = d.xs.to_vector(), owning_x = d.xo.to_vector();
  std::vector<particle> hand(views_n);
  cudaMemcpy(hand.data(), d.hand_structs, sizeof(particle) * std::size_t(views_n), cudaMemcpyDeviceToHost);
  for (int i = 0; i < views_n; i += 4099)
    require(strided_x[std::size_t(i)].isApprox(owning_x[std::size_t(i)], 1e-6f) &&
                strided_x[std::size_t(i)].isApprox(hand[std::size_t(i)].x, 1e-6f),
            "views: strided, owning and hand-written steps differ at " + std::to_string(i));
  event_timer timer;
  double strided = 0, owning = 0, by_hand = 0;
  for (auto _ : state) {
    double const a = timer.seconds([&] { views_step(d.xs, d.vs, d.ms, views_dt); });
    double const b = timer.seconds([&] { views_step(d.xo, d.vo, d.mo, views_dt); });
    double const c =
        timer.seconds([&] { views_step_hand<<<blocks_for(views_n), threads>>>(d.hand_structs, views_n, views_dt); });
    strided += a, owning += b, by_hand += c;
    state.SetIterationTime(a);
  }
  state.counters["ratio_strided_over_owning"] = strided / owning;
  state.counters["ratio_strided_over_hand_aos"] = strided / by_hand;
}

void BM_views_step_adjoint(benchmark::State& state) {
  views_data d;
  // The adjoint reads the masses the forward launch read.
  views_step(d.xs, d.vs, d.ms, views_dt);
  views_step(d.xo, d.vo, d.mo, views_dt);
  Eigen::Vector3f const seed(1.0f, 0.5f, -2.0f);
  d.xs.grad().fill(seed);
  d.xo.grad().fill(seed);
  views_step.grad(d.xs, d.vs, d.ms, views_dt);
  views_step.grad(d.xo, d.vo, d.mo, views_dt);
  auto const strided_m = d.ms.grad().to_vector(), owning_m = d.mo.grad().to_vector();
  compare(strided_m, owning_m, 1e-5, "views: the mass gradients of strided and owning");
  // By hand at a few points: v.grad = dt x.grad, m.grad = -dt (v.grad . g) / m^2.
  auto const masses = d.mo.to_vector();
  for (int i = 0; i < views_n; i += 4099) {
    float const m = masses[std::size_t(i)];
    double const want = -double(views_dt) * (double(views_dt) * seed.dot(Eigen::Vector3f(0.0f, -9.8f, 0.0f))) / (m * m);
    require(std::abs(strided_m[std::size_t(i)] - want) <= 1e-5 * (1e-9 + std::abs(want)) + 1e-12,
            "views: mass gradient against the closed form at " + std::to_string(i));
  }
  paired(
      state, 0.0, [&] { views_step.grad(d.xs, d.vs, d.ms, views_dt); },
      [&] { views_step.grad(d.xo, d.vo, d.mo, views_dt); });
  state.counters["ratio_strided_over_owning"] = state.counters["ratio_ctgrad_over_hand"];
  state.counters.erase("ratio_ctgrad_over_hand");
  state.counters.erase("GB/s");
  state.counters.erase("hand_GB/s");
}

}  // namespace

BENCHMARK(BM_copy_reference)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_affine_forward)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_affine_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_map_forward)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_map_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_wave_forward)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_wave_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_springs_forward)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_springs_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_recurrence_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_views_step_forward)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_views_step_adjoint)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);

int main(int argc, char** argv) {
  std::string why;
  if (!ctg::cuda::device_available(&why)) {
    std::printf("skipped: the GPU benchmarks need a CUDA device (%s)\n", why.c_str());
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
