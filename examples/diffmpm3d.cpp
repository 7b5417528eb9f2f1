// Differentiable 3-D MLS-MPM: an elastic cube is thrown through a box;
// gradient descent on its initial velocity makes its centre of mass land on a
// target.
//
// After DiffTaichi's diffmpm3d.py (Hu et al., ICLR 2020) and the 2-D example
// next to this one (diffmpm.cpp), in three dimensions: particle-to-grid with
// quadratic B-spline weights over a 3x3x3 stencil, fixed corotated elasticity
// through the polar decomposition ctg::polar_r (a 3x3 SVD by Jacobi sweeps,
// with its adjoint), grid update with gravity and walls on all six sides,
// grid-to-particle with the affine matrix C, and the loss
// 0.5 |mean position - target|^2 at the last step. DiffTaichi's robot moves
// by actuated stress; here the parameter is the initial velocity, as in the
// 2-D example. As there, the state is what an MPM code keeps: one grid,
// cleared and filled again every step, and one set of particles updated in
// place; the tape saves each step's particle state and grid when the next
// step overwrites them.
//
//   example_diffmpm3d            default size
//   example_diffmpm3d --quick    small and fast; checks loss and gradient
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "common.hpp"
#include "svg.hpp"

using namespace ctg::literals;
using vec3 = Eigen::Vector3d;
using mat3 = Eigen::Matrix3d;

namespace {

// Material: Young's modulus and Poisson's ratio, and from them the Lame
// parameters mu and lambda.
constexpr double young = 30, poisson = 0.2;
constexpr double mu = young / (2 * (1 + poisson)), lambda = young * poisson / ((1 + poisson) * (1 - 2 * poisson));
constexpr double gravity = 9.8;
constexpr int bound = 3;  // cells of wall on each side

// Quadratic B-spline weights of the three grid nodes around a particle, from
// its offset f in [0.5, 1.5) to the first of them (one axis).
auto const bspline = ctg::func<"bspline">([](auto f) {
  return ctg::vec(0.5 * (1.5 - f) * (1.5 - f), 0.75 - (f - 1.0) * (f - 1.0), 0.5 * (f - 0.5) * (f - 0.5));
});

// [snippet: funcs]
using namespace ctg::literals;  // for 0_c, 1_c, ...
// Fixed corotated elasticity: the Kirchhoff stress 2 mu (F - R) F^T +
// lambda (J - 1) J I of deformation F, with R the rotation of F = R S.
auto const kirchhoff = ctg::func<"kirchhoff">([](auto F) {
  mat3 const eye = mat3::Identity();
  return ctg::let(ctg::det(F), [=](auto J) {
    return ctg::result(2 * mu * (F - ctg::polar_r(F)) * ctg::transpose(F) + eye * (lambda * J * (J - 1)));
  });
});

// body(i, j, k) for the 27 nodes of the 3x3x3 stencil, as one loop inside
// the particle's iteration. The 2-D example unrolls its 9 nodes with
// static_range; 27 unrolled copies of the scatter, the gather and their
// adjoints take g++ minutes and gigabytes, one loop body seconds.
template <class Body>
constexpr auto stencil(Body body) {
  return ctg::range(27_c, [=](auto node) { return body(node / 9, node / 3 % 3, node % 3); });
}

// The node offset (i, j, k) of the stencil as a vector.
template <class I, class J, class K>
constexpr auto offset(I i, J j, K k) {
  return ctg::vec(ctg::cast<double>(i), ctg::cast<double>(j), ctg::cast<double>(k));
}
// [snippet end]

// One MPM step as four offloads: clear the grid, scatter the particles to
// it, update it, gather it back into the particles. In each particle loop,
// base is the first node of the particle's stencil and fx its offset from
// there, in cells. The particles are updated in place, as in the 2-D
// example: F is overwritten in the scatter, x, v and C in the gather, each
// after its last read in this launch.
auto const substep = ctg::kernel<"substep">([](auto x, auto v, auto C, auto F, auto grid_v, auto grid_m,
                                               auto grid_out, int n, double dt, double p_vol) {
  double const inv_dx = n, p_mass = p_vol;  // an n^3 grid on the unit box; density 1
  double const stress_scale = -dt * p_vol * 4 * inv_dx * inv_dx;
  mat3 const eye = mat3::Identity();
  return ctg::block(
      ctg::ndrange(n, n, n, [=](auto i, auto j, auto k) {
        return ctg::block(grid_v(i, j, k) = ctg::vec(0.0, 0.0, 0.0), grid_m(i, j, k) = 0.0);
      }),
      // P2G: deformation update, stress, and the scatter of momentum and mass.
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<Eigen::Vector3i>(x[p] * inv_dx - 0.5), [=](auto base) {
          return ctg::let(x[p] * inv_dx - ctg::cast<vec3>(base), (eye + dt * C[p]) * F[p], [=](auto fx, auto new_F) {
            return ctg::let(bspline(fx[0_c]), bspline(fx[1_c]), bspline(fx[2_c]),
                            stress_scale * kirchhoff(new_F) + p_mass * C[p], p_mass * v[p],
                            [=](auto wx, auto wy, auto wz, auto affine, auto momentum) {
              return ctg::block(F[p] = new_F, stencil([=](auto i, auto j, auto k) {
                auto const dpos = (offset(i, j, k) - fx) / inv_dx;
                auto const weight = wx[i] * wy[j] * wz[k];
                return ctg::block(
                    grid_v(base[0_c] + i, base[1_c] + j, base[2_c] + k) += weight * (momentum + affine * dpos),
                    grid_m(base[0_c] + i, base[1_c] + j, base[2_c] + k) += weight * p_mass);
              }));
            });
          });
        });
      }),
      // Grid update: momentum to velocity, gravity, walls that stop inflow.
      ctg::ndrange(n, n, n, [=](auto i, auto j, auto k) {
        return ctg::let(grid_v(i, j, k) / (grid_m(i, j, k) + 1e-10) + ctg::vec(0.0, -dt * gravity, 0.0), [=](auto g) {
          return ctg::block(ctg::if_((i < bound && g[0_c] < 0) || (i > n - bound && g[0_c] > 0), g[0_c] = 0.0),
                            ctg::if_((j < bound && g[1_c] < 0) || (j > n - bound && g[1_c] > 0), g[1_c] = 0.0),
                            ctg::if_((k < bound && g[2_c] < 0) || (k > n - bound && g[2_c] > 0), g[2_c] = 0.0),
                            grid_out(i, j, k) = g);
        });
      }),
      // G2P: velocity and affine matrix from the grid, then advection.
      ctg::range(x.size(), [=](auto p) {
        return ctg::let(ctg::cast<Eigen::Vector3i>(x[p] * inv_dx - 0.5), [=](auto base) {
          return ctg::let(x[p] * inv_dx - ctg::cast<vec3>(base), [=](auto fx) {
            return ctg::let(bspline(fx[0_c]), bspline(fx[1_c]), bspline(fx[2_c]), ctg::vec(0.0, 0.0, 0.0),
                            mat3(mat3::Zero()), [=](auto wx, auto wy, auto wz, auto new_v, auto new_C) {
              return ctg::block(stencil([=](auto i, auto j, auto k) {
                                  auto const dpos = offset(i, j, k) - fx;
                                  auto const g = grid_out(base[0_c] + i, base[1_c] + j, base[2_c] + k);
                                  auto const weight = wx[i] * wy[j] * wz[k];
                                  return ctg::block(new_v += weight * g,
                                                    new_C += (4 * inv_dx * weight) * ctg::outer(g, dpos));
                                }),
                                v[p] = new_v, x[p] = x[p] + dt * new_v, C[p] = new_C);
            });
          });
        });
      }));
});

auto const launch = ctg::kernel<"launch">([](auto v, auto init_v) {
  return ctg::range(v.size(), [=](auto p) { return v[p] = init_v(); });
});

// loss = 0.5 |mean position - target|^2: a parallel sum into com, then one
// serial statement.
auto const miss = ctg::kernel<"miss">([](auto x, auto com, auto loss, double tx, double ty, double tz) {
  return ctg::block(ctg::range(x.size(), [=](auto p) { return com() += x[p] / ctg::cast<double>(x.size()); }),
                    loss() = 0.5 * ctg::norm_sqr(com() - ctg::vec(tx, ty, tz)));
});

}  // namespace

int main(int argc, char** argv) {
  auto const opt =
      example::parse(argc, argv, "diffmpm3d: throw an elastic cube onto a target in 3-D (after DiffTaichi)");
  int const grid = opt.quick ? 16 : 24;
  double const dt = 1e-3;
  int const steps = opt.quick ? 80 : 250;
  int const iterations = opt.iterations >= 0 ? opt.iterations : opt.quick ? 8 : 30;
  int const side = opt.quick ? 6 : 10;  // particles per edge of the cube
  vec3 const corner(0.25, 0.3, 0.4), target = opt.quick ? vec3(0.45, 0.4, 0.56) : vec3(0.62, 0.42, 0.6);
  double const size = 0.2;
  int const n = side * side * side;
  double const p_vol = std::pow(size / side, 3);
  std::printf("diffmpm3d: %d particles, %d^3 grid, %d steps, %d iterations\n", n, grid, steps, iterations);

  // One grid and one set of particles, reused by every step.
  ctg::field<vec3, 1, ctg::grad> x({n}, {.name = "x"}), v({n}, {.name = "v"});
  ctg::field<mat3, 1, ctg::grad> C({n}, {.name = "C"}), F({n}, {.name = "F"});
  ctg::field<vec3, 3, ctg::grad> grid_v({grid, grid, grid}, {.name = "grid_v"}),
      grid_out({grid, grid, grid}, {.name = "grid_out"});
  ctg::field<double, 3, ctg::grad> grid_m({grid, grid, grid}, {.name = "grid_m"});
  ctg::field<vec3, 0, ctg::grad> init_v({.name = "init_v"}), com({.name = "com"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  std::vector<vec3> cube(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p)
    cube[std::size_t(p)] = corner + size * vec3((p % side + 0.5) / side, ((p / side) % side + 0.5) / side,
                                                (p / (side * side) + 0.5) / side);

  // Every throw starts from the cube at rest and undeformed (the state was
  // overwritten by the last one); before_step(t) sees the particles at step t.
  auto simulate = [&](auto&& before_step) {
    x.copy_from(cube);
    C.fill(mat3::Zero());
    F.fill(mat3::Identity());
    launch(v, init_v);
    for (int t = 0; t < steps; ++t) {
      before_step(t);
      substep(x, v, C, F, grid_v, grid_m, grid_out, grid, dt, p_vol);
    }
    before_step(steps);
    com.fill(vec3::Zero());
    miss(x, com, loss, target.x(), target.y(), target.z());
  };
  auto const nothing = [](int) {};

  auto const check = ctg::check_gradient({.step = 1e-6}, [&] { simulate(nothing); }, loss, init_v);
  example::print_check(check);

  // The centre moves by about T = steps * dt times a change of the initial
  // velocity, so the loss is close to 0.5 T^2 |v - v*|^2: a step of 0.5 / T^2
  // halves the distance to v* per iteration.
  double const flight = steps * dt, learning_rate = 0.5 / (flight * flight);
  std::vector<double> history;
  for (int it = 0; it < iterations; ++it) {
    example::stopwatch clock;
    ctg::tape tape(loss);
    simulate(nothing);
    tape.backward();
    if (it == 0) example::print_tape(tape);
    vec3 const g = init_v.grad().at();
    init_v.at() -= learning_rate * g;
    history.push_back(loss.at());
    example::progress(it, loss.at(), g.norm(), clock.seconds());
  }
  // The last throw again, keeping the particles at 6 moments for the picture.
  int const frames = 5;
  std::vector<std::vector<vec3>> film_x;
  std::vector<std::vector<mat3>> film_F;
  simulate([&](int t) {
    if (t * frames % steps != 0) return;
    film_x.push_back(x.to_vector());
    film_F.push_back(F.to_vector());
  });
  history.push_back(loss.at());
  std::printf("initial velocity (%.3f, %.3f, %.3f); centre lands at (%.3f, %.3f, %.3f), target (%.3f, %.3f, %.3f)\n",
              init_v.at().x(), init_v.at().y(), init_v.at().z(), com.at().x(), com.at().y(), com.at().z(),
              target.x(), target.y(), target.z());

  // Pictures: the loss, and the cube at a few moments of the last throw in an
  // oblique projection (x right, y up, z receding to the upper right),
  // coloured by the change of its volume (det F - 1: blue compressed, red
  // stretched); far particles are drawn first and fainter.
  svg::write_loss_curve(example::picture(opt, "diffmpm3d_loss.svg"), history, "diffmpm3d: loss per iteration");
  svg::document doc(560, 600);
  svg::view const view{0, 0, 1.35, 1.35, 10, 50, 540, 540};
  double const depth_x = 0.35, depth_y = 0.35;  // where the z axis points in the picture
  auto project = [&](vec3 const& q) {
    return std::pair{view.px(q.x() + depth_x * q.z()), view.py(q.y() + depth_y * q.z())};
  };
  // The box: its back face, its front face and the edges between them.
  double const lo = double(bound) / grid, hi = 1 - lo;
  auto face = [&](double z, char const* colour) {
    std::vector<std::pair<double, double>> ring;
    for (vec3 c : {vec3(lo, lo, z), vec3(hi, lo, z), vec3(hi, hi, z), vec3(lo, hi, z), vec3(lo, lo, z)})
      ring.push_back(project(c));
    doc.polyline(ring, colour, 1);
  };
  face(hi, "#bbbbbb");
  for (vec3 c : {vec3(lo, lo, 0), vec3(hi, lo, 0), vec3(hi, hi, 0), vec3(lo, hi, 0)}) {
    auto [x0, y0] = project(vec3(c.x(), c.y(), lo));
    auto [x1, y1] = project(vec3(c.x(), c.y(), hi));
    doc.line(x0, y0, x1, y1, "#dddddd");
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  for (std::size_t f = 0; f < film_x.size(); ++f) {
    auto const& xs = film_x[f];
    std::iota(order.begin(), order.end(), 0);
    auto const farther = [&](int a, int b) { return xs[std::size_t(a)].z() > xs[std::size_t(b)].z(); };
    std::sort(order.begin(), order.end(), farther);
    for (int p : order) {
      auto const& q = xs[std::size_t(p)];
      auto [px, py] = project(q);
      double const strain = film_F[f][std::size_t(p)].determinant() - 1;
      double const near = std::clamp(1.2 - q.z(), 0.3, 1.0);
      doc.circle(px, py, 2.5, svg::diverging(strain * 5, 0.55), "none", (f + 1 == film_x.size() ? 1.0 : 0.3) * near);
    }
  }
  face(lo, "#888888");
  auto [gx, gy] = project(target);
  doc.circle(gx, gy, 6, "none", "#27ae60");
  doc.line(gx - 10, gy, gx + 10, gy, "#27ae60", 2);
  doc.line(gx, gy - 10, gx, gy + 10, "#27ae60", 2);
  doc.text(20, 30, "diffmpm3d: the cube at 6 moments, coloured by det F - 1", 14);
  doc.save(example::picture(opt, "diffmpm3d_final.svg"));
  return example::finish(opt, "diffmpm3d", history.front(), history.back(), 10.0, check.worst_relative_error);
}
