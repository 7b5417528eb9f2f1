// The first four CPU workloads: map, 1-D wave stencil, carried recurrence,
// reduction. For each, the ctgrad kernels and the hand-written forward and
// adjoint loops on the same data (the hand-written adjoints are derived from
// the math in the comments above them). cpu_workloads.cpp times them;
// profile_counts.cpp runs them one at a time for instruction counts.
#pragma once
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "cpu_support.hpp"
#include "kernels.hpp"

namespace bench::basic {

using bench::map_kernel;
using bench::wave_kernel;

// ---- map: y = sin(x) x over 4M elements ----------------------------------------------------------
constexpr int map_n = 1 << 22;

struct map_data {
  ctg::field<float, 1, ctg::grad> x{{map_n}, {.name = "x"}}, y{{map_n}, {.name = "y"}};
  float *xs = x.data(), *ys = y.data(), *gx = x.grad().data(), *gy = y.grad().data();
  std::vector<float> seed = std::vector<float>(map_n);
  map_data() {
    for (int i = 0; i < map_n; ++i) {
      xs[i] = float(2.0 * std::sin(0.001 * i));
      seed[std::size_t(i)] = float(1.0 + 0.5 * std::cos(0.01 * i));
    }
  }
  void reseed() { y.grad().copy_from(seed); }
  void hand_forward() {
    parallel_for(map_n, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) ys[i] = std::sin(xs[i]) * xs[i];
    });
  }
  // y = sin(x) x: dy/dx = cos(x) x + sin(x); the store hands its gradient on
  // and clears it.
  void hand_adjoint() {
    parallel_for(map_n, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) {
        float const g = gy[i];
        gy[i] = 0.0f;
        float const v = xs[i];
        gx[i] += g * (std::cos(v) * v + std::sin(v));
      }
    });
  }
  // The value and the gradient in one pass.
  void hand_value_and_gradient() {
    parallel_for(map_n, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) {
        float const g = gy[i];
        gy[i] = 0.0f;
        float const v = xs[i], s = std::sin(v);
        ys[i] = s * v;
        gx[i] += g * (std::cos(v) * v + s);
      }
    });
  }
};

// ---- 1-D wave stencil: u[t+1][i] from u[t] and u[t-1], 200 steps over 16K cells ---------------
// One launch per time step; the adjoint replays the steps in reverse.
constexpr int wave_cells = 1 << 14;
constexpr int wave_steps = 200;
constexpr int wave_rows = wave_steps + 2;  // rows 0 and 1 are the initial state

using wave_field = ctg::field<float, 2, ctg::grad>;

struct wave_data {
  wave_field u{{wave_rows, wave_cells}, {.name = "u"}};
  std::vector<float*> val, grad;  // row pointers for the hand-written loops
  float const c = 0.2f;
  wave_data() {
    for (int t = 0; t < wave_rows; ++t) {
      val.push_back(u.data() + int64(t) * wave_cells);
      grad.push_back(u.grad().data() + int64(t) * wave_cells);
    }
    for (int i = 0; i < wave_cells; ++i) {
      float const s = float(i - wave_cells / 2) / 400.0f;
      val[0][i] = val[1][i] = std::exp(-s * s);
    }
  }
  // Gradient of the last row only.
  void reseed() {
    std::fill(grad[0], grad[0] + int64(wave_rows - 1) * wave_cells, 0.0f);
    for (int i = 0; i < wave_cells; ++i) grad[wave_rows - 1][i] = float(1.0 + 0.5 * std::sin(0.01 * i));
  }
  void ours_forward() {
    for (int t = 1; t <= wave_steps; ++t) wave_kernel(u, t, c);
  }
  void ours_adjoint() {
    for (int t = wave_steps; t >= 1; --t) wave_kernel.grad(u, t, c);
  }
  void hand_forward() {
    int const n = wave_cells;
    for (int t = 1; t <= wave_steps; ++t) {
      float const* prev = val[t - 1];
      float const* now = val[t];
      float* next = val[t + 1];
      parallel_for(n, [&](int64 b, int64 e) {
        for (int64 i = b; i < e; ++i) {
          float const left = i > 0 ? now[i - 1] : 0.0f;
          float const right = i < n - 1 ? now[i + 1] : 0.0f;
          next[i] = 2.0f * now[i] - prev[i] + c * (left - 2.0f * now[i] + right);
        }
      });
    }
  }
  // The adjoint of step t, written as a gather over the gradient of row t+1 so
  // that every cell writes only its own slots (no atomics): u[t][i] feeds
  // cell i with 2 - 2c, cell i+1 (as its left neighbour) and cell i-1 (as its
  // right neighbour) with c; u[t-1][i] feeds cell i with -1. The store clears
  // row t+1's gradient; cells read their neighbours' entries of that row, so
  // the clearing waits one step: step t clears row t+2, which step t+1 read.
  void hand_adjoint() {
    int const n = wave_cells;
    for (int t = wave_steps; t >= 1; --t) {
      float const* gnext = grad[t + 1];
      float* gnow = grad[t];
      float* gprev = grad[t - 1];
      float* gdone = t + 2 < wave_rows ? grad[t + 2] : nullptr;
      parallel_for(n, [&](int64 b, int64 e) {
        for (int64 i = b; i < e; ++i) {
          float const g = gnext[i];
          float const left = i > 0 ? gnext[i - 1] : 0.0f;
          float const right = i < n - 1 ? gnext[i + 1] : 0.0f;
          gnow[i] += (2.0f - 2.0f * c) * g + c * (left + right);
          gprev[i] -= g;
        }
        if (gdone)
          for (int64 i = b; i < e; ++i) gdone[i] = 0.0f;
      });
    }
    std::fill(grad[2], grad[2] + n, 0.0f);
  }
  // The same adjoint with the structure ctgrad generates: each cell scatters
  // into its neighbours' gradients, so every add is atomic. Not the code one
  // would write; it separates the cost of that structure from the rest.
  void hand_adjoint_scatter() {
    int const n = wave_cells;
    for (int t = wave_steps; t >= 1; --t) {
      float* gnext = grad[t + 1];
      float* gnow = grad[t];
      float* gprev = grad[t - 1];
      parallel_for(n, [&](int64 b, int64 e) {
        for (int64 i = b; i < e; ++i) {
          float const g = gnext[i];
          gnext[i] = 0.0f;
          bench::atomic_add(gnow[i], (2.0f - 2.0f * c) * g);
          bench::atomic_add(gprev[i], -g);
          if (i > 0) bench::atomic_add(gnow[i - 1], c * g);
          if (i < n - 1) bench::atomic_add(gnow[i + 1], c * g);
        }
      });
    }
  }
};


// ---- carried recurrence: v = sin(v) a + x[i] b, 64 iterations per element ------------------------
// The nested loop's carried local is nonlinear, so the adjoint keeps one v
// per iteration on the adstack.
constexpr int rec_n = 1 << 18;
constexpr int rec_iters = 64;

inline auto rec_kernel = ctg::kernel<"recurrence">([](auto x, auto out, int iters, float a, float b) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::let(0.0f, [=](auto v) {
      return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  });
});

struct rec_data {
  ctg::field<float, 1, ctg::grad> x{{rec_n}, {.name = "x"}}, out{{rec_n}, {.name = "out"}};
  float *xs = x.data(), *os = out.data(), *gx = x.grad().data(), *go = out.grad().data();
  float const a = 0.9f, b = 0.7f;
  std::vector<float> seed = std::vector<float>(rec_n);
  rec_data() {
    for (int i = 0; i < rec_n; ++i) {
      xs[i] = float(std::sin(0.37 * i));
      seed[std::size_t(i)] = float(1.0 + 0.5 * std::cos(0.01 * i));
    }
  }
  void reseed() { out.grad().copy_from(seed); }
  void ours_forward() { rec_kernel(x, out, rec_iters, a, b); }
  void ours_adjoint() { rec_kernel.grad(x, out, rec_iters, a, b); }
  void hand_forward() {
    parallel_for(rec_n, [&](int64 lo, int64 hi) {
      for (int64 i = lo; i < hi; ++i) {
        float v = 0.0f;
        for (int j = 0; j < rec_iters; ++j) v = std::sin(v) * a + xs[i] * b;
        os[i] = v;
      }
    });
  }
  // Forward sweep keeping every v_j (the hand-written adstack, one buffer per
  // chunk), then v_{j+1} = sin(v_j) a + x b backwards:
  // dx += g b, g <- g a cos(v_j). StoreValue: also writes out[i] (a value
  // and gradient in one pass).
  template <bool StoreValue>
  void hand_sweeps() {
    parallel_for(rec_n, [&](int64 lo, int64 hi) {
      std::vector<float> history(rec_iters);
      for (int64 i = lo; i < hi; ++i) {
        float const xb = xs[i] * b;
        float v = 0.0f;
        for (int j = 0; j < rec_iters; ++j) {
          history[std::size_t(j)] = v;
          v = std::sin(v) * a + xb;
        }
        if constexpr (StoreValue) os[i] = v;
        float g = go[i];
        go[i] = 0.0f;
        float dx = 0.0f;
        for (int j = rec_iters - 1; j >= 0; --j) {
          dx += g * b;
          g = g * a * std::cos(history[std::size_t(j)]);
        }
        gx[i] += dx;
      }
    });
  }
  void hand_adjoint() { hand_sweeps<false>(); }
  void hand_value_and_gradient() { hand_sweeps<true>(); }
};


// ---- reduction: loss += x[i]^2 over 4M elements --------------------------------------------------
constexpr int red_n = 1 << 22;

inline auto red_kernel = ctg::kernel<"reduction">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i] * x[i]; });
});

struct red_data {
  ctg::field<float, 1, ctg::grad> x{{red_n}, {.name = "x"}};
  ctg::field<float, 0, ctg::grad> loss{{}, {.name = "loss"}};
  float* xs = x.data();
  float* gx = x.grad().data();
  float* ls = loss.data();
  float* gl = loss.grad().data();
  red_data() {
    for (int i = 0; i < red_n; ++i) xs[i] = float(std::sin(0.37 * i));
  }
  void clear() { *ls = 0.0f; }
  // Before a value and gradient: the loss sums from zero (its seed stays).
  void reseed() { clear(); }
  // What one writes by hand: a private partial sum per chunk, one atomic add
  // per chunk.
  void hand_forward() {
    parallel_for(red_n, [&](int64 b, int64 e) {
      float s = 0.0f;
      for (int64 i = b; i < e; ++i) s += xs[i] * xs[i];
      bench::atomic_add(*ls, s);
    });
  }
  // The structure ctgrad generates: one atomic add per element. Not the
  // code one would write; it separates the cost of that structure.
  void hand_forward_atomic() {
    parallel_for(red_n, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) bench::atomic_add(*ls, xs[i] * xs[i]);
    });
  }
  // loss += x^2 (an atomic accumulate: its gradient is read, not cleared).
  void hand_adjoint() {
    float const g = *gl;
    parallel_for(red_n, [&](int64 b, int64 e) {
      for (int64 i = b; i < e; ++i) gx[i] += 2.0f * xs[i] * g;
    });
  }
  void hand_value_and_gradient() {
    float const g = *gl;
    parallel_for(red_n, [&](int64 b, int64 e) {
      float s = 0.0f;
      for (int64 i = b; i < e; ++i) {
        s += xs[i] * xs[i];
        gx[i] += 2.0f * xs[i] * g;
      }
      bench::atomic_add(*ls, s);
    });
  }
};


}  // namespace bench::basic
