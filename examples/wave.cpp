// A 2-D wave equation on a grid: gradient descent on the initial height field
// so that, after T steps, the waves it sends out form a target pattern (the
// letters "CTG").
//
// Follows DiffTaichi's wave.py (Hu et al., ICLR 2020): the same explicit
// finite-difference scheme p(t) = 2 p(t-1) - p(t-2) + (c dt / dx)^2 lap p(t-1)
// with the Courant number of its alpha = 0 case, a squared-difference loss at
// the last step, and plain gradient descent on the initial field. Unlike
// there, the height field is not stored per step, p(t, i, j): the scheme needs
// two earlier levels, so the state is three buffers (p(t-2), p(t-1), p(t))
// whose roles rotate every step, as a finite-difference code keeps them. The
// tape copies nothing: the scheme is linear with constant coefficients, so
// no adjoint reads a value. The target is drawn from a 5x7 font instead of
// read from an image; the edges are held at zero; the wave starts at rest
// (p(0) = p(1)).
//
//   example_wave            default size (about 12 s on 2 cores)
//   example_wave --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;

namespace {

constexpr double courant2 = 1.0 / 3;  // (c dt / dx)^2

// The first two levels, p(0) = p(1) = initial: the wave starts at rest.
auto const start = ctg::kernel<"start">([](auto prev, auto now, auto initial) {
  return ctg::each(initial, [=](auto i, auto j) {
    return ctg::block(prev(i, j) = initial(i, j), now(i, j) = initial(i, j));
  });
});

// One step: next = p(t) from now = p(t-1) and prev = p(t-2), the edges held
// at zero. Three fields, so the loop writes one and reads the others: no
// iteration reads what another writes, and the adjoint runs in parallel too.
// (Updated in one buffer, an iteration would read a neighbour another
// iteration overwrites: a race, which the gradient checks reject as
// CTG-AD-002.) Every element of next is written, the edges too: the buffer
// held p(t-3) before.
// [snippet: fdtd]
using namespace ctg::literals;  // for 0_c, 1_c, ...
auto const fdtd = ctg::kernel<"fdtd">([](auto prev, auto now, auto next) {
  auto const n = now.shape(0_c);
  return ctg::ndrange(n, n, [=](auto i, auto j) {
    auto const laplacian = now(i + 1, j) + now(i - 1, j) + now(i, j + 1) + now(i, j - 1) - 4 * now(i, j);
    return ctg::if_(i > 0 && i < n - 1 && j > 0 && j < n - 1,
                    next(i, j) = 2 * now(i, j) - prev(i, j) + courant2 * laplacian, next(i, j) = 0.0);
  });
});
// [snippet end]

// The squared difference from the target, summed over the grid.
auto const mismatch = ctg::kernel<"mismatch">([](auto p, auto target, auto loss) {
  return ctg::each(target, [=](auto i, auto j) { return loss() += ctg::pow(p(i, j) - target(i, j), 2.0); });
});

// "CTG" in a 5x7 font, scaled to fill most of an n x n grid, minus its mean.
std::vector<double> letters(int n) {
  char const* glyphs[3][7] = {
      {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."},
      {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."},
      {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".###."}};
  int const scale = std::max(1, (n - 4) / 18);
  int const left = (n - 17 * scale) / 2, top = (n - 7 * scale) / 2;
  std::vector<double> out(std::size_t(n * n), 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      int const row = (i - top) / scale, column = (j - left) / scale;
      if (i < top || j < left || row >= 7 || column >= 17 || column % 6 == 5) continue;
      out[std::size_t(i * n + j)] = glyphs[column / 6][row][column % 6] == '#' ? 1.0 : 0.0;
    }
  double mean = 0;
  for (double v : out) mean += v / double(out.size());
  for (double& v : out) v -= mean;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto const opt = example::parse(argc, argv, "wave: an initial height field whose waves write CTG (after DiffTaichi)");
  int const n = opt.quick ? 40 : 80;
  int const steps = opt.quick ? 40 : 160;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 20 : 60;
  std::printf("wave: %dx%d grid, %d steps, %d iterations\n", n, n, steps, iterations);

  // p(t-2), p(t-1), p(t): the roles move one buffer on every step.
  ctg::field<double, 2, ctg::grad> prev({n, n}, {.name = "p_a"}), now({n, n}, {.name = "p_b"}),
      next({n, n}, {.name = "p_c"});
  ctg::field<double, 2, ctg::grad> initial({n, n}, {.name = "initial"});
  ctg::field<double, 2> target({n, n}, {.name = "target"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  target.copy_from(letters(n));

  // [snippet: simulate]
  auto simulate = [&] {
    start(prev, now, initial);
    for (int t = 2; t <= steps; ++t) {
      fdtd(prev, now, next);
      std::swap(prev, now);  // field handles: swapping them moves no values
      std::swap(now, next);  // now = p(t), prev = p(t-1); next, p(t-2), is overwritten next
    }
    loss.at() = 0;
    mismatch(now, target, loss);
  };
  // [snippet end]

  auto const check = ctg::check_gradient({.samples_per_field = 12}, simulate, loss, initial);
  example::print_check(check);

  double const learning_rate = 0.25;
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate();
    tape.backward();
    if (it == 0) example::print_tape(tape);
    double const g = initial.grad().map().norm();
    initial.map() -= learning_rate * initial.grad().map();
    history.push_back(loss.at());
    example::progress(it, loss.at(), g, clock.seconds());
  }
  simulate();
  history.push_back(loss.at());

  // Pictures: the loss, and target / optimised initial field / field at the last step.
  svg::write_loss_curve(example::picture(opt, "wave_loss.svg"), history, "wave: loss per iteration");
  svg::document doc(960, 370);
  std::vector<double> const last = now.to_vector();  // p(steps)
  doc.panel(0, target.to_vector(), n, n, "target");
  doc.panel(1, initial.to_vector(), n, n, "optimised initial field p(0)");
  doc.panel(2, last, n, n, "p(" + std::to_string(steps) + "): the waves it makes");
  doc.save(example::picture(opt, "wave_final.svg"));
  return example::finish(opt, "wave", history.front(), history.back(), 5.0, check.worst_relative_error);
}
