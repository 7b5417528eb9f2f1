// Decomposed fields in device memory: the heat inverse problem of
// heat_problem.hpp with every block on the GPU (kernels on the CUDA backend
// over the owned rows, halos staged through the host unless MPI is
// CUDA-aware) must give the loss and gradients of one process on the host to
// 1e-12 relative, and move the same bytes as host blocks. A launch that reads
// past the ghost layers is refused as on the host (CTG-MPI-001).
//
// Without a device every rank reports "skipped" (exit code 77, which CTest
// counts as skipped).
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "check_support.hpp"
#include "heat_problem.hpp"

using namespace ctg::literals;
using namespace mpi_test;

namespace {

auto const reach_two = ctg::kernel<"reach_two">([](auto u, auto v) {
  auto const n = u.shape(0_c);
  return ctg::range(n, [=](auto i) { return ctg::if_(i + 2 < n, v(i) = u(i + 2), v(i) = 0.0); });
});

void ghost_too_narrow(ctg::mpi::grid const& world) {
  using D = ctg::mpi::dfield<double, 1>;
  D u(world, {12}, 1, {.name = "u", .space = ctg::device}), v(world, {12}, 1, {.name = "v", .space = ctg::device});
  ctg::mpi::exchange(u);
  std::string what;
  try {
    reach_two(u, v);
  } catch (ctg::launch_error const& e) {
    what = e.what();
  }
  expect(what.find("CTG-MPI-001") != std::string::npos && what.find("'u'") != std::string::npos &&
             what.find("+2") != std::string::npos,
         "device blocks: a read past the ghost layers is CTG-MPI-001 naming the field and the offset");
}

}  // namespace

int main(int argc, char** argv) {
  return run_on_world(argc, argv, [](ctg::mpi::grid const& world) {
    std::string why;
    int here = ctg::cuda::device_available(&why) ? 1 : 0, everywhere = 0;
    MPI_Allreduce(&here, &everywhere, 1, MPI_INT, MPI_MIN, world.comm());
    if (everywhere == 0) {
      if (rank_ == 0) std::printf("skipped: decomposed device fields need a GPU on every rank (%s)\n", why.c_str());
      return 77;
    }
    heat_result href;
    if (rank_ == 0) href = heat_plain();
    expect_same_heat(world, heat_decomposed(world, ctg::device), href, "device blocks");
    ghost_too_narrow(world);
    return verdict(world.comm());
  });
}
