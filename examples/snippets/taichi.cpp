// docs/coming-from-taichi.md: Taichi/DiffTaichi idioms in ctgrad.
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "check.hpp"

using namespace ctg::literals;

int main() {
  int const n = 16;
  // [snippet: fields]
  // x = ti.field(ti.f32, shape=(steps, n), needs_grad=True)
  ctg::field<float, 2, ctg::grad> x({8, n}, {.name = "x"});
  // loss = ti.field(ti.f32, shape=(), needs_grad=True)
  ctg::field<float, 0, ctg::grad> loss({.name = "loss"});
  // v = ti.Vector.field(2, dtype=ti.f64, shape=n)
  ctg::field<Eigen::Vector2d, 1> v({n}, {.name = "v"});
  // [snippet end]

  // [snippet: kernel]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  // @ti.func
  // def sq(a): return a * a
  auto sq = ctg::func<"sq">([](auto a) { return a * a; });
  // @ti.kernel
  // def step(t: ti.i32):
  //     for i in range(n):                        # parallel top-level loop
  //         x[t + 1, i] = x[t, i] + 0.1 * sq(x[t, i])
  auto step = ctg::kernel<"step">([=](auto x, int t) {
    return ctg::range(x.shape(1_c), [=](auto i) { return x(t + 1, i) = x(t, i) + 0.1f * sq(x(t, i)); });
  });
  // @ti.kernel
  // def compute_loss(t: ti.i32):
  //     for i in x:                               # struct-for over a 1-d slice: a range here
  //         loss[None] += x[t, i]                 # atomic, as in Taichi
  auto compute_loss = ctg::kernel<"compute_loss">([](auto x, auto loss, int t) {
    return ctg::range(x.shape(1_c), [=](auto i) { return loss() += x(t, i); });
  });
  // [snippet end]

  // [snippet: tape]
  // with ti.ad.Tape(loss=loss):
  //     for t in range(7): step(t)
  //     compute_loss(7)
  for (int i = 0; i < n; ++i) x.at(0, i) = 0.01f * i;
  {
    ctg::tape tape(loss);
    loss.at() = 0;
    for (int t = 0; t < 7; ++t) step(x, t);
    compute_loss(x, loss, 7);
    tape.backward();
  }
  // print(x.grad.to_numpy()[0])
  std::vector<float> dx0(n);
  for (int i = 0; i < n; ++i) dx0[std::size_t(i)] = x.grad().at(0, i);
  // [snippet end]
  check(dx0[0] == 1.0f && dx0[15] > 1.0f, "tape");

  // [snippet: loops]
  // for i, j in ti.ndrange(4, 4):         ->  ctg::ndrange(4, 4, [=](auto i, auto j) { ... })
  // for i, j in grid:   (struct-for)      ->  ctg::each(grid, [=](auto i, auto j) { ... })
  // for k in ti.static(range(3)):         ->  ctg::static_range<3>([=](auto k) { ... })
  // ti.loop_config(serialize=True)        ->  ctg::serial_range(n, [=](auto i) { ... })
  ctg::field<double, 2> grid({4, 4}, {.name = "grid"});
  auto fill = ctg::kernel<"fill">([](auto grid) {
    return ctg::block(ctg::each(grid, [=](auto i, auto j) { return grid(i, j) = ctg::cast<double>(i * 4 + j); }),
                      ctg::ndrange(4, 4, [=](auto i, auto j) {
                        return ctg::static_range<3>([=](auto k) { return grid(i, j) += ctg::cast<double>(k); });
                      }));
  });
  fill(grid);
  // [snippet end]
  check(grid.at(3, 3) == 15 + 3, "loops");

  // [snippet: vectors]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  // Taichi: a * b on two vectors is elementwise, a @ b the matrix product.
  // Eigen (and ctgrad): * between matrices is the matrix product; write
  // elementwise products by component.
  ctg::field<Eigen::Vector2d, 1> a({2}, {.name = "a"}), b({2}, {.name = "b"}), c({2}, {.name = "c"});
  ctg::field<Eigen::Matrix2d, 1> m({2}, {.name = "m"});
  auto products = ctg::kernel<"products">([](auto a, auto b, auto c, auto m) {
    return ctg::range(a.size(), [=](auto i) {
      return ctg::block(c[i] = ctg::vec(a[i][0_c] * b[i][0_c], a[i][1_c] * b[i][1_c]),  // Taichi a * b
                        m[i] = ctg::outer(a[i], b[i]),                                // a.outer_product(b)
                        c[i] = m[i] * c[i]);                                          // m @ c
    });
  });
  // [snippet end]
  a.fill(Eigen::Vector2d(1, 2)), b.fill(Eigen::Vector2d(3, 4));
  products(a, b, c, m);
  check(c.at(0).x() == 3 * 3 + 4 * 8 && c.at(1).y() == 6 * 3 + 8 * 8, "vectors");

  // [snippet: mod]
  // Python's % and // round towards minus infinity; C++ (and ctgrad) towards
  // zero: (-3) % 4 is 1 in Taichi, -3 here. For a wrap-around index:
  ctg::field<int, 1> wrapped({5}, {.name = "wrapped"});
  auto wrap = ctg::kernel<"wrap">([](auto wrapped) {
    return ctg::range(wrapped.size(), [=](auto i) { return wrapped[i] = ((i - 3) % 4 + 4) % 4; });
  });
  // [snippet end]
  wrap(wrapped);
  check(wrapped.at(0) == 1 && wrapped.at(4) == 1, "mod");
  return 0;
}
