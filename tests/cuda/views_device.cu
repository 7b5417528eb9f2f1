// Views of device memory the program owns: a strided view of integers (one
// member of an array of structs, in device memory) bounds a nested loop, so
// the adstack is sized on the host from a copy of those elements; values and
// gradients match the same kernel on a host view of the same structs.
#include <doctest/doctest.h>

#include <cmath>
#include <cuda_runtime_api.h>
#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <vector>

namespace {

struct cell {
  int steps;     // iterations of the recurrence for this element
  float weight;  // beside it: what a packed copy of `steps` would read as an integer
};

}  // namespace

TEST_CASE("a strided device view of integers bounds a nested loop: the adstack is sized from its elements") {
  int const n = 1024;
  std::vector<cell> cells(n);
  for (int i = 0; i < n; ++i) cells[std::size_t(i)] = {1 + i % 9, 0.5f + 0.001f * float(i)};
  cell* device_cells = nullptr;
  REQUIRE(cudaMalloc(&device_cells, sizeof(cell) * n) == cudaSuccess);
  REQUIRE(cudaMemcpy(device_cells, cells.data(), sizeof(cell) * n, cudaMemcpyHostToDevice) == cudaSuccess);
  {
    auto host_steps = ctg::view_member(cells, &cell::steps, {.name = "steps"});
    auto device_steps = ctg::strided_view(&device_cells->steps, {n}, {std::int64_t(sizeof(cell))},
                                          {.name = "steps", .space = ctg::device});
    ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
    std::vector<double> xs(n);
    for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.3 + 0.4 * std::sin(0.21 * i);
    x.copy_from(xs);
    auto dx = x.clone(ctg::device), dy = y.clone(ctg::device);
    y.grad().fill(1.0);
    dy.grad().fill(1.0);
    auto k = ctg::kernel<"recurrence">([](auto x, auto y, auto steps) {
      return ctg::range(x.size(), [=](auto i) {
        return y[i] = ctg::let(x[i], [=](auto v) {
          return ctg::block(ctg::range(steps[i], [=](auto) { return v = ctg::sin(v) * 1.2 + 0.1; }), ctg::result(v));
        });
      });
    });
    k(x, y, host_steps);
    k(dx, dy, device_steps);
    k.grad(x, y, host_steps);
    k.grad(dx, dy, device_steps);
    std::vector<double> const yh = y.to_vector(), yd = dy.to_vector();
    std::vector<double> const gh = x.grad().to_vector(), gd = dx.grad().to_vector();
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      worst = std::max(worst, std::abs(yd[std::size_t(i)] - yh[std::size_t(i)]));
      worst = std::max(worst, std::abs(gd[std::size_t(i)] - gh[std::size_t(i)]));
    }
    CHECK(worst <= 1e-12);
    // The gradient of one element by hand: prod over the steps of 1.2 cos(v_k).
    double v = xs[5], g = 1.0;
    for (int s = 0; s < cells[5].steps; ++s) {
      g *= 1.2 * std::cos(v);
      v = std::sin(v) * 1.2 + 0.1;
    }
    CHECK(gd[5] == doctest::Approx(g).epsilon(1e-12));
  }
  cudaFree(device_cells);
}
