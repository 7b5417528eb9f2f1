// Bad input on decomposed fields is an exception with an ID that names the
// kernel, the field and the rank, on every rank, never a hang or an
// out-of-bounds read; each case next to its fixed variant, which must run.
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "check_support.hpp"

using namespace ctg::literals;
using namespace mpi_test;

namespace {

// f() throws E and its message holds every one of `parts`.
template <class E>
void expect_error(char const* name, std::function<void()> const& f, std::vector<std::string> const& parts) {
  try {
    f();
  } catch (E const& e) {
    std::string const what = e.what();
    for (auto const& p : parts)
      if (what.find(p) == std::string::npos) {
        ++failures;
        std::printf("FAIL (rank %d) %s: '%s' not in: %s\n", rank_, name, p.c_str(), what.c_str());
      }
    if (rank_ == 0) std::printf("%s: %s\n", name, what.c_str());
    return;
  } catch (std::exception const& e) {
    ++failures;
    std::printf("FAIL (rank %d) %s: another exception: %s\n", rank_, name, e.what());
    return;
  }
  ++failures;
  std::printf("FAIL (rank %d) %s: no exception\n", rank_, name);
}
void expect_runs(char const* name, std::function<void()> const& f) {
  try {
    f();
  } catch (std::exception const& e) {
    ++failures;
    std::printf("FAIL (rank %d) %s: %s\n", rank_, name, e.what());
  }
}

using D = ctg::mpi::dfield<double, 1, ctg::grad>;

auto const reach2 = ctg::kernel<"reach2">([](auto u, auto v) {
  auto const n = u.shape(0_c);
  return ctg::range(n, [=](auto i) { return ctg::if_(i + 2 < n, v(i) = u(i + 2), v(i) = 0.0); });
});
auto const shift_write = ctg::kernel<"shift_write">([](auto u, auto v) {
  auto const n = u.shape(0_c);
  return ctg::range(n, [=](auto i) { return ctg::if_(i + 1 < n, v(i + 1) = u(i), v(i) = 0.0); });
});
auto const neighbour = ctg::kernel<"neighbour">([](auto u, auto v) {
  auto const n = u.shape(0_c);
  return ctg::range(n, [=](auto i) { return ctg::if_(i + 1 < n, v(i) = u(i + 1), v(i) = 0.0); });
});
auto const aligned_write = ctg::kernel<"aligned_write">([](auto u, auto v) {
  return ctg::each(u, [=](auto i) { return v(i) = u(i); });
});
auto const first_row = ctg::kernel<"first_row">([](auto u, auto v) {
  return ctg::each(v, [=](auto i) { return v(i) = u(0) * 2.0; });
});
auto const twice = ctg::kernel<"twice">([](auto u, auto v) { return ctg::each(u, [=](auto i) { return v(i) = 2.0 * u(i); }); });
auto const thrice = ctg::kernel<"thrice">([](auto u, auto v) { return ctg::each(u, [=](auto i) { return v(i) = 3.0 * u(i); }); });
auto const total = ctg::kernel<"total">([](auto v, auto loss) { return ctg::each(v, [=](auto i) { return loss() += v(i); }); });

}  // namespace

int main(int argc, char** argv) {
  return run_on_world(argc, argv, [](ctg::mpi::grid const& world) {
    int const ranks = world.size();
    std::string const on_rank = "rank " + std::to_string(rank_);
    int const n = 12;

    // CTG-MPI-001: a read two rows away with one ghost layer.
    D u(world, {n}, 1, {.name = "u"}), v(world, {n}, 1, {.name = "v"});
    u.fill(1.0);
    ctg::mpi::exchange(u);
    expect_error<ctg::launch_error>("ghost width", [&] { reach2(u, v); },
                                    {"CTG-MPI-001", "kernel 'reach2'", "field 'u'", "offset +2", on_rank});
    D u2(world, {n}, 2, {.name = "u2"});
    u2.fill(1.0);
    ctg::mpi::exchange(u2);
    expect_runs("ghost width 2", [&] { reach2(u2, v); });

    // CTG-MPI-002: a write one row away.
    expect_error<ctg::launch_error>("ghost write", [&] { shift_write(u, v); },
                                    {"CTG-MPI-002", "kernel 'shift_write'", "field 'v'", "offset 1", on_rank});
    expect_runs("aligned write", [&] { aligned_write(u, v); });

    // CTG-MPI-003: fields of one launch split differently.
    D w(world, {n + ranks}, 1, {.name = "w"});
    expect_error<ctg::launch_error>("mismatched decompositions", [&] { aligned_write(u, w); },
                                    {"CTG-MPI-003", "kernel 'aligned_write'", "'u'", "'w'", on_rank});

    // CTG-MPI-004: ghost rows read after a write, before an exchange.
    aligned_write(v, u);  // writes u: its ghosts are stale now
    expect_error<ctg::launch_error>("stale ghosts", [&] { neighbour(u, v); },
                                    {"CTG-MPI-004", "kernel 'neighbour'", "field 'u'", "exchange(u)", on_rank});
    expect_runs("exchanged ghosts", [&] {
      ctg::mpi::exchange(u);
      neighbour(u, v);
    });

    // CTG-MPI-007: a split-axis index that is not the loop index plus a constant.
    expect_error<ctg::launch_error>("opaque index", [&] { first_row(u, v); },
                                    {"CTG-MPI-007", "kernel 'first_row'", "field 'u'", on_rank});

    // CTG-MPI-008: a ghost layer deeper than a neighbour's block.
    if (ranks > 1)
      expect_error<ctg::launch_error>("ghost deeper than a block",
                                      [&] { D deep(world, {2 * ranks}, 3, {.name = "deep"}); },
                                      {"CTG-MPI-008", "field 'deep'", on_rank, "ghost width 3"});
    // Device blocks in a program built without CUDA: the field's own error
    // (device.cu runs them where CUDA is).
    expect_error<ctg::launch_error>("device field without CUDA",
                                    [&] { D g(world, {n}, 1, {.name = "g", .space = ctg::device}); },
                                    {"field 'g'", "without CUDA", "ctgrad::cuda"});

    // CTG-MPI-005: ranks recording different kernels, or a different number
    // of steps, on one tape: found at backward() on every rank.
    if (ranks > 1) {
      auto record = [&](bool diverge_kernel, bool diverge_count) {
        ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
        ctg::tape tape(loss);
        ctg::mpi::exchange(u);
        if (diverge_kernel && rank_ == ranks - 1)
          thrice(u, v);
        else
          twice(u, v);
        // (An extra exchange on one rank would wait for its neighbours in
        // the forward pass already: a collective step cannot diverge. A
        // launch can.)
        if (diverge_count && rank_ == 0) twice(u, v);
        total(v, loss);
        ctg::mpi::sum(world, loss);
        tape.backward();
      };
      expect_error<ctg::mpi::mpi_error>("different kernels", [&] { record(true, false); },
                                        {"CTG-MPI-005", "step #2", on_rank});
      if (rank_ == ranks - 1) {
        expect_error<ctg::mpi::mpi_error>("different kernels (the rank that differs)", [&] { record(true, false); },
                                          {"kernel 'thrice' on 'u' 'v'", "between rank 0 and rank " + std::to_string(ranks - 1)});
      } else {
        expect_error<ctg::mpi::mpi_error>("different kernels (the others)", [&] { record(true, false); },
                                          {"kernel 'twice' on 'u' 'v'", "between rank 0 and rank " + std::to_string(ranks - 1)});
      }
      expect_error<ctg::mpi::mpi_error>("different step counts", [&] { record(false, true); },
                                        {"CTG-MPI-005", "step #3", "between rank 0 and rank 1", on_rank});
      expect_runs("the same steps", [&] { record(false, false); });
      // The gradient of that run: loss = sum 2 u over all rows, so u.grad = 2
      // on the owned rows (the exchange's adjoint cleared the ghost rows).
      bool ok = true;
      for (int i = u.owned_lo(); i < u.owned_hi(); ++i) ok = ok && u.grad().at(i - u.first_row()) == 2.0;
      for (int k = 0; k < u.ghost(); ++k)
        ok = ok && u.grad().at(k) == 0.0 && u.grad().at(u.local_rows() - 1 - k) == 0.0;
      if (!ok) {
        ++failures;
        std::printf("FAIL (rank %d): gradient of the same steps\n", rank_);
      }
    } else {
      std::printf("CTG-MPI-005 (ranks recording different steps) needs 2 ranks or more: not run on 1\n");
    }

    // CTG-MPI-006: an MPI call that fails (a message to a rank that does not exist).
    expect_error<ctg::mpi::mpi_error>("MPI error",
                                      [&] {
                                        char byte = 0;
                                        world.check(MPI_Send(&byte, 1, MPI_BYTE, ranks + 3, 0, world.comm()),
                                                    "MPI_Send", "kernel 'probe'", "u");
                                      },
                                      {"CTG-MPI-006", "MPI_Send", "kernel 'probe'", "field 'u'", on_rank});
  });
}
