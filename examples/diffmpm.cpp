// Differentiable MLS-MPM: an elastic square is thrown across a box; gradient
// descent on its initial velocity makes its centre of mass land on a target.
//
// Follows DiffTaichi's diffmpm_simple.py (Hu et al., ICLR 2020, after
// Hu et al., "A moving least squares material point method", SIGGRAPH 2018):
// particle-to-grid with quadratic B-spline weights over a 3x3 stencil, fixed
// corotated elasticity through a 2-D polar decomposition, grid update with
// gravity and walls, grid-to-particle with the affine matrix C, and the loss
// 0.5 |mean position - target|^2 at the last step. Unlike there, the state
// is what an MPM code keeps: one grid, cleared and filled again every step,
// and one set of particles updated in place (DiffTaichi indexes the
// particles by the step, x(t, p), so that its adjoints can read every step's
// values). The tape keeps the copies the adjoints need: each step's particle
// state and grid, saved when the next step overwrites them.
//
//   example_diffmpm            default size (about 20 s on 2 cores)
//   example_diffmpm --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Dense>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;
using vec2 = Eigen::Vector2d;
using mat2 = Eigen::Matrix2d;

namespace {

// Material: Young's modulus and Poisson's ratio, and from them the Lame
// parameters mu and lambda.
constexpr double young = 30, poisson = 0.2;
constexpr double mu = young / (2 * (1 + poisson)), lambda = young * poisson / ((1 + poisson) * (1 - 2 * poisson));
constexpr double gravity = 9.8;
constexpr int bound = 3;  // cells of wall on each side

// [snippet: funcs]
using namespace ctg::literals;  // for 0_c, 1_c, ...
// Quadratic B-spline weights of the three grid nodes around a particle, from
// its offset f in [0.5, 1.5) to the first of them (one axis).
auto const bspline = ctg::func<"bspline">([](auto f) {
  return ctg::vec(0.5 * (1.5 - f) * (1.5 - f), 0.75 - (f - 1.0) * (f - 1.0), 0.5 * (f - 0.5) * (f - 0.5));
});

// The rotation R of the polar decomposition F = R S of a 2x2 matrix.
auto const polar_rotation = ctg::func<"polar_rotation">([](auto F) {
  return ctg::let(F(0_c, 0_c) + F(1_c, 1_c), F(1_c, 0_c) - F(0_c, 1_c), 0.0, [=](auto c, auto s, auto scale) {
    return ctg::block(scale = ctg::rsqrt(c * c + s * s), c = c * scale, s = s * scale,
                      ctg::result(ctg::mat<2, 2>(c, -s, s, c)));
  });
});

// Fixed corotated elasticity: the Kirchhoff stress of deformation F.
auto const kirchhoff = ctg::func<"kirchhoff">([](auto F) {
  mat2 const eye = mat2::Identity();
  return 2 * mu * (F - polar_rotation(F)) * ctg::transpose(F) + eye * (lambda * ctg::det(F) * (ctg::det(F) - 1));
});

// body(i, j) for the nine nodes of the 3x3 stencil, unrolled: an ordinary C++
// function that builds kernel code (ti.static(ti.ndrange(3, 3)) in Taichi).
template <class Body>
constexpr auto stencil(Body body) {
  return ctg::static_range<3>([=](auto i) { return ctg::static_range<3>([=](auto j) { return body(i, j); }); });
}
// [snippet end]

// One MPM step, as four offloads: clear the grid, scatter particles to it,
// update it, gather it back into the particles. In each particle loop, base
// is the first node of the particle's stencil and fx its offset from there,
// in cells.
//
// The particles are updated in place, not ping-ponged between two copies,
// as MPM codes do: a particle's new state depends on its own old state and
// on the grid, never on another particle's, so iteration p reads and
// overwrites only slot p and no copy is needed for the forward pass (double
// buffers are for stencils, where iterations read their neighbours). F is
// overwritten in the scatter, x, v and C in the gather, each after its last
// read in this launch, so the adjoint needs the values the launch began with
// (and the grid as the launch left it): one version of each field, which the
// tape saves when the next step overwrites it. A field read again after this
// launch overwrote it would need two versions and is refused at compile time.
// [snippet: substep]
using namespace ctg::literals;  // for 0_c, 1_c, ...
auto const substep = ctg::kernel<"substep">([](auto x, auto v, auto C, auto F, auto grid_v, auto grid_m,
                                               auto grid_out, int n, double dt, double p_vol) {
  // An n x n grid on the unit box; density 1.
  double const inv_dx = n, p_mass = p_vol;
  double const stress_scale = -dt * p_vol * 4 * inv_dx * inv_dx;
  mat2 const eye = mat2::Identity();
  return ctg::block(
      ctg::ndrange(n, n, [=](auto i, auto j) {
        return ctg::block(grid_v(i, j) = ctg::vec(0.0, 0.0), grid_m(i, j) = 0.0);
      }),
      // P2G: deformation update, stress, and the scatter of momentum and mass.
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<Eigen::Vector2i>(x[p] * inv_dx - 0.5), [=](auto base) {
          return ctg::let(x[p] * inv_dx - ctg::cast<vec2>(base), (eye + dt * C[p]) * F[p], [=](auto fx, auto new_F) {
            return ctg::let(bspline(fx[0_c]), bspline(fx[1_c]), stress_scale * kirchhoff(new_F) + p_mass * C[p],
                            [=](auto wx, auto wy, auto affine) {
              return ctg::block(F[p] = new_F, stencil([=](auto i, auto j) {
                auto const dpos = (ctg::vec(ctg::cast<double>(i), ctg::cast<double>(j)) - fx) / inv_dx;
                auto const weight = wx[i] * wy[j];
                return ctg::block(grid_v(base[0_c] + i, base[1_c] + j) += weight * (p_mass * v[p] + affine * dpos),
                                  grid_m(base[0_c] + i, base[1_c] + j) += weight * p_mass);
              }));
            });
          });
        });
      }),
      // Grid update: momentum to velocity, gravity, walls that stop inflow.
      ctg::ndrange(n, n, [=](auto i, auto j) {
        return ctg::let(grid_v(i, j) / (grid_m(i, j) + 1e-10) + ctg::vec(0.0, -dt * gravity), [=](auto g) {
          return ctg::block(ctg::if_((i < bound && g[0_c] < 0) || (i > n - bound && g[0_c] > 0), g[0_c] = 0.0),
                            ctg::if_((j < bound && g[1_c] < 0) || (j > n - bound && g[1_c] > 0), g[1_c] = 0.0),
                            grid_out(i, j) = g);
        });
      }),
      // G2P: velocity and affine matrix from the grid, then advection.
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<Eigen::Vector2i>(x[p] * inv_dx - 0.5), [=](auto base) {
          return ctg::let(x[p] * inv_dx - ctg::cast<vec2>(base), [=](auto fx) {
            return ctg::let(bspline(fx[0_c]), bspline(fx[1_c]), ctg::vec(0.0, 0.0), mat2(mat2::Zero()),
                            [=](auto wx, auto wy, auto new_v, auto new_C) {
              return ctg::block(stencil([=](auto i, auto j) {
                                  auto const dpos = ctg::vec(ctg::cast<double>(i), ctg::cast<double>(j)) - fx;
                                  auto const g = grid_out(base[0_c] + i, base[1_c] + j);
                                  auto const weight = wx[i] * wy[j];
                                  return ctg::block(new_v += weight * g,
                                                    new_C += (4 * inv_dx * weight) * ctg::outer(g, dpos));
                                }),
                                v[p] = new_v, x[p] = x[p] + dt * new_v, C[p] = new_C);
            });
          });
        });
      }));
});
// [snippet end]

auto const launch = ctg::kernel<"launch">([](auto v, auto init_v) {
  return ctg::range(v.size(), [=](auto p) { return v[p] = init_v(); });
});

// loss = 0.5 |mean position - target|^2: a parallel sum into com, then one
// serial statement.
auto const miss = ctg::kernel<"miss">([](auto x, auto com, auto loss, double target_x, double target_y) {
  return ctg::block(ctg::range(x.size(), [=](auto p) { return com() += x[p] / ctg::cast<double>(x.size()); }),
                    loss() = 0.5 * ctg::norm_sqr(com() - ctg::vec(target_x, target_y)));
});

}  // namespace

int main(int argc, char** argv) {
  auto const opt = example::parse(argc, argv, "diffmpm: throw an elastic square onto a target (after DiffTaichi)");
  int const grid = opt.quick ? 32 : 48;
  double const dt = 1e-3;
  int const steps = opt.quick ? 150 : 400;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 8 : 30;
  int const side = opt.quick ? 10 : 20;  // particles per side of the square
  vec2 const corner(0.15, 0.2), target = opt.quick ? vec2(0.42, 0.35) : vec2(0.7, 0.5);
  double const size = 0.2;
  int const n = side * side;
  double const p_vol = (size / side) * (size / side);
  std::printf("diffmpm: %d particles, %dx%d grid, %d steps, %d iterations\n", n, grid, grid, steps, iterations);

  // One grid and one set of particles, reused by every step.
  ctg::field<vec2, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"});
  ctg::field<mat2, 1, ctg::grad> C({n}, {.name = "C"}), F({n}, {.name = "F"});
  ctg::field<vec2, 2, ctg::grad> grid_v({grid, grid}, {.name = "grid_v"}), grid_out({grid, grid}, {.name = "grid_out"});
  ctg::field<double, 2, ctg::grad> grid_m({grid, grid}, {.name = "grid_m"});
  ctg::field<vec2, 0, ctg::grad> init_v({.name = "init_v"}), com({.name = "com"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  std::vector<vec2> square(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p)
    square[std::size_t(p)] = corner + vec2((p % side + 0.5) / side, (p / side + 0.5) / side) * size;

  // Every throw starts from the undeformed square moving at init_v (the
  // state was overwritten by the last throw); before_step(t) sees the
  // particles at step t.
  auto simulate = [&](auto&& before_step) {
    x.copy_from(square);
    C.fill(mat2::Zero());
    F.fill(mat2::Identity());
    launch(v, init_v);
    for (int t = 0; t < steps; ++t) {
      before_step(t);
      substep(x, v, C, F, grid_v, grid_m, grid_out, grid, dt, p_vol);
    }
    before_step(steps);
    com.fill(vec2::Zero());
    miss(x, com, loss, target.x(), target.y());
  };
  auto const nothing = [](int) {};

  auto const check = ctg::check_gradient({.step = 1e-6}, [&] { simulate(nothing); }, loss, init_v);
  example::print_check(check);

  double const learning_rate = 10;
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate(nothing);
    tape.backward();
    if (it == 0) example::print_tape(tape);
    vec2 const g = init_v.grad().at();
    init_v.at() -= learning_rate * g;
    history.push_back(loss.at());
    example::progress(it, loss.at(), g.norm(), clock.seconds());
  }
  // The last throw again, keeping the particles at 6 moments for the picture.
  int const frames = 5;
  std::vector<std::vector<vec2>> film_x;
  std::vector<std::vector<mat2>> film_F;
  simulate([&](int t) {
    if (t * frames % steps != 0) return;
    film_x.push_back(x.to_vector());
    film_F.push_back(F.to_vector());
  });
  history.push_back(loss.at());
  std::printf("initial velocity (%.3f, %.3f); centre lands at (%.3f, %.3f), target (%.3f, %.3f)\n", init_v.at().x(),
              init_v.at().y(), com.at().x(), com.at().y(), target.x(), target.y());

  // Pictures: the loss, and the square at a few moments of the last throw,
  // coloured by the change of its area (det F - 1: blue compressed, red stretched).
  svg::write_loss_curve(example::picture(opt, "diffmpm_loss.svg"), history, "diffmpm: loss per iteration");
  svg::document doc(520, 560);
  svg::view const view{0, 0, 1, 1, 10, 50, 500, 500};
  double const wall = double(bound) / grid;
  doc.rect(view.px(0), view.py(1), view.px(1) - view.px(0), view.py(0) - view.py(1), "#f4f4f4", "#999999");
  doc.rect(view.px(wall), view.py(1 - wall), view.px(1 - wall) - view.px(wall), view.py(wall) - view.py(1 - wall),
           "#ffffff", "#bbbbbb");
  for (std::size_t f = 0; f < film_x.size(); ++f) {
    for (std::size_t p = 0; p < film_x[f].size(); ++p) {
      double const strain = film_F[f][p].determinant() - 1;
      doc.circle(view.px(film_x[f][p].x()), view.py(film_x[f][p].y()), 3, svg::diverging(strain * 5, 0.55), "none",
                 f + 1 == film_x.size() ? 1.0 : 0.35);
    }
  }
  doc.circle(view.px(target.x()), view.py(target.y()), 6, "none", "#27ae60");
  doc.line(view.px(target.x()) - 10, view.py(target.y()), view.px(target.x()) + 10, view.py(target.y()), "#27ae60", 2);
  doc.line(view.px(target.x()), view.py(target.y()) - 10, view.px(target.x()), view.py(target.y()) + 10, "#27ae60", 2);
  doc.text(20, 30, "diffmpm: the square at 6 moments, coloured by det F - 1", 14);
  doc.save(example::picture(opt, "diffmpm_final.svg"));
  return example::finish(opt, "diffmpm", history.front(), history.back(), 10.0, check.worst_relative_error);
}
