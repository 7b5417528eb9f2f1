// The C++ side of the peer comparison (bench/peers/): ctgrad and the
// hand-written loops of bench/workloads_basic.hpp and workloads_sim.hpp, one
// whole gradient per call, behind a C interface that bench/peers/native.py
// loads with ctypes. Each peer's process times its own gradient alternately
// with these two, so every ratio to the hand-written code is paired within
// one process, as in the C++ benchmarks (cpu_support.hpp).
//
// A gradient here is what a training step pays: clearing the gradient
// buffers (and the forces the spring forward accumulates into), seeding the
// output's gradient, the forward pass and the adjoint. The inputs and the
// hand-written gradient are exported for the peers, which compute theirs
// from the same numbers; ctgrad's gradient is checked against the
// hand-written one when a workload is opened (a mismatch aborts).
//
// The C++ side runs in a mode of its own choosing, not in whatever mode the
// peer left the thread in: Taichi and Quadrants set the calling thread to
// flush subnormals when they start and leave it so. The hand-written code and
// ctgrad run with IEEE subnormals; a third system is ctgrad with subnormals
// flushed (ctg::set_flush_subnormals), the mode JAX, Taichi and Quadrants
// run their kernels in.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../cpu_support.hpp"
#include "../workloads_basic.hpp"
#include "../workloads_sim.hpp"

namespace {

// A named array the peers read: float32 or int32, row-major.
struct array {
  std::string name;
  char dtype;  // 'f' float32, 'i' int32
  std::vector<std::int64_t> shape;
  std::vector<float> floats;
  std::vector<std::int32_t> ints;
  void const* data() const { return dtype == 'f' ? static_cast<void const*>(floats.data()) : ints.data(); }
};

array floats(std::string name, std::vector<std::int64_t> shape, float const* p) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return {std::move(name), 'f', std::move(shape), std::vector<float>(p, p + n), {}};
}
array ints(std::string name, std::vector<std::int64_t> shape, std::int32_t const* p) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return {std::move(name), 'i', std::move(shape), {}, std::vector<std::int32_t>(p, p + n)};
}

struct workload {
  virtual ~workload() = default;
  virtual void clear() = 0;  // gradient buffers, seeds, accumulated outputs
  virtual void ours() = 0;   // ctgrad value and gradient
  virtual void hand() = 0;   // hand-written value and gradient
  virtual std::vector<array> gradient() = 0;
  std::vector<array> inputs;
  std::string scalars;  // JSON object
  double rtol = 1e-4;   // for ctgrad against the hand-written gradient
};

struct map_workload final : workload {
  bench::basic::map_data d;
  map_workload() {
    inputs = {floats("x", {bench::basic::map_n}, d.xs), floats("seed", {bench::basic::map_n}, d.seed.data())};
    scalars = "{}";
    rtol = 1e-5;
  }
  void clear() override {
    d.x.zero_grad();
    d.reseed();
  }
  // Each side's fastest way: one sweep for the value and the gradient.
  void ours() override { bench::map_kernel.value_and_grad(d.x, d.y); }
  void hand() override { d.hand_value_and_gradient(); }
  std::vector<array> gradient() override { return {floats("x", {bench::basic::map_n}, d.gx)}; }
};

struct wave_workload final : workload {
  bench::basic::wave_data d;
  wave_workload() {
    using namespace bench::basic;
    d.reseed();
    inputs = {floats("u0", {wave_cells}, d.val[0]), floats("u1", {wave_cells}, d.val[1]),
              floats("seed", {wave_cells}, d.grad[wave_rows - 1])};
    scalars = "{\"c\": " + std::to_string(d.c) + ", \"steps\": " + std::to_string(wave_steps) + "}";
    rtol = 2e-3;  // as in cpu_workloads.cpp: 200 float steps summed in another order
  }
  void clear() override { d.reseed(); }
  void ours() override {
    d.ours_forward();
    d.ours_adjoint();
  }
  void hand() override {
    d.hand_forward();
    d.hand_adjoint();
  }
  // Rows 0 and 1 hold the gradient with respect to the initial state.
  std::vector<array> gradient() override {
    return {floats("u0", {bench::basic::wave_cells}, d.grad[0]), floats("u1", {bench::basic::wave_cells}, d.grad[1])};
  }
};

struct spring_workload final : workload {
  bench::sim::spring_data d;
  spring_workload() {
    using namespace bench::sim;
    inputs = {floats("x", {masses, 2}, d.xs[0].data()), ints("a", {springs}, d.as), ints("b", {springs}, d.bs),
              floats("rest", {springs}, d.rs), floats("seed", {masses, 2}, d.seed[0].data())};
    scalars = "{\"k\": " + std::to_string(d.k) + "}";
  }
  void clear() override {
    d.clear_forces();
    d.reseed();
    d.x.zero_grad();
    d.rest.zero_grad();
  }
  void ours() override {
    d.ours_forward();
    d.ours_adjoint();
  }
  void hand() override {
    d.hand_forward();
    d.hand_adjoint();
  }
  std::vector<array> gradient() override {
    using namespace bench::sim;
    return {floats("x", {masses, 2}, d.gx[0].data()), floats("rest", {springs}, d.gr)};
  }
};

struct recurrence_workload final : workload {
  bench::basic::rec_data d;
  recurrence_workload() {
    using namespace bench::basic;
    inputs = {floats("x", {rec_n}, d.xs), floats("seed", {rec_n}, d.seed.data())};
    scalars = "{\"a\": " + std::to_string(d.a) + ", \"b\": " + std::to_string(d.b) +
              ", \"iters\": " + std::to_string(rec_iters) + "}";
  }
  void clear() override {
    d.x.zero_grad();
    d.reseed();
  }
  void ours() override { bench::basic::rec_kernel.value_and_grad(d.x, d.out, bench::basic::rec_iters, d.a, d.b); }
  void hand() override { d.hand_value_and_gradient(); }
  std::vector<array> gradient() override { return {floats("x", {bench::basic::rec_n}, d.gx)}; }
};

struct opened {
  std::unique_ptr<workload> w;
  std::vector<array> reference;  // the hand-written gradient
  std::string description;
};
std::vector<opened> workloads;

std::string describe(std::vector<array> const& arrays) {
  std::string s = "[";
  for (std::size_t k = 0; k < arrays.size(); ++k) {
    auto const& a = arrays[k];
    s += std::string(k ? ", " : "") + "{\"name\": \"" + a.name + "\", \"dtype\": \"" + (a.dtype == 'f' ? "float32" : "int32") +
         "\", \"shape\": [";
    for (std::size_t i = 0; i < a.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
    s += "]}";
  }
  return s + "]";
}

std::string info_json;

// The systems ctg_peers_gradient runs (bench/peers/native.py names them).
constexpr int hand_written = 0, ctgrad_ieee = 1, ctgrad_flushed = 2;

// One whole gradient of `w` by `which`, its buffers cleared first, with the
// calling thread in IEEE mode for the call (ctgrad with subnormals flushed
// sets its own mode per launch; where the build has no such mode it runs in
// IEEE mode too).
void run_system(workload& w, int which) {
  w.clear();
  ctg::cpu::subnormal_mode_scope const ieee(0);
  ctg::set_flush_subnormals(which == ctgrad_flushed && ctg::subnormal_flush_available);
  if (which == hand_written)
    w.hand();
  else
    w.ours();
  ctg::set_flush_subnormals(false);
}

}  // namespace

extern "C" {

// Opens a workload ("map", "wave", "springs", "recurrence") on a pool of
// `threads` threads: builds its data, runs ctgrad's and the hand-written
// gradient and compares them (a mismatch aborts). Returns a handle, or -1
// for an unknown name.
int ctg_peers_open(char const* name, int threads) {
  ctg::set_num_threads(threads);
  std::string const n = name;
  std::unique_ptr<workload> w;
  if (n == "map") w = std::make_unique<map_workload>();
  else if (n == "wave") w = std::make_unique<wave_workload>();
  else if (n == "springs") w = std::make_unique<spring_workload>();
  else if (n == "recurrence") w = std::make_unique<recurrence_workload>();
  else return -1;
  run_system(*w, hand_written);
  auto reference = w->gradient();
  for (int which : {ctgrad_ieee, ctgrad_flushed}) {
    run_system(*w, which);
    auto const ours = w->gradient();
    std::string const mode = which == ctgrad_flushed ? " (subnormals flushed)" : "";
    for (std::size_t k = 0; k < ours.size(); ++k)
      bench::compare(ours[k].floats, reference[k].floats, w->rtol, n + " gradient " + ours[k].name + mode);
  }
  opened o{std::move(w), std::move(reference), {}};
  o.description = "{\"inputs\": " + describe(o.w->inputs) + ", \"gradient\": " + describe(o.reference) +
                  ", \"scalars\": " + o.w->scalars + "}";
  workloads.push_back(std::move(o));
  return int(workloads.size()) - 1;
}

// JSON: the inputs, the gradient's arrays and the scalars of a workload.
char const* ctg_peers_describe(int handle) { return workloads[std::size_t(handle)].description.c_str(); }

// Input k (which = 0) or the hand-written gradient's array k (which = 1).
void const* ctg_peers_data(int handle, int which, int k) {
  auto const& o = workloads[std::size_t(handle)];
  return (which == 0 ? o.w->inputs : o.reference)[std::size_t(k)].data();
}

// One whole gradient (system 0: hand-written, 1: ctgrad, 2: ctgrad with
// subnormals flushed); returns seconds.
double ctg_peers_gradient(int handle, int which) {
  auto& w = *workloads[std::size_t(handle)].w;
  return bench::seconds([&] { run_system(w, which); });
}

// JSON: compiler, flags, threads of the C++ side.
char const* ctg_peers_info() {
#if defined(__clang__)
  std::string compiler = std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  std::string compiler = std::string("g++ ") + __VERSION__;
#else
  std::string compiler = "unknown";
#endif
  info_json = "{\"compiler\": \"" + compiler + "\", \"flags\": \"" + CTGRAD_BENCH_FLAGS +
              "\", \"threads\": " + std::to_string(ctg::num_threads()) + ", \"ctgrad_version\": \"" +
              std::to_string(CTG_VERSION_MAJOR) + "." + std::to_string(CTG_VERSION_MINOR) + "." +
              std::to_string(CTG_VERSION_PATCH) + "\"}";
  return info_json.c_str();
}

}  // extern "C"
