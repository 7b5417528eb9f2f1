// Runs one variant of one CPU workload on one thread, for instruction counts
// that do not drift with the machine's clock:
//
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=measured
//            bench_profile_counts mpm_g2p ctgrad_adjoint
//
// counts only what runs inside measured(): the chosen variant, after the
// workload's setup and one warm-up call. bench/profile.sh runs every
// combination and writes bench/results/instructions.csv. Without valgrind the
// program just runs the variant (and prints the element count the
// instruction counts are divided by).
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "workloads_basic.hpp"
#include "workloads_sim.hpp"

namespace {

struct runnable {
  long long elements;  // what "per element" means for this workload
  std::function<void()> setup;
  std::function<void()> run;
};

// The function callgrind's --toggle-collect names.
[[gnu::noinline]] void measured(runnable const& r) {
  r.run();
  asm volatile("" ::: "memory");
}

// One-element launch: what a launch costs apart from its iterations.
inline auto tiny_kernel = ctg::kernel<"tiny">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * 2.0f; });
});

int usage() {
  std::fprintf(stderr,
               "usage: bench_profile_counts WORKLOAD VARIANT\n"
               "  WORKLOAD: launch map wave recurrence reduction springs mpm mpm_p2g mpm_grid mpm_g2p\n"
               "  VARIANT:  ctgrad_forward hand_forward ctgrad_adjoint hand_adjoint\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  std::string const workload = argv[1], which = argv[2];
  bool const adjoint = which.find("adjoint") != std::string::npos;
  bool const ours = which.rfind("ctgrad", 0) == 0;
  if (which != "ctgrad_forward" && which != "hand_forward" && which != "ctgrad_adjoint" && which != "hand_adjoint")
    return usage();
  ctg::set_num_threads(1);
  auto none = [] {};
  runnable r;

  if (workload == "launch") {
    static ctg::field<float, 1, ctg::grad> x({1}, {.name = "x"}), y({1}, {.name = "y"});
    static float *xs = x.data(), *ys = y.data(), *gx = x.grad().data(), *gy = y.grad().data();
    auto hand_fwd = [] { bench::parallel_for(1, [&](bench::int64 b, bench::int64 e) { for (auto i = b; i < e; ++i) ys[i] = xs[i] * 2.0f; }); };
    auto hand_adj = [] {
      bench::parallel_for(1, [&](bench::int64 b, bench::int64 e) {
        for (auto i = b; i < e; ++i) {
          gx[i] += 2.0f * gy[i];
          gy[i] = 0.0f;
        }
      });
    };
    r = {1, none,
         adjoint ? (ours ? std::function<void()>([] { tiny_kernel.grad(x, y); }) : hand_adj)
                 : (ours ? std::function<void()>([] { tiny_kernel(x, y); }) : hand_fwd)};
  } else if (workload == "map") {
    static bench::basic::map_data d;
    r = {bench::basic::map_n, [] { d.reseed(); },
         adjoint ? (ours ? std::function<void()>([] { bench::basic::map_kernel.grad(d.x, d.y); }) : [] { d.hand_adjoint(); })
                 : (ours ? std::function<void()>([] { bench::basic::map_kernel(d.x, d.y); }) : [] { d.hand_forward(); })};
  } else if (workload == "wave") {
    static bench::basic::wave_data d;
    d.ours_forward();
    r = {(long long)bench::basic::wave_cells * bench::basic::wave_steps, [] { d.reseed(); },
         adjoint ? (ours ? std::function<void()>([] { d.ours_adjoint(); }) : [] { d.hand_adjoint(); })
                 : (ours ? std::function<void()>([] { d.ours_forward(); }) : [] { d.hand_forward(); })};
  } else if (workload == "recurrence") {
    static bench::basic::rec_data d;
    d.ours_forward();
    r = {(long long)bench::basic::rec_n * bench::basic::rec_iters, [] { d.reseed(); },
         adjoint ? (ours ? std::function<void()>([] { d.ours_adjoint(); }) : [] { d.hand_adjoint(); })
                 : (ours ? std::function<void()>([] { d.ours_forward(); }) : [] { d.hand_forward(); })};
  } else if (workload == "reduction") {
    static bench::basic::red_data d;
    *d.gl = 1.0f;
    r = {bench::basic::red_n, [] { d.clear(); },
         adjoint ? (ours ? std::function<void()>([] { bench::basic::red_kernel.grad(d.x, d.loss); }) : [] { d.hand_adjoint(); })
                 : (ours ? std::function<void()>([] { bench::basic::red_kernel(d.x, d.loss); }) : [] { d.hand_forward(); })};
  } else if (workload == "springs") {
    static bench::sim::spring_data d;
    d.clear_forces();
    d.ours_forward();
    r = {bench::sim::springs, [] { d.clear_forces(), d.reseed(); },
         adjoint ? (ours ? std::function<void()>([] { d.ours_adjoint(); }) : [] { d.hand_adjoint(); })
                 : (ours ? std::function<void()>([] { d.ours_forward(); }) : [] { d.hand_forward(); })};
  } else if (workload.rfind("mpm", 0) == 0) {
    namespace m = bench::sim::mpm;
    static m::data d;
    d.clear_grid();
    d.ours_forward();
    std::string const part = workload == "mpm" ? "" : workload.substr(4);
    // A part's adjoint needs the gradients the later parts leave: run those first in setup.
    std::function<void()> fwd, adj, setup;
    if (part.empty()) {
      fwd = ours ? std::function<void()>([] { d.ours_forward(); }) : [] { d.hand_forward(); };
      adj = ours ? std::function<void()>([] { d.ours_adjoint(); }) : [] { d.hand_adjoint(); };
      setup = adjoint ? std::function<void()>([] { d.reseed(); }) : [] { d.clear_grid(); };
    } else if (part == "p2g") {
      fwd = ours ? std::function<void()>([] { m::p2g(d.x, d.v, d.C, d.F, d.grid_v, d.grid_m, 0); }) : [] { d.hand_p2g(); };
      adj = ours ? std::function<void()>([] { m::p2g.grad(d.x, d.v, d.C, d.F, d.grid_v, d.grid_m, 0); })
                 : [] { d.hand_p2g_adjoint(); };
      setup = adjoint ? std::function<void()>([] {
        d.reseed();
        d.hand_g2p_adjoint();
        d.hand_grid_op_adjoint();
      })
                      : [] { d.clear_grid(); };
    } else if (part == "grid") {
      fwd = ours ? std::function<void()>([] { m::grid_op(d.grid_v, d.grid_m, d.grid_v_out); }) : [] { d.hand_grid_op(); };
      adj = ours ? std::function<void()>([] { m::grid_op.grad(d.grid_v, d.grid_m, d.grid_v_out); })
                 : [] { d.hand_grid_op_adjoint(); };
      setup = adjoint ? std::function<void()>([] {
        d.reseed();
        d.hand_g2p_adjoint();
      })
                      : none;
    } else if (part == "g2p") {
      fwd = ours ? std::function<void()>([] { m::g2p(d.x, d.v, d.C, d.grid_v_out, 0); }) : [] { d.hand_g2p(); };
      adj = ours ? std::function<void()>([] { m::g2p.grad(d.x, d.v, d.C, d.grid_v_out, 0); }) : [] { d.hand_g2p_adjoint(); };
      setup = adjoint ? std::function<void()>([] { d.reseed(); }) : none;
    } else {
      return usage();
    }
    long long const n = part == "grid" ? (long long)m::n_grid * m::n_grid : (long long)m::n_particles;
    r = {n, setup, adjoint ? adj : fwd};
  } else {
    return usage();
  }

  r.setup();
  r.run();  // warm-up: page faults, pool start
  r.setup();
  measured(r);
  std::printf("%s %s elements %lld\n", workload.c_str(), which.c_str(), r.elements);
  return 0;
}
