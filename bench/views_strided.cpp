// Kernels on strided views of an array of structs against the same kernels
// on owning fields, paired in one run (docs/05-performance.md, "Views"):
// the AoS layout (x, v, mass side by side, 28 bytes per particle) against
// three packed fields of the same values. Target: strided/owning <= 1.10,
// forward and gradient.
//
// The forward step and its adjoint are also written by hand over both
// layouts (a loop over the std::vector of structs, and one over three
// arrays, on ctgrad's pool), so that what the layout costs is told apart from
// what the view costs. The hand-written adjoints keep their gradients in
// packed arrays, as ctgrad does for the gradient buffers it allocates.
#include <cmath>
#include <vector>

#include "cpu_support.hpp"
#include "kernels.hpp"

#include <ctgrad/view.hpp>

namespace {

using bench::variant;

using bench::particle;
constexpr int n = 1 << 20;
constexpr float dt = 1e-3f;

auto const& step = bench::particle_step;

void hand_aos(std::vector<particle>& p) {
  particle* q = p.data();
  bench::parallel_for(n, [q](bench::int64 begin, bench::int64 end) {
    for (bench::int64 i = begin; i < end; ++i) {
      q[i].v += dt * Eigen::Vector3f(0.0f, -9.8f, 0.0f) / q[i].mass;
      q[i].x += dt * q[i].v;
    }
  });
}
void hand_soa(std::vector<Eigen::Vector3f>& x, std::vector<Eigen::Vector3f>& v, std::vector<float> const& m) {
  Eigen::Vector3f* xs = x.data();
  Eigen::Vector3f* vs = v.data();
  float const* ms = m.data();
  bench::parallel_for(n, [=](bench::int64 begin, bench::int64 end) {
    for (bench::int64 i = begin; i < end; ++i) {
      vs[i] += dt * Eigen::Vector3f(0.0f, -9.8f, 0.0f) / ms[i];
      xs[i] += dt * vs[i];
    }
  });
}

// The adjoint of the step, written out: x += dt v leaves x's gradient and
// adds dt x.grad to v's; v += dt g / m leaves v's and adds
// v.grad . (-dt g / m^2) to m's. Only the masses are read from the values.
template <class MassAt>
void hand_adjoint(Eigen::Vector3f const* xg, Eigen::Vector3f* vg, float* mg, MassAt mass_at) {
  bench::parallel_for(n, [=](bench::int64 begin, bench::int64 end) {
    Eigen::Vector3f const gravity(0.0f, -9.8f, 0.0f);
    for (bench::int64 i = begin; i < end; ++i) {
      Eigen::Vector3f const gv = vg[i] + dt * xg[i];
      vg[i] = gv;
      float const m = mass_at(i);
      mg[i] -= dt * gv.dot(gravity) / (m * m);
    }
  });
}

void BM_views_step(benchmark::State& state) {
  bench::use_threads(state);
  bool const gradient = state.range(1) != 0;
  auto const start = [](int i) { return Eigen::Vector3f(0.001f * float(i % 97), 1.0f, -0.5f); };

  std::vector<particle> p(n);
  for (int i = 0; i < n; ++i) p[std::size_t(i)] = {start(i), Eigen::Vector3f::Zero(), 1.0f + 0.01f * float(i % 7)};
  auto xs = ctg::view_member<ctg::grad>(p, &particle::x, {.name = "x"});
  auto vs = ctg::view_member<ctg::grad>(p, &particle::v, {.name = "v"});
  auto ms = ctg::view_member<ctg::grad>(p, &particle::mass, {.name = "m"});

  ctg::field<Eigen::Vector3f, 1, ctg::grad> xo({n}, {.name = "x"}), vo({n}, {.name = "v"});
  ctg::field<float, 1, ctg::grad> mo({n}, {.name = "m"});
  for (int i = 0; i < n; ++i) {
    xo.at(i) = p[std::size_t(i)].x;
    vo.at(i) = p[std::size_t(i)].v;
    mo.at(i) = p[std::size_t(i)].mass;
  }
  // One step on both: the views and the owning fields agree to the bit.
  step(xs, vs, ms, dt);
  step(xo, vo, mo, dt);
  for (int i = 0; i < n; i += 4099)
    if (xs.at(i) != xo.at(i) || vs.at(i) != vo.at(i)) bench::fail("views: strided and owning steps differ");

  std::vector<particle> q = p;
  std::vector<Eigen::Vector3f> hx(n), hv(n);
  std::vector<float> hm(n);
  for (std::size_t i = 0; i < std::size_t(n); ++i) {
    hx[i] = q[i].x;
    hv[i] = q[i].v;
    hm[i] = q[i].mass;
  }

  auto none = [] {};
  if (gradient) {
    // Packed gradients for the hand-written adjoints, seeded like ctgrad's.
    Eigen::Vector3f const seed(1.0f, 0.5f, -2.0f);
    std::vector<Eigen::Vector3f> xg(n, seed), vg(n, Eigen::Vector3f::Zero());
    std::vector<float> mg(n, 0.0f);
    std::vector<Eigen::Vector3f> xg_soa = xg, vg_soa = vg;
    std::vector<float> mg_soa = mg;
    particle const* structs = q.data();
    float const* masses = hm.data();
    auto const adjoint_aos = [&] {
      hand_adjoint(xg.data(), vg.data(), mg.data(), [structs](bench::int64 i) { return structs[i].mass; });
    };
    auto const adjoint_soa = [&] {
      hand_adjoint(xg_soa.data(), vg_soa.data(), mg_soa.data(), [masses](bench::int64 i) { return masses[i]; });
    };
    // One adjoint from the same seeds on all four: the gradients agree.
    xs.zero_grad(), vs.zero_grad(), ms.zero_grad();
    xo.zero_grad(), vo.zero_grad(), mo.zero_grad();
    xs.grad().fill(seed);
    xo.grad().fill(seed);
    step.grad(xs, vs, ms, dt);
    step.grad(xo, vo, mo, dt);
    adjoint_aos();
    adjoint_soa();
    auto const near = [](float a, float b) { return std::abs(a - b) <= 1e-5f * std::max(1.0f, std::abs(b)); };
    for (int i = 0; i < n; i += 4099) {
      float const want = mg[std::size_t(i)];
      if (!near(ms.grad().at(i), want) || !near(mo.grad().at(i), want) || !near(mg_soa[std::size_t(i)], want) ||
          !(vs.grad().at(i) - vg[std::size_t(i)]).isZero(1e-6f))
        bench::fail("views: the adjoints of the step disagree");
    }
    auto t = bench::paired<4>(state, {variant{none, [&] { step.grad(xs, vs, ms, dt); }},
                                      variant{none, [&] { step.grad(xo, vo, mo, dt); }},
                                      variant{none, adjoint_aos}, variant{none, adjoint_soa}});
    state.counters["ratio_strided_over_owning"] = t[0] / t[1];
    state.counters["ratio_hand_aos_over_hand_soa"] = t[2] / t[3];
    state.counters["ratio_strided_over_hand_aos"] = t[0] / t[2];
    state.counters["ratio_owning_over_hand_soa"] = t[1] / t[3];
  } else {
    auto t = bench::paired<4>(state, {variant{none, [&] { step(xs, vs, ms, dt); }},
                                      variant{none, [&] { step(xo, vo, mo, dt); }},
                                      variant{none, [&] { hand_aos(q); }},
                                      variant{none, [&] { hand_soa(hx, hv, hm); }}});
    state.counters["ratio_strided_over_owning"] = t[0] / t[1];
    state.counters["ratio_hand_aos_over_hand_soa"] = t[2] / t[3];
    state.counters["ratio_strided_over_hand_aos"] = t[0] / t[2];
    state.counters["ratio_owning_over_hand_soa"] = t[1] / t[3];
  }
  state.SetItemsProcessed(state.iterations() * n);
}

}  // namespace

BENCHMARK(BM_views_step)
    ->ArgNames({"threads", "grad"})
    ->ArgsProduct({{1, bench::all_threads()}, {0, 1}})
    ->UseManualTime()
    ->Repetitions(5)  // the ratios move by a few percent from run to run: report medians
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMillisecond);
int main(int argc, char** argv) { return bench::run_main(argc, argv); }
