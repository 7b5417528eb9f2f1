// A decomposed field on one rank: a halo exchange and a sum on a tape, and
// the gradient of sum(u^2) (2 u, in closed form).
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <cmath>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    ctg::mpi::grid world;
    ctg::mpi::dfield<double, 1, ctg::grad> u(world, {8}, 1, {.name = "u"});
    for (int i = u.owned_lo(); i < u.owned_hi(); ++i) u.at(i) = 0.5 * i;
    ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
    auto squares = ctg::kernel<"squares">([](auto u, auto loss) {
      return ctg::each(u, [=](auto i) { return loss() += u[i] * u[i]; });
    });
    {
      ctg::tape tape(loss);
      ctg::mpi::exchange(u);
      squares(u, loss);
      ctg::mpi::sum(world, loss);
      tape.backward();
    }
    std::vector<double> const g = ctg::mpi::gather_grad(u);  // the whole field's, on rank 0
    if (world.rank() == 0)
      for (int i = 0; i < 8; ++i)
        if (std::abs(g[std::size_t(i)] - 2 * 0.5 * i) > 1e-12) status = 1;
  }
  MPI_Finalize();
  return status;
}
