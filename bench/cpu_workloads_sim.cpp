// CPU benchmarks, part 2: the scatter-heavy simulation kernels, a 2-D
// mass-spring force step and one 2-D MLS-MPM step (the workloads are in
// workloads_sim.hpp), checked and timed as in cpu_workloads.cpp.
#include <tuple>
#include <vector>

#include "cpu_support.hpp"
#include "workloads_sim.hpp"

namespace {

using namespace bench::sim;
using bench::variant;

void BM_springs_forward(benchmark::State& state) {
  bench::use_threads(state);
  spring_data d;
  d.clear_forces();
  d.ours_forward();
  auto ours = d.f.to_vector();
  d.clear_forces();
  d.hand_forward();
  bench::compare(ours, d.f.to_vector(), 1e-4, "springs forward");
  auto clear = [&] { d.clear_forces(); };
  auto t = bench::paired<2>(state, {variant{clear, [&] { d.ours_forward(); }}, variant{clear, [&] { d.hand_forward(); }}});
  bench::report_forward(state, spring_forward_bytes, t);
}

void BM_springs_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  spring_data d;
  d.clear_forces();
  d.ours_forward();
  d.reseed();
  d.ours_adjoint();
  auto ours_x = d.x.grad().to_vector();
  auto ours_r = d.rest.grad().to_vector();
  d.x.zero_grad();
  d.rest.zero_grad();
  d.reseed();
  d.hand_adjoint();
  bench::compare(ours_x, d.x.grad().to_vector(), 1e-4, "springs adjoint x.grad");
  bench::compare(ours_r, d.rest.grad().to_vector(), 1e-4, "springs adjoint rest.grad");
  auto reseed = [&] { d.reseed(); };
  auto clear = [&] { d.clear_forces(); };
  auto t = bench::paired<4>(state, {variant{reseed, [&] { d.ours_adjoint(); }}, variant{reseed, [&] { d.hand_adjoint(); }},
                                    variant{clear, [&] { d.ours_forward(); }}, variant{clear, [&] { d.hand_forward(); }}});
  bench::report_adjoint(state, spring_adjoint_bytes, t);
}


void BM_mpm_forward(benchmark::State& state) {
  bench::use_threads(state);
  mpm::data d;
  d.clear_grid();
  d.ours_forward();
  auto ours = mpm::data::concat<vec2>({d.x.to_vector(), d.v.to_vector(), d.grid_v_out.to_vector()});
  auto ours_C = d.C.to_vector();
  d.clear_grid();
  d.hand_forward();
  bench::compare(ours, mpm::data::concat<vec2>({d.x.to_vector(), d.v.to_vector(), d.grid_v_out.to_vector()}), 1e-3,
                 "mpm forward x, v, grid");
  bench::compare(ours_C, d.C.to_vector(), 1e-3, "mpm forward C");
  auto clear = [&] { d.clear_grid(); };
  auto t = bench::paired<2>(state, {variant{clear, [&] { d.ours_forward(); }}, variant{clear, [&] { d.hand_forward(); }}});
  bench::report_forward(state, mpm::data::forward_bytes, t);
}

void BM_mpm_adjoint(benchmark::State& state) {
  bench::use_threads(state);
  mpm::data d;
  d.clear_grid();
  d.ours_forward();
  auto grads = [&] {
    return std::make_tuple(d.x.grad().to_vector(), d.v.grad().to_vector(), d.C.grad().to_vector(),
                           d.F.grad().to_vector());
  };
  d.reseed();
  d.ours_adjoint();
  auto [ox, ov, oC, oF] = grads();
  d.reseed();
  d.hand_adjoint();
  auto [hx, hv, hC, hF] = grads();
  bench::compare(ox, hx, 1e-3, "mpm adjoint x.grad");
  bench::compare(ov, hv, 1e-3, "mpm adjoint v.grad");
  bench::compare(oC, hC, 1e-3, "mpm adjoint C.grad");
  bench::compare(oF, hF, 1e-3, "mpm adjoint F.grad");
  auto reseed = [&] { d.reseed(); };
  auto clear = [&] { d.clear_grid(); };
  // The other variants clear the grid (a host write of grid_v, which
  // grid_op's adjoint reads): k.grad would refuse it (CTG-TAPE-003), so
  // ctgrad's adjoint follows its own forward launch, as in a real step.
  auto forward_then_reseed = [&] {
    d.clear_grid();
    d.ours_forward();
    d.reseed();
  };
  auto t = bench::paired<4>(state, {variant{forward_then_reseed, [&] { d.ours_adjoint(); }}, variant{reseed, [&] { d.hand_adjoint(); }},
                                    variant{clear, [&] { d.ours_forward(); }}, variant{clear, [&] { d.hand_forward(); }}});
  bench::report_adjoint(state, 2.0 * mpm::data::forward_bytes, t);
}

// The MPM adjoint kernel by kernel, each paired with its hand-written
// counterpart and each after the sweeps that run before it in a step (the
// adjoint runs G2P, then the grid update, then P2G), so that each reads the
// seeds the one before it left. Where BM_mpm_adjoint's ratio comes from.
void BM_mpm_adjoint_parts(benchmark::State& state) {
  bench::use_threads(state);
  mpm::data d;
  auto ours_g2p = [&] { mpm::g2p.grad(d.x, d.v, d.C, d.grid_v_out, 0); };
  auto ours_grid = [&] { mpm::grid_op.grad(d.grid_v, d.grid_m, d.grid_v_out); };
  auto ours_p2g = [&] { mpm::p2g.grad(d.x, d.v, d.C, d.F, d.grid_v, d.grid_m, 0); };
  auto hand_g2p = [&] { d.hand_g2p_adjoint(); };
  auto hand_grid = [&] { d.hand_grid_op_adjoint(); };
  auto hand_p2g = [&] { d.hand_p2g_adjoint(); };
  // The setup of kernel `part` (0 G2P, 1 grid, 2 P2G): a forward step, fresh
  // seeds, then the sweeps before that kernel.
  auto until = [&d](int part, auto forward, auto g2p, auto grid) {
    return [&d, part, forward, g2p, grid] {
      d.clear_grid();
      forward();
      d.reseed();
      if (part > 0) g2p();
      if (part > 1) grid();
    };
  };
  auto ours_forward = [&] { d.ours_forward(); };
  auto hand_forward = [&] { d.hand_forward(); };
  auto t = bench::paired<6>(state, {variant{until(0, ours_forward, ours_g2p, ours_grid), ours_g2p},
                                    variant{until(0, hand_forward, hand_g2p, hand_grid), hand_g2p},
                                    variant{until(1, ours_forward, ours_g2p, ours_grid), ours_grid},
                                    variant{until(1, hand_forward, hand_g2p, hand_grid), hand_grid},
                                    variant{until(2, ours_forward, ours_g2p, ours_grid), ours_p2g},
                                    variant{until(2, hand_forward, hand_g2p, hand_grid), hand_p2g}});
  state.counters["ratio_ctgrad_over_hand_g2p_adjoint"] = t[0] / t[1];
  state.counters["ratio_ctgrad_over_hand_grid_adjoint"] = t[2] / t[3];
  state.counters["ratio_ctgrad_over_hand_p2g_adjoint"] = t[4] / t[5];
  state.counters["ratio_ctgrad_over_hand_adjoint"] = (t[0] + t[2] + t[4]) / (t[1] + t[3] + t[5]);
}

void common(benchmark::internal::Benchmark* b) {
  b->Apply(bench::thread_counts)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK(BM_springs_forward)->Apply(common);
BENCHMARK(BM_springs_adjoint)->Apply(common);
BENCHMARK(BM_mpm_forward)->Apply(common);
BENCHMARK(BM_mpm_adjoint)->Apply(common);
BENCHMARK(BM_mpm_adjoint_parts)->Apply(common);

int main(int argc, char** argv) { return bench::run_main(argc, argv); }
