// A checkpointed rollout on decomposed fields: the steps exchange ghost rows
// and backward() runs them again from its snapshots, on every rank in step.
//
// 1-D heat, u(t+1) = u(t) + dt kappa lap u(t), edges held, two buffers
// chosen by the step's parity; the loss is the global sum of (u - target)^2.
// The gradient with respect to kappa and the initial field must equal, to
// 1e-12 relative: the same rollout on the same ranks on a full tape, and
// rank 0's run alone on plain fields. Run on 1 to 4 ranks.
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check_support.hpp"

using namespace ctg::literals;
using namespace mpi_test;

namespace {

constexpr double dt = 0.2;
constexpr int cells = 53, steps = 40;

auto const start = ctg::kernel<"start">([](auto u, auto u0) {
  return ctg::each(u0, [=](auto i) { return u(i) = u0(i); });
});
auto const step = ctg::kernel<"step">([](auto now, auto next, auto kappa) {
  auto const n = now.shape(0_c);
  return ctg::range(n, [=](auto i) {
    return ctg::if_(i > 0 && i < n - 1, next(i) = now(i) + dt * kappa(i) * (now(i + 1) + now(i - 1) - 2 * now(i)),
                    next(i) = now(i));
  });
});
auto const mismatch = ctg::kernel<"mismatch">([](auto u, auto target, auto loss) {
  return ctg::each(u, [=](auto i) { return loss() += ctg::pow(u(i) - target(i), 2.0); });
});

std::vector<double> values(double a, double b) {
  std::vector<double> v(cells);
  for (int i = 0; i < cells; ++i) v[std::size_t(i)] = b + 0.3 * std::sin(a * i);
  return v;
}

struct result {
  double loss = 0;
  std::vector<double> grad_kappa, grad_u0;
  long long recomputed = 0;  // forward steps backward() ran again
  std::vector<std::string> state;
};

// The rollout on fields made by make(name, grad, ghost); snapshots 0: a full tape.
template <class Make, class Exchange, class Sum, class Fill, class Gather>
result run(Make make, Exchange exchange, Sum sum, Fill fill, Gather gather, int snapshots) {
  auto a = make("u_a", 1), b = make("u_b", 1), u0 = make("u0", 0), kappa = make("kappa", 0), target = make("target", 0);
  fill(u0, values(0.21, 0.5));
  fill(kappa, values(0.13, 0.6));
  fill(target, values(0.17, 0.4));
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  ctg::tape tape(loss);
  start(a, u0);
  auto one_step = [&](int t) {
    auto& now = t % 2 == 0 ? a : b;
    auto& next = t % 2 == 0 ? b : a;
    exchange(now);
    step(now, next, kappa);
  };
  ctg::rollout_info const* info = nullptr;
  if (snapshots > 0)
    info = &tape.rollout(steps, one_step, ctg::checkpoint{.snapshots = snapshots});
  else
    for (int t = 0; t < steps; ++t) one_step(t);
  loss.at() = 0;
  mismatch(steps % 2 == 0 ? a : b, target, loss);
  sum(loss);
  tape.backward();
  result r;
  r.loss = loss.at();
  r.grad_kappa = gather(kappa);
  r.grad_u0 = gather(u0);
  if (info) r.recomputed = info->recomputed, r.state = info->state;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  return run_on_world(argc, argv, [](ctg::mpi::grid const& world) {
    using D = ctg::mpi::dfield<double, 1, ctg::grad>;
    auto make_d = [&](char const* name, int ghost) { return D(world, {cells}, ghost, {.name = name}); };
    auto exchange_d = [](D& u) { ctg::mpi::exchange(u); };
    auto sum_d = [&](auto& loss) { ctg::mpi::sum(world, loss); };
    auto fill_d = [](D& u, std::vector<double> const& v) { ctg::mpi::copy_from_global(u, v); };
    auto gather_d = [](D& u) { return ctg::mpi::gather_grad(u); };

    result const full = run(make_d, exchange_d, sum_d, fill_d, gather_d, 0);
    for (int snapshots : {3, 7}) {
      result const ck = run(make_d, exchange_d, sum_d, fill_d, gather_d, snapshots);
      // The schedule ran steps again from its snapshots, and the state it
      // kept is the two buffers (kappa is read only).
      expect(ck.recomputed >= steps - snapshots, "backward() recomputed steps", double(ck.recomputed));
      expect(ck.state.size() == 2, "the state is the two buffers", double(ck.state.size()));
      if (rank_ == 0) {
        expect(std::abs(ck.loss - full.loss) <= 1e-14 * std::abs(full.loss), "checkpointed loss = full tape's",
               ck.loss - full.loss);
        double const rk = relative(ck.grad_kappa, full.grad_kappa), ru = relative(ck.grad_u0, full.grad_u0);
        expect(rk <= 1e-12, "checkpointed gradient (kappa) = full tape's", rk, 1e-12);
        expect(ru <= 1e-12, "checkpointed gradient (u0) = full tape's", ru, 1e-12);
      }
    }

    if (rank_ == 0) {  // one process on plain fields
      using F = ctg::field<double, 1, ctg::grad>;
      auto make_f = [](char const* name, int) { return F({cells}, {.name = name}); };
      auto fill_f = [](F& u, std::vector<double> const& v) { u.copy_from(v); };
      auto gather_f = [](F& u) { return u.grad().to_vector(); };
      result const alone = run(make_f, [](F&) {}, [](auto&) {}, fill_f, gather_f, 5);
      double const rk = relative(full.grad_kappa, alone.grad_kappa), ru = relative(full.grad_u0, alone.grad_u0);
      expect(std::abs(full.loss - alone.loss) <= 1e-12 * std::abs(alone.loss), "decomposed loss = one process's",
             full.loss - alone.loss);
      expect(rk <= 1e-12, "decomposed gradient (kappa) = one process's", rk, 1e-12);
      expect(ru <= 1e-12, "decomposed gradient (u0) = one process's", ru, 1e-12);
      std::printf("rollout on %d ranks: loss %.12g, gradients within %.1e / %.1e of one process\n", world.size(),
                  full.loss, rk, ru);
    }
  });
}
