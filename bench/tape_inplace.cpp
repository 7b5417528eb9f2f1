// What a ctg::tape costs a simulation whose state is updated in place
// (docs/05-performance.md, "In-place state and the tape"), paired in one run:
//
// BM_tape_save/bytes:N: the rate at which the tape saves field values. A
//   launch that reads one element of an N-byte field and overwrites it makes
//   the tape copy the whole field first; 64 MB of such copies per run. The
//   references copy the same bytes with std::memcpy: into buffers allocated
//   and touched in advance (the rate a copy can reach), and into buffers
//   allocated for the copy, zeroed or not. A fifth variant, the same launches
//   with nothing to save, separates the launches' own cost from the copies'.
//   The tape takes its blocks from the copy cache, which the previous tape
//   filled (an optimisation loop records the same rollout again); a sixth
//   variant empties the cache first: the first tape of a program.
//
// BM_rollout/workload:W: the gradient of a rollout of 16K cells x 200 steps,
//   forward and backward, with its state in three layouts:
//     in place  the state a simulator keeps (two buffers for the heat
//               equation, three rotated for the wave equation), on a tape;
//     indexed   one field indexed by the step, u(t, i), with the adjoints
//               called by hand in reverse (k.grad, no tape): the layout of
//               DiffTaichi, nothing copied, T x the state in memory;
//     per step  one field per step on a tape: nothing overwritten, so
//               nothing saved.
//   W = 0: the heat equation with a learned diffusion coefficient D, whose
//   gradient reads every step's values (the tape saves one copy per step);
//   W = 1: the 1-D wave equation with a constant speed, whose adjoint reads no
//   value (nothing saved). The counters give the time ratios and the bytes
//   each layout holds: state (values and gradients) plus the tape's copies.
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "cpu_support.hpp"
#include "heat_kernels.hpp"

namespace {

using namespace ctg::literals;
using bench::variant;
using vec = ctg::field<double, 1, ctg::grad>;
using rows = ctg::field<double, 2, ctg::grad>;
using scalar = ctg::field<double, 0, ctg::grad>;

// ---- (a) the save path ------------------------------------------------------------------------------
// x[0] = sin(x[0]): the adjoint needs the x the launch began with, and the
// launch overwrites it, so the tape copies x (all of it) before every launch.
inline auto nudge = ctg::kernel<"nudge">([](auto x) {
  return ctg::range(1, [=](auto i) { return x[i] = ctg::sin(x[i]); });
});
// x[0] = 0.5 x[0]: the same launch with an adjoint that reads no value.
inline auto halve = ctg::kernel<"halve">([](auto x) {
  return ctg::range(1, [=](auto i) { return x[i] = 0.5 * x[i]; });
});

constexpr std::size_t bytes_per_run = std::size_t(64) << 20;
constexpr std::align_val_t field_alignment{ctg::detail::field_storage::alignment};

struct owned_buffers {
  std::vector<void*> p;
  void release() {
    for (void* q : p) ::operator delete(q, field_alignment);
    p.clear();
  }
  ~owned_buffers() { release(); }
};

void BM_tape_save(benchmark::State& state) {
  std::size_t const bytes = std::size_t(state.range(0));
  int const copies = int(bytes_per_run / bytes);
  vec x({int(bytes / sizeof(double))}, {.name = "x"});
  for (std::int64_t i = 0; i < x.size(); ++i) x.data()[i] = 0.001 * double(i % 1000);
  scalar loss({.name = "loss"});
  std::optional<ctg::tape> tape;
  // Destinations for the first reference, allocated and written once.
  owned_buffers ready, fresh;
  for (int k = 0; k < copies; ++k) {
    ready.p.push_back(::operator new(bytes, field_alignment));
    std::memset(ready.p.back(), 1, bytes);
  }
  // Every setup leaves nothing of the other variants alive (copies, tapes).
  auto clean = [&] {
    tape.reset();
    fresh.release();
  };
  auto on_tape = [&] {
    clean();
    tape.emplace(loss);
  };
  auto on_first_tape = [&] {
    clean();
    ctg::trim_copy_cache();
    tape.emplace(loss);
  };
  auto const* src = x.data();
  auto t = bench::paired<6>(
      state, {variant{on_tape, [&] { for (int k = 0; k < copies; ++k) nudge(x); }},
              variant{clean, [&] { for (int k = 0; k < copies; ++k) std::memcpy(ready.p[std::size_t(k)], src, bytes); }},
              variant{clean,
                      [&] {
                        for (int k = 0; k < copies; ++k) {
                          void* d = ::operator new(bytes, field_alignment);
                          std::memset(d, 0, bytes);
                          std::memcpy(d, src, bytes);
                          fresh.p.push_back(d);
                        }
                      }},
              variant{clean,
                      [&] {
                        for (int k = 0; k < copies; ++k) {
                          void* d = ::operator new(bytes, field_alignment);
                          std::memcpy(d, src, bytes);
                          fresh.p.push_back(d);
                        }
                      }},
              variant{on_tape, [&] { for (int k = 0; k < copies; ++k) halve(x); }},
              variant{on_first_tape, [&] { for (int k = 0; k < copies; ++k) nudge(x); }}});
  on_tape();
  halve(x);
  if (tape->bytes_saved() != 0) bench::fail("tape save: a launch with nothing to save saved values");
  on_tape();
  nudge(x);
  nudge(x);
  if (tape->bytes_saved() != 2 * bytes) bench::fail("tape save: a launch did not save the field once");
  clean();
  double const moved = double(bytes_per_run) * double(state.iterations());
  state.counters["bytes_per_second"] = benchmark::Counter(moved / t[0]);
  state.counters["memcpy_bytes_per_second"] = benchmark::Counter(moved / t[1]);
  // The target: the tape saves at >= 0.8 x the rate of memcpy.
  state.counters["ratio_tape_over_memcpy_rate"] = t[1] / t[0];
  // The copies alone: the launches' own cost (measured with nothing to save) taken off.
  state.counters["ratio_saving_over_memcpy_rate"] = t[1] / std::max(1e-12, t[0] - t[4]);
  state.counters["ratio_zeroed_alloc_memcpy_over_memcpy_rate"] = t[1] / t[2];
  state.counters["ratio_alloc_memcpy_over_memcpy_rate"] = t[1] / t[3];
  state.counters["ratio_first_tape_over_memcpy_rate"] = t[1] / t[5];
  state.counters["us_per_launch_without_save"] = 1e6 * t[4] / (double(copies) * double(state.iterations()));
}

// ---- (b) rollouts ------------------------------------------------------------------------------------
constexpr int cells = 1 << 14;
constexpr int steps = 200;
constexpr double wave_c = 0.2;

using bench::heat;
using bench::heat_indexed;

// Wave: next = 2 now - prev + c (now[i-1] - 2 now[i] + now[i+1]), zero outside.
inline auto wave = ctg::kernel<"wave3">([](auto prev, auto now, auto next) {
  auto const n = now.size();
  return ctg::range(n, [=](auto i) {
    return next[i] = 2.0 * now[i] - prev[i] +
                     wave_c * (ctg::select(i > 0, now[i - 1], 0.0) - 2.0 * now[i] + ctg::select(i < n - 1, now[i + 1], 0.0));
  });
});
inline auto wave_indexed = ctg::kernel<"wave_indexed">([](auto u, int t) {
  auto const n = u.shape(1_c);
  return ctg::range(n, [=](auto i) {
    return u(t + 1, i) = 2.0 * u(t, i) - u(t - 1, i) +
                         wave_c * (ctg::select(i > 0, u(t, i - 1), 0.0) - 2.0 * u(t, i) +
                                   ctg::select(i < n - 1, u(t, i + 1), 0.0));
  });
});
inline auto energy = ctg::kernel<"energy">([](auto u, auto loss) {
  return ctg::range(u.size(), [=](auto i) { return loss() += u[i] * u[i]; });
});
inline auto energy_indexed = ctg::kernel<"energy_indexed">([](auto u, auto loss, int t) {
  return ctg::range(u.shape(1_c), [=](auto i) { return loss() += u(t, i) * u(t, i); });
});

std::vector<double> bump() {
  std::vector<double> s(cells);
  for (int i = 0; i < cells; ++i) {
    double const z = double(i - cells / 2) / 300.0;
    s[std::size_t(i)] = std::exp(-z * z);
  }
  return s;
}

// The gradient of the three layouts; each leaves d loss / d(initial state)
// (and, for the heat equation, d loss / d D) where compare() finds it.
struct rollout {
  bool is_heat;
  int levels;  // time levels the scheme starts from: 1 (heat) or 2 (wave)
  std::vector<double> start = bump();
  scalar d{{.name = "D"}}, loss{{.name = "loss"}};
  // in place
  std::vector<vec> buffers;
  std::size_t peak_saved = 0;
  // indexed
  rows u;
  // per step
  std::vector<vec> per_step;

  explicit rollout(bool heat_equation)
      : is_heat(heat_equation), levels(heat_equation ? 1 : 2), u({steps + levels, cells}, {.name = "u"}) {
    d.at() = 0.15;
    // Names built by appending: g++ 12 warns falsely on "b" + std::to_string(k) at -O3 (GCC bug 105329).
    auto named = [](char const* stem, int k) {
      std::string name = stem;
      name += std::to_string(k);
      return name;
    };
    for (int k = 0; k < levels + 1; ++k) buffers.push_back(vec({cells}, {.name = named("b", k)}));
    for (int t = 0; t < steps + levels; ++t) per_step.push_back(vec({cells}, {.name = named("s", t)}));
    for (int k = 0; k < levels; ++k)
      for (int i = 0; i < cells; ++i) u.at(k, i) = start[std::size_t(i)];
  }

  void in_place() {
    ctg::tape tape(loss);
    std::vector<vec> b = buffers;  // handles: the roles rotate, the buffers stay
    loss.fill(0.0);
    for (int k = 0; k < levels; ++k) b[std::size_t(k)].copy_from(start);
    for (int t = 0; t < steps; ++t) {
      if (is_heat) {
        heat(b[0], b[1], d);
        std::swap(b[0], b[1]);
      } else {
        wave(b[0], b[1], b[2]);
        std::rotate(b.begin(), b.begin() + 1, b.end());
      }
    }
    energy(b[std::size_t(levels - 1)], loss);
    tape.backward();
    peak_saved = tape.peak_bytes_saved();
  }
  void indexed() {
    loss.fill(0.0);
    for (int t = levels - 1; t < steps + levels - 1; ++t) is_heat ? heat_indexed(u, d, t) : wave_indexed(u, t);
    energy_indexed(u, loss, steps + levels - 1);
    u.zero_grad();
    d.zero_grad();
    loss.grad().fill(1.0);
    energy_indexed.grad(u, loss, steps + levels - 1);
    for (int t = steps + levels - 2; t >= levels - 1; --t) is_heat ? heat_indexed.grad(u, d, t) : wave_indexed.grad(u, t);
  }
  void on_tape_per_step() {
    ctg::tape tape(loss);
    loss.fill(0.0);
    for (int k = 0; k < levels; ++k) per_step[std::size_t(k)].copy_from(start);
    for (int t = levels - 1; t < steps + levels - 1; ++t) {
      auto const s = std::size_t(t);
      if (is_heat)
        heat(per_step[s], per_step[s + 1], d);
      else
        wave(per_step[s - 1], per_step[s], per_step[s + 1]);
    }
    energy(per_step.back(), loss);
    tape.backward();
    if (tape.bytes_saved() != 0) bench::fail("rollout: the per-step layout saved values");
  }

  // d loss / d(initial state), summed over the initial levels, and d loss / d D.
  std::vector<double> gradient_in_place() const { return sum_levels([&](int k) { return buffers[std::size_t(k)]; }); }
  std::vector<double> gradient_per_step() const { return sum_levels([&](int k) { return per_step[std::size_t(k)]; }); }
  std::vector<double> gradient_indexed() const {
    std::vector<double> g(cells + 1, 0.0);
    for (int k = 0; k < levels; ++k)
      for (int i = 0; i < cells; ++i) g[std::size_t(i)] += u.grad().at(k, i);
    g[cells] = is_heat ? d.grad().at() : 0.0;
    return g;
  }
  template <class F>
  std::vector<double> sum_levels(F field_of) const {
    std::vector<double> g(cells + 1, 0.0);
    for (int k = 0; k < levels; ++k) {
      auto const v = field_of(k).grad().to_vector();
      for (int i = 0; i < cells; ++i) g[std::size_t(i)] += v[std::size_t(i)];
    }
    g[cells] = is_heat ? d.grad().at() : 0.0;
    return g;
  }
};

void BM_rollout(benchmark::State& state) {
  bench::use_threads(state);
  rollout r(state.range(1) == 0);
  char const* what = r.is_heat ? "heat" : "wave";
  // The three layouts must agree before any is timed.
  r.in_place();
  auto const ours = r.gradient_in_place();
  r.indexed();
  bench::compare(ours, r.gradient_indexed(), 1e-9, std::string(what) + " in place against indexed");
  r.on_tape_per_step();
  bench::compare(r.gradient_per_step(), r.gradient_indexed(), 1e-9, std::string(what) + " per step against indexed");
  auto none = [] {};
  auto t = bench::paired<3>(state, {variant{none, [&] { r.in_place(); }}, variant{none, [&] { r.indexed(); }},
                                    variant{none, [&] { r.on_tape_per_step(); }}});
  state.counters["ratio_inplace_over_indexed"] = t[0] / t[1];
  state.counters["ratio_inplace_over_per_step_tape"] = t[0] / t[2];
  state.counters["ratio_per_step_tape_over_indexed"] = t[2] / t[1];
  double const state_bytes = 2.0 * cells * sizeof(double);  // values and gradients of one time level
  state.counters["inplace_state_bytes"] = double(r.levels + 1) * state_bytes;
  state.counters["inplace_saved_bytes"] = double(r.peak_saved);
  state.counters["indexed_state_bytes"] = double(steps + r.levels) * state_bytes;
  state.counters["memory_ratio_inplace_over_indexed"] =
      (double(r.levels + 1) * state_bytes + double(r.peak_saved)) / (double(steps + r.levels) * state_bytes);
}

}  // namespace

BENCHMARK(BM_tape_save)
    ->ArgName("bytes")
    ->Arg(128 << 10)
    ->Arg(1 << 20)
    ->Arg(8 << 20)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK(BM_rollout)
    ->ArgNames({"threads", "workload"})
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
