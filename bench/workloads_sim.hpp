// The scatter-heavy CPU workloads: a 2-D mass-spring force step (forces
// accumulated with += into a vector field at random spring ends) and one 2-D
// MLS-MPM step (P2G, grid update, G2P with 2x2 matrices). For each, the ctgrad
// kernels and hand-written forward and adjoint loops on the same data (the
// adjoints derived from the math in the comments). cpu_workloads_sim.cpp
// times them; profile_counts.cpp runs them one at a time.
#pragma once
#include <Eigen/Core>
#include <Eigen/LU>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "cpu_support.hpp"
#include "kernels.hpp"

namespace bench::sim {

using bench::spring_kernel;

using vec2 = Eigen::Vector2f;
using vec3 = Eigen::Vector3f;
using mat2 = Eigen::Matrix2f;
using namespace ctg::literals;

// A reproducible stream of numbers in [-1, 1).
struct lcg {
  unsigned state;
  unsigned next() { return state = state * 1664525u + 1013904223u; }
  float uniform() { return float(next() >> 8) / float(1u << 23) - 1.0f; }
};

// ---- mass-spring: 64K masses, 256K springs between random pairs of nearby masses ----------------
constexpr int masses = 1 << 16;  // a 256 x 256 sheet
constexpr int springs = 1 << 18;

struct spring_data {
  ctg::field<vec2, 1, ctg::grad> x{{masses}, {.name = "x"}}, f{{masses}, {.name = "f"}};
  ctg::field<int, 1> a{{springs}, {.name = "a"}}, b{{springs}, {.name = "b"}};
  ctg::field<float, 1, ctg::grad> rest{{springs}, {.name = "rest"}};
  float const k = 10.0f;
  vec2 *xs = x.data(), *fs = f.data(), *gx = x.grad().data(), *gf = f.grad().data();
  int *as = a.data(), *bs = b.data();
  float *rs = rest.data(), *gr = rest.grad().data();
  std::vector<vec2> seed = std::vector<vec2>(masses);

  spring_data() {
    lcg r{12345};
    for (int i = 0; i < masses; ++i) {
      xs[i] = vec2(float(i % 256), float(i / 256)) + 0.2f * vec2(r.uniform(), r.uniform());
      seed[std::size_t(i)] = vec2(r.uniform(), r.uniform());
    }
    for (int s = 0; s < springs; ++s) {
      as[s] = int(r.next() % masses);
      bs[s] = (as[s] + 1 + int(r.next() % 64)) % masses;
      rs[s] = (xs[as[s]] - xs[bs[s]]).norm() * (1.0f + 0.1f * r.uniform());
    }
  }
  void clear_forces() { f.fill(vec2::Zero()); }
  void reseed() { f.grad().copy_from(seed); }
  void ours_forward() { spring_kernel(x, a, b, rest, f, k); }
  void ours_adjoint() { spring_kernel.grad(x, a, b, rest, f, k); }
  void hand_forward() {
    parallel_for(springs, [&](int64 lo, int64 hi) {
      for (int64 s = lo; s < hi; ++s) {
        vec2 const d = xs[as[s]] - xs[bs[s]];
        float const len = d.norm();
        vec2 const force = d * (-k * (len - rs[s]) / len);
        bench::atomic_add_coeffs(fs[as[s]], force);
        bench::atomic_add_coeffs(fs[bs[s]], vec2(-force));
      }
    });
  }
  // force = d h, h = -k (len - r) / len, len = |d|, d = x_a - x_b:
  // dforce = gf_a - gf_b; dd = h dforce + (d . dforce) dh/dlen d / len with
  // dh/dlen = -k r / len^2; dr = (d . dforce) k / len. Spring ends are shared:
  // atomics on x.grad; rest[s] belongs to spring s alone: a plain add.
  void hand_adjoint() {
    parallel_for(springs, [&](int64 lo, int64 hi) {
      for (int64 s = lo; s < hi; ++s) {
        vec2 const d = xs[as[s]] - xs[bs[s]];
        float const len = d.norm();
        float const h = -k * (len - rs[s]) / len;
        vec2 const dforce = gf[as[s]] - gf[bs[s]];
        float const dh = d.dot(dforce);
        float const dlen = dh * (-k * rs[s] / (len * len));
        vec2 const dd = h * dforce + dlen * d / len;
        gr[s] += dh * k / len;
        bench::atomic_add_coeffs(gx[as[s]], dd);
        bench::atomic_add_coeffs(gx[bs[s]], vec2(-dd));
      }
    });
  }
};

// Per spring: indices 8, rest 4, two positions 16, two force read-modify-writes 32.
constexpr double spring_forward_bytes = double(springs) * (8 + 4 + 16 + 32);
// Adjoint: indices, rest, positions, two force gradients 16, rest.grad 8, two x.grad 32.
constexpr double spring_adjoint_bytes = double(springs) * (8 + 4 + 16 + 16 + 8 + 32);


// ---- MLS-MPM: one step of DiffTaichi's diffmpm.py in 2-D -----------------------------------------
// 16K particles, a 128^2 grid, fixed-corotated elasticity with the closed-form
// 2x2 polar decomposition, quadratic B-spline weights over a 3x3 stencil,
// APIC affine momentum. Particle state is indexed [t][p] (t = 0 in, 1 out).
namespace mpm {

constexpr int n_particles = 1 << 14;
constexpr int n_grid = 128;
constexpr float dx = 1.0f / n_grid, inv_dx = float(n_grid);
constexpr float dt = 1e-3f;
constexpr float p_vol = 1.0f, p_rho = 1.0f, p_mass = p_vol * p_rho;
constexpr float E = 10.0f, mu = E, la = E;
constexpr float gravity = 3.8f;
constexpr int bound = 3;
constexpr float stress_k = -(dt * p_vol * 4.0f * inv_dx * inv_dx);

// Quadratic B-spline weights of the three nodes at offsets 0, 1, 2 from the
// base node, for one axis (fx in [0.5, 1.5)).
inline auto weights = ctg::func<"weights">([](auto fx) {
  return ctg::vec(0.5f * (1.5f - fx) * (1.5f - fx), 0.75f - (fx - 1.0f) * (fx - 1.0f),
                  0.5f * (fx - 0.5f) * (fx - 0.5f));
});

inline auto p2g = ctg::kernel<"p2g">([](auto x, auto v, auto C, auto F, auto grid_v, auto grid_m, int t) {
  return ctg::range(x.shape(1_c), [=](auto p) {
    return ctg::let(ctg::cast<int>(x(t, p)[0_c] * inv_dx - 0.5f), ctg::cast<int>(x(t, p)[1_c] * inv_dx - 0.5f),
                    [=](auto bx, auto by) {
      return ctg::let(x(t, p) * inv_dx - ctg::vec(ctg::cast<float>(bx), ctg::cast<float>(by)),
                      (mat2(mat2::Identity()) + dt * C(t, p)) * F(t, p), [=](auto fx, auto G) {
        // Polar decomposition G = R S in closed form: R rotates by the angle of
        // (G00 + G11, G10 - G01).
        return ctg::let(weights(fx[0_c]), weights(fx[1_c]), ctg::det(G), G(0_c, 0_c) + G(1_c, 1_c),
                        G(1_c, 0_c) - G(0_c, 1_c), [=](auto wx, auto wy, auto J, auto pa, auto pb) {
          return ctg::let(ctg::rsqrt(pa * pa + pb * pb), [=](auto s) {
            return ctg::let(ctg::mat<2, 2>(pa * s, -(pb * s), pb * s, pa * s), [=](auto R) {
              return ctg::let(stress_k * (2.0f * mu * (G - R) * ctg::transpose(G) +
                                          ctg::mat<2, 2>(la * (J - 1.0f) * J, 0.0f, 0.0f, la * (J - 1.0f) * J)) +
                                  p_mass * C(t, p),
                              p_mass * v(t, p), [=](auto affine, auto mv) {
                return ctg::block(F(t + 1, p) = G, ctg::static_range<3>([=](auto i) {
                                    return ctg::static_range<3>([=](auto j) {
                                      return ctg::let(
                                          wx[i] * wy[j],
                                          (ctg::vec(ctg::cast<float>(i), ctg::cast<float>(j)) - fx) * dx,
                                          [=](auto w, auto dpos) {
                                            return ctg::block(grid_v(bx + i, by + j) += w * (mv + affine * dpos),
                                                              grid_m(bx + i, by + j) += w * p_mass);
                                          });
                                    });
                                  }));
              });
            });
          });
        });
      });
    });
  });
});

inline auto grid_op = ctg::kernel<"grid_op">([](auto grid_v, auto grid_m, auto grid_v_out) {
  return ctg::ndrange(n_grid, n_grid, [=](auto i, auto j) {
    return ctg::let(grid_v(i, j) * (1.0f / (grid_m(i, j) + 1e-10f)) + ctg::vec(0.0f, -dt * gravity), [=](auto u) {
      return grid_v_out(i, j) =
                 ctg::vec(ctg::select((i < bound && u[0_c] < 0.0f) || (i > n_grid - bound && u[0_c] > 0.0f), 0.0f,
                                      u[0_c]),
                          ctg::select((j < bound && u[1_c] < 0.0f) || (j > n_grid - bound && u[1_c] > 0.0f), 0.0f,
                                      u[1_c]));
    });
  });
});

inline auto g2p = ctg::kernel<"g2p">([](auto x, auto v, auto C, auto grid_v_out, int t) {
  return ctg::range(x.shape(1_c), [=](auto p) {
    return ctg::let(ctg::cast<int>(x(t, p)[0_c] * inv_dx - 0.5f), ctg::cast<int>(x(t, p)[1_c] * inv_dx - 0.5f),
                    [=](auto bx, auto by) {
      return ctg::let(x(t, p) * inv_dx - ctg::vec(ctg::cast<float>(bx), ctg::cast<float>(by)), [=](auto fx) {
        return ctg::let(weights(fx[0_c]), weights(fx[1_c]), vec2(vec2::Zero()), mat2(mat2::Zero()),
                        [=](auto wx, auto wy, auto new_v, auto new_C) {
          return ctg::block(
              ctg::static_range<3>([=](auto i) {
                return ctg::static_range<3>([=](auto j) {
                  return ctg::let(grid_v_out(bx + i, by + j), wx[i] * wy[j],
                                  ctg::vec(ctg::cast<float>(i), ctg::cast<float>(j)) - fx,
                                  [=](auto g, auto w, auto dpos) {
                                    return ctg::block(new_v = new_v + w * g,
                                                      new_C = new_C + (4.0f * inv_dx) * w * ctg::outer(g, dpos));
                                  });
                });
              }),
              v(t + 1, p) = new_v, x(t + 1, p) = x(t, p) + dt * new_v, C(t + 1, p) = new_C);
        });
      });
    });
  });
});

inline vec3 weights_of(float fx) {
  return vec3(0.5f * (1.5f - fx) * (1.5f - fx), 0.75f - (fx - 1.0f) * (fx - 1.0f), 0.5f * (fx - 0.5f) * (fx - 0.5f));
}
inline vec3 weight_slopes(float fx) { return vec3(-(1.5f - fx), -2.0f * (fx - 1.0f), fx - 0.5f); }

struct data {
  ctg::field<vec2, 2, ctg::grad> x{{2, n_particles}, {.name = "x"}}, v{{2, n_particles}, {.name = "v"}};
  ctg::field<mat2, 2, ctg::grad> C{{2, n_particles}, {.name = "C"}}, F{{2, n_particles}, {.name = "F"}};
  ctg::field<vec2, 2, ctg::grad> grid_v{{n_grid, n_grid}, {.name = "grid_v"}};
  ctg::field<float, 2, ctg::grad> grid_m{{n_grid, n_grid}, {.name = "grid_m"}};
  ctg::field<vec2, 2, ctg::grad> grid_v_out{{n_grid, n_grid}, {.name = "grid_v_out"}};
  std::vector<vec2> seed_x, seed_v;
  std::vector<mat2> seed_C, seed_F;

  // Raw pointers for the hand-written code: t = 0 rows (in) and t = 1 rows (out).
  vec2 *x0 = x.data(), *x1 = x0 + n_particles, *v0 = v.data(), *v1 = v0 + n_particles;
  mat2 *C0 = C.data(), *C1 = C0 + n_particles, *F0 = F.data(), *F1 = F0 + n_particles;
  vec2 *gx0 = x.grad().data(), *gx1 = gx0 + n_particles, *gv0 = v.grad().data(), *gv1 = gv0 + n_particles;
  mat2 *gC0 = C.grad().data(), *gC1 = gC0 + n_particles, *gF0 = F.grad().data(), *gF1 = gF0 + n_particles;
  vec2 *GV = grid_v.data(), *GVO = grid_v_out.data(), *gGV = grid_v.grad().data(), *gGVO = grid_v_out.grad().data();
  float *GM = grid_m.data(), *gGM = grid_m.grad().data();

  data() {
    lcg r{2024};
    for (int p = 0; p < n_particles; ++p) {
      // A 128 x 128 block of particles in [0.3, 0.7]^2, jittered.
      x0[p] = vec2(0.3f + 0.4f * (float(p % 128) + 0.5f + 0.3f * r.uniform()) / 128.0f,
                   0.3f + 0.4f * (float(p / 128) + 0.5f + 0.3f * r.uniform()) / 128.0f);
      v0[p] = 0.5f * vec2(r.uniform(), r.uniform());
      C0[p] << 0.5f * r.uniform(), 0.5f * r.uniform(), 0.5f * r.uniform(), 0.5f * r.uniform();
      F0[p] = mat2::Identity();
      F0[p] += 0.05f * (mat2() << r.uniform(), r.uniform(), r.uniform(), r.uniform()).finished();
    }
    auto fill = [&](auto& s, int n, auto make) {
      s.resize(std::size_t(2 * n_particles));
      for (int p = 0; p < n; ++p) s[std::size_t(n_particles + p)] = make();
    };
    auto zero2 = vec2::Zero();
    auto zero22 = mat2::Zero();
    seed_x.assign(std::size_t(2 * n_particles), zero2);
    seed_v.assign(std::size_t(2 * n_particles), zero2);
    seed_C.assign(std::size_t(2 * n_particles), zero22);
    seed_F.assign(std::size_t(2 * n_particles), zero22);
    fill(seed_x, n_particles, [&] { return vec2(r.uniform(), r.uniform()); });
    fill(seed_v, n_particles, [&] { return vec2(r.uniform(), r.uniform()); });
    fill(seed_C, n_particles, [&] { return mat2((mat2() << r.uniform(), r.uniform(), r.uniform(), r.uniform()).finished()); });
    fill(seed_F, n_particles, [&] { return mat2((mat2() << r.uniform(), r.uniform(), r.uniform(), r.uniform()).finished()); });
  }

  void clear_grid() {
    grid_v.fill(vec2::Zero());
    grid_m.fill(0.0f);
  }
  // Gradients of the step's outputs (t = 1 rows); everything else starts at zero.
  void reseed() {
    x.grad().copy_from(seed_x);
    v.grad().copy_from(seed_v);
    C.grad().copy_from(seed_C);
    F.grad().copy_from(seed_F);
    grid_v.zero_grad();
    grid_m.zero_grad();
    grid_v_out.zero_grad();
  }
  template <class T>
  static std::vector<T> concat(std::vector<std::vector<T>> const& parts) {
    std::vector<T> out;
    for (auto const& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  }

  void ours_forward() {
    p2g(x, v, C, F, grid_v, grid_m, 0);
    grid_op(grid_v, grid_m, grid_v_out);
    g2p(x, v, C, grid_v_out, 0);
  }
  void ours_adjoint() {
    g2p.grad(x, v, C, grid_v_out, 0);
    grid_op.grad(grid_v, grid_m, grid_v_out);
    p2g.grad(x, v, C, F, grid_v, grid_m, 0);
  }

  void hand_forward() {
    hand_p2g();
    hand_grid_op();
    hand_g2p();
  }
  void hand_adjoint() {
    hand_g2p_adjoint();
    hand_grid_op_adjoint();
    hand_p2g_adjoint();
  }

  static int node(int i, int j) { return i * n_grid + j; }

  // The 3x3 grid stencil of a particle at xp: the lower-left node, the
  // offset from it in cells, and the quadratic B-spline weights per axis.
  struct stencil {
    int bx, by;
    vec2 fx;
    vec3 wx, wy;
  };
  static stencil stencil_of(vec2 const& xp) {
    int const bx = int(xp[0] * inv_dx - 0.5f), by = int(xp[1] * inv_dx - 0.5f);
    vec2 const fx = xp * inv_dx - vec2(float(bx), float(by));
    return {bx, by, fx, weights_of(fx[0]), weights_of(fx[1])};
  }

  // What P2G computes for particle p before scattering, shared by the
  // hand-written forward and by the hand-written adjoint's recompute.
  struct p2g_values {
    int bx, by;
    vec2 fx;
    vec3 wx, wy;
    mat2 A, G;  // G = A F, A = I + dt C
    float J, pa, pb, s;
    mat2 R, affine;
    vec2 mv;
  };
  p2g_values p2g_state(int64 p) const {
    p2g_values v;
    auto const st = stencil_of(x0[p]);
    v.bx = st.bx;
    v.by = st.by;
    v.fx = st.fx;
    v.wx = st.wx;
    v.wy = st.wy;
    v.A = mat2::Identity() + dt * C0[p];
    v.G = v.A * F0[p];
    v.J = v.G.determinant();
    v.pa = v.G(0, 0) + v.G(1, 1);
    v.pb = v.G(1, 0) - v.G(0, 1);
    v.s = 1.0f / std::sqrt(v.pa * v.pa + v.pb * v.pb);
    v.R << v.pa * v.s, -(v.pb * v.s), v.pb * v.s, v.pa * v.s;
    mat2 const cauchy =
        2.0f * mu * (v.G - v.R) * v.G.transpose() + la * (v.J - 1.0f) * v.J * mat2::Identity();
    v.affine = stress_k * cauchy + p_mass * C0[p];
    v.mv = p_mass * v0[p];
    return v;
  }

  void hand_p2g() {
    parallel_for(n_particles, [&](int64 lo, int64 hi) {
      for (int64 p = lo; p < hi; ++p) {
        auto const [bx, by, fx, wx, wy, A, G, J, pa, pb, s, R, affine, mv] = p2g_state(p);
        (void)A, (void)J, (void)pa, (void)pb, (void)s, (void)R;
        F1[p] = G;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            float const w = wx[i] * wy[j];
            vec2 const dpos = (vec2(float(i), float(j)) - fx) * dx;
            int const n = node(bx + i, by + j);
            bench::atomic_add_coeffs(GV[n], vec2(w * (mv + affine * dpos)));
            bench::atomic_add(GM[n], w * p_mass);
          }
      }
    });
  }
  static bool stopped(int i, float u) { return (i < bound && u < 0.0f) || (i > n_grid - bound && u > 0.0f); }
  void hand_grid_op() {
    parallel_for(n_grid * n_grid, [&](int64 lo, int64 hi) {
      for (int64 n = lo; n < hi; ++n) {
        int const i = int(n / n_grid), j = int(n % n_grid);
        vec2 const u = GV[n] * (1.0f / (GM[n] + 1e-10f)) + vec2(0.0f, -dt * gravity);
        GVO[n] = vec2(stopped(i, u[0]) ? 0.0f : u[0], stopped(j, u[1]) ? 0.0f : u[1]);
      }
    });
  }
  void hand_g2p() {
    parallel_for(n_particles, [&](int64 lo, int64 hi) {
      for (int64 p = lo; p < hi; ++p) {
        vec2 const xp = x0[p];
        auto const [bx, by, fx, wx, wy] = stencil_of(xp);
        vec2 new_v = vec2::Zero();
        mat2 new_C = mat2::Zero();
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            vec2 const g = GVO[node(bx + i, by + j)];
            float const w = wx[i] * wy[j];
            vec2 const dpos = vec2(float(i), float(j)) - fx;
            new_v += w * g;
            new_C += (4.0f * inv_dx) * w * g * dpos.transpose();
          }
        v1[p] = new_v;
        x1[p] = xp + dt * new_v;
        C1[p] = new_C;
      }
    });
  }

  // G2P backwards. new_v = sum w g, new_C = sum 4/dx w g dpos^T with
  // dpos = (i, j) - fx; x1 = x0 + dt new_v. The stores clear their gradients.
  // Grid nodes are shared between particles: atomics on grid_v_out.grad.
  void hand_g2p_adjoint() {
    parallel_for(n_particles, [&](int64 lo, int64 hi) {
      for (int64 p = lo; p < hi; ++p) {
        vec2 const xp = x0[p];
        auto const [bx, by, fx, wx, wy] = stencil_of(xp);
        vec2 const d_new_v = gv1[p] + dt * gx1[p];
        mat2 const d_new_C = gC1[p];
        vec2 d_x = gx1[p];
        gx1[p] = vec2::Zero();
        gv1[p] = vec2::Zero();
        gC1[p] = mat2::Zero();
        vec2 d_fx = vec2::Zero();
        vec3 d_wx = vec3::Zero(), d_wy = vec3::Zero();
        float const c = 4.0f * inv_dx;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            int const n = node(bx + i, by + j);
            vec2 const g = GVO[n];
            float const w = wx[i] * wy[j];
            vec2 const dpos = vec2(float(i), float(j)) - fx;
            float const d_w = d_new_v.dot(g) + c * g.dot(d_new_C * dpos);
            vec2 const d_g = w * d_new_v + c * w * (d_new_C * dpos);
            d_fx -= c * w * (d_new_C.transpose() * g);
            bench::atomic_add_coeffs(gGVO[n], d_g);
            d_wx[i] += d_w * wy[j];
            d_wy[j] += d_w * wx[i];
          }
        d_fx[0] += d_wx.dot(weight_slopes(fx[0]));
        d_fx[1] += d_wy.dot(weight_slopes(fx[1]));
        gx0[p] += d_x + inv_dx * d_fx;
      }
    });
  }

  // Grid update backwards: the store clears grid_v_out.grad; stopped
  // components pass no gradient; u = v_in / (m + eps) + gravity.
  void hand_grid_op_adjoint() {
    parallel_for(n_grid * n_grid, [&](int64 lo, int64 hi) {
      for (int64 n = lo; n < hi; ++n) {
        int const i = int(n / n_grid), j = int(n % n_grid);
        vec2 const g = gGVO[n];
        gGVO[n] = vec2::Zero();
        float const inv = 1.0f / (GM[n] + 1e-10f);
        vec2 const u = GV[n] * inv + vec2(0.0f, -dt * gravity);
        vec2 const d_u(stopped(i, u[0]) ? 0.0f : g[0], stopped(j, u[1]) ? 0.0f : g[1]);
        gGV[n] += inv * d_u;
        gGM[n] += -(inv * inv) * GV[n].dot(d_u);
      }
    });
  }

  // P2G backwards, from the gradients of grid_v and grid_m (read, not
  // cleared: the scatter was an accumulation) and of F1 (a store: cleared).
  // Every particle writes only its own gradients: plain adds.
  void hand_p2g_adjoint() {
    parallel_for(n_particles, [&](int64 lo, int64 hi) {
      for (int64 p = lo; p < hi; ++p) {
        // Recompute the forward values of this particle.
        auto const [bx, by, fx, wx, wy, A, G, J, pa, pb, s, R, affine, mv] = p2g_state(p);

        // Scatter: q = mv + affine dpos, dpos = ((i, j) - fx) dx, w = wx[i] wy[j].
        mat2 d_affine = mat2::Zero();
        vec2 d_mv = vec2::Zero(), d_fx = vec2::Zero();
        vec3 d_wx = vec3::Zero(), d_wy = vec3::Zero();
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            int const n = node(bx + i, by + j);
            vec2 const gv = gGV[n];
            float const gm = gGM[n];
            float const w = wx[i] * wy[j];
            vec2 const dpos = (vec2(float(i), float(j)) - fx) * dx;
            float const d_w = gv.dot(mv + affine * dpos) + gm * p_mass;
            d_mv += w * gv;
            d_affine += w * gv * dpos.transpose();
            d_fx -= dx * w * (affine.transpose() * gv);
            d_wx[i] += d_w * wy[j];
            d_wy[j] += d_w * wx[i];
          }
        gv0[p] += p_mass * d_mv;
        mat2 d_C = p_mass * d_affine;

        // cauchy = 2 mu (G - R) G^T + la (J - 1) J I, affine = stress_k cauchy + ...
        mat2 const d_cauchy = stress_k * d_affine;
        mat2 const D = G - R;
        mat2 const d_D = 2.0f * mu * d_cauchy * G;
        mat2 d_G = gF1[p] + 2.0f * mu * d_cauchy.transpose() * D + d_D;
        gF1[p] = mat2::Zero();
        float const d_J = la * (2.0f * J - 1.0f) * d_cauchy.trace();
        mat2 const d_R = -d_D;
        // R = [[c, -sn], [sn, c]], c = pa s, sn = pb s, s = (pa^2 + pb^2)^(-1/2).
        float const d_c = d_R(0, 0) + d_R(1, 1), d_sn = d_R(1, 0) - d_R(0, 1);
        float const d_s = d_c * pa + d_sn * pb;
        float const s3 = s * s * s;
        float const d_pa = d_c * s - d_s * pa * s3, d_pb = d_sn * s - d_s * pb * s3;
        d_G(0, 0) += d_pa + d_J * G(1, 1);
        d_G(1, 1) += d_pa + d_J * G(0, 0);
        d_G(1, 0) += d_pb - d_J * G(0, 1);
        d_G(0, 1) += -d_pb - d_J * G(1, 0);
        // G = A F, A = I + dt C.
        gF0[p] += A.transpose() * d_G;
        d_C += dt * d_G * F0[p].transpose();
        gC0[p] += d_C;

        d_fx[0] += d_wx.dot(weight_slopes(fx[0]));
        d_fx[1] += d_wy.dot(weight_slopes(fx[1]));
        gx0[p] += inv_dx * d_fx;
      }
    });
  }

  // Nominal traffic of one forward step: per particle the state read (48 B),
  // F written (16), 9 grid read-modify-writes of 12 B each way (216), the
  // position read again (8), 9 grid gathers (72), x, v, C written (32); per
  // node the grid update (20). The adjoint is counted as twice that.
  static constexpr double forward_bytes = double(n_particles) * (48 + 16 + 216 + 8 + 72 + 32) + 20.0 * n_grid * n_grid;
};

}  // namespace mpm

}  // namespace bench::sim
