// Derivative rules of the matrix decompositions (ir/decompositions.hpp).
//
// Notation: F = U diag(sigma) V^T (signed SVD), P = U^T dF V, and for a pair
// i < j of singular values d = sigma_j - sigma_i, s = sigma_i + sigma_j. Then
//   d sigma_i = P_ii,
//   U^T dU = X, V^T dV = Y (skew), with X_ij = b / d + a / s, Y_ij = b / d - a / s,
//   a = (P_ij - P_ji) / 2, b = (P_ij + P_ji) / 2,
//   dR = U W V^T with W_ij = (P_ij - P_ji) / s (R = U V^T),
//   dS = sym(dR^T F + R^T dF) (S = R^T F).
// For A = Q diag(lambda) Q^T: d lambda_i = (Q^T dA Q)_ii and Q^T dQ = Z with
// Z_ij = (Q^T sym(dA) Q)_ij / (lambda_j - lambda_i).
//
// Where values coincide, 1/x becomes the guarded g(x) = x / (x^2 + eps) with
// eps = epsilon * m^2 + min (epsilon, min: the scalar type's machine epsilon
// and smallest normal number; m: the largest |sigma| or |lambda|): equal to
// 1/x to relative accuracy epsilon m^2 / x^2, zero at x = 0, never above
// 1 / (2 sqrt(eps)). Polar R and S only divide by s, so they are exact (the
// analytic limit) wherever s is not small, repeated singular values included.
// U and V alone are not differentiable at sigma_i = sigma_j; their rules are
// written so that their sum is the derivative of U diag(sigma) V^T = F
// exactly, for any guard: for a pair of singular values of comparable
// magnitude (2 |sigma_j| >= sigma_i > 0), X_ij = (P_ij + K) / (2 sigma_j) and
// Y_ij = (K - P_ij) / (2 sigma_i) with K = b s g(d) + a d g(s), the same
// numbers as above where d and s are not small (X_ij sigma_j - sigma_i Y_ij =
// P_ij always, which is what F = U diag(sigma) V^T needs). Every vjp below is
// the exact transpose of its jvp, so both modes agree.
#pragma once
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "../config.hpp"
#include "../detail/tuple.hpp"
#include "../ir/custom.hpp"
#include "../ir/decompositions.hpp"
#include "derivatives.hpp"

namespace ctg::ad {

namespace decomposition {

namespace dc = ir::fn::decomp;

template <class S, int N>
using mat = dc::mat<S, N>;
template <class S, int N>
using vec = dc::vec<S, N>;

// 1/x, bounded: x / (x^2 + eps).
template <class S>
CTG_HOST_DEVICE S guarded_inverse(S x, S eps) {
  return x / (x * x + eps);
}

// The guard for values of magnitude up to `scale`.
template <class S>
CTG_HOST_DEVICE S guard_eps(S scale) {
  return std::numeric_limits<S>::epsilon() * scale * scale + std::numeric_limits<S>::min();
}
// The guard of the correction's sigma_i^2 + sigma_j^2: far smaller, so that it
// only matters where both values vanish to working accuracy.
template <class S>
CTG_HOST_DEVICE S correction_eps(S scale) {
  S const e = std::numeric_limits<S>::epsilon() * scale;
  return e * e + std::numeric_limits<S>::min();
}

template <class A>
using scalar_t = typename A::Scalar;
template <class A>
inline constexpr int size_v = int(A::RowsAtCompileTime);
template <class A>
using square_t = mat<scalar_t<A>, size_v<A>>;

// One entry of X or Y for the pair (i, j), i < j, as kb b + ka a.
template <class S>
struct entry_coefficients {
  S kb, ka;
  CTG_HOST_DEVICE S of(S p_ij, S p_ji) const { return (kb * (p_ij + p_ji) + ka * (p_ij - p_ji)) / 2; }
  // d entry / d P_ij and d entry / d P_ji.
  CTG_HOST_DEVICE S d_ij() const { return (kb + ka) / 2; }
  CTG_HOST_DEVICE S d_ji() const { return (kb - ka) / 2; }
};
// X_ij, X_ji (U) and Y_ij, Y_ji (V) for the pair (i, j) of the signed SVD.
template <class S>
struct pair_coefficients {
  entry_coefficients<S> x_ij, x_ji, y_ij, y_ji;
};
template <class S>
CTG_HOST_DEVICE pair_coefficients<S> svd_pair(S si, S sj, S eps, S eps_q) {
  S const d = sj - si, s = si + sj;
  S const gd = guarded_inverse(d, eps), gs = guarded_inverse(s, eps);
  // What the guards leave out of F = U diag(sigma) V^T (1 - d g(d) and
  // 1 - s g(s)), given back as the least-norm correction of X and Y.
  S const rd = eps / (d * d + eps), rs = eps / (s * s + eps);
  S const q = si * si + sj * sj + eps_q;
  S const wi = si / q, wj = sj / q;
  return {{gd + rd * wj, gs + rs * wj},
          {-gd + rd * wi, -gs - rs * wi},
          {gd + rd * wj, -gs - rs * wj},
          {-gd + rd * wi, gs + rs * wi}};
}

template <class S, int N>
CTG_HOST_DEVICE S largest_magnitude(vec<S, N> const& v) {
  using std::abs;
  S m(0);
  CTG_UNROLL
  for (int k = 0; k < N; ++k) m = abs(v(k)) > m ? abs(v(k)) : m;
  return m;
}

// a b c^T for square matrices.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> sandwich(mat<S, N> const& a, mat<S, N> const& b, mat<S, N> const& c) {
  mat<S, N> ab;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += a(i, k) * b(k, j);
      ab(i, j) = s;
    }
  return dc::times_transpose(ab, c);
}

// a^T b c for square matrices.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> projected(mat<S, N> const& a, mat<S, N> const& b, mat<S, N> const& c) {
  mat<S, N> const atb = dc::transpose_times(a, b);
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += atb(i, k) * c(k, j);
      out(i, j) = s;
    }
  return out;
}

template <class S, int N>
CTG_HOST_DEVICE mat<S, N> times(mat<S, N> const& a, mat<S, N> const& b) {
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += a(i, k) * b(k, j);
      out(i, j) = s;
    }
  return out;
}

// ---- SVD -------------------------------------------------------------------------------------

enum class svd_part { u, v };

// Tangent of U (or V): U X with X skew, X_ij from P = U^T dF V.
template <svd_part Part, class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> svd_factor_tangent(dc::svd_value<S, N> const& d, mat<S, N> const& df) {
  mat<S, N> const p = projected(d.u, df, d.v);
  S const m = largest_magnitude(d.sigma);
  S const eps = guard_eps(m), eps_q = correction_eps(m);
  mat<S, N> x = mat<S, N>::Zero();
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = i + 1; j < N; ++j) {
      auto const c = svd_pair(d.sigma(i), d.sigma(j), eps, eps_q);
      auto const& upper = Part == svd_part::u ? c.x_ij : c.y_ij;
      auto const& lower = Part == svd_part::u ? c.x_ji : c.y_ji;
      x(i, j) = upper.of(p(i, j), p(j, i));
      x(j, i) = lower.of(p(i, j), p(j, i));
    }
  return times(Part == svd_part::u ? d.u : d.v, x);
}

// Adjoint of F from the adjoint G of U (or V): the transpose of the tangent
// map above, G_F = U G_P V^T.
template <svd_part Part, class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> svd_factor_adjoint(dc::svd_value<S, N> const& d, mat<S, N> const& g) {
  mat<S, N> const c = dc::transpose_times(Part == svd_part::u ? d.u : d.v, g);
  S const m = largest_magnitude(d.sigma);
  S const eps = guard_eps(m), eps_q = correction_eps(m);
  mat<S, N> gp = mat<S, N>::Zero();
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = i + 1; j < N; ++j) {
      auto const k = svd_pair(d.sigma(i), d.sigma(j), eps, eps_q);
      auto const& upper = Part == svd_part::u ? k.x_ij : k.y_ij;
      auto const& lower = Part == svd_part::u ? k.x_ji : k.y_ji;
      gp(i, j) = c(i, j) * upper.d_ij() + c(j, i) * lower.d_ij();
      gp(j, i) = c(i, j) * upper.d_ji() + c(j, i) * lower.d_ji();
    }
  return sandwich(d.u, gp, d.v);
}

// ---- polar -----------------------------------------------------------------------------------

// d theta of R = rot(theta) (2x2): the component of dF along J R over
// sigma_0 + sigma_1 = |(F00 + F11, F10 - F01)|, guarded.
template <class S>
CTG_HOST_DEVICE mat<S, 2> rotation_generator2(dc::rotation2<S> const& r) {
  mat<S, 2> jr;  // J R with J = [[0, -1], [1, 0]]
  jr(0, 0) = -r.s, jr(0, 1) = -r.c, jr(1, 0) = r.c, jr(1, 1) = -r.s;
  return jr;
}

template <class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> polar_rotation_tangent(mat<S, N> const& f, mat<S, N> const& df) {
  if constexpr (N == 2) {
    auto const r = dc::polar_rotation2(f);
    mat<S, 2> const jr = rotation_generator2(r);
    S const g = guarded_inverse(r.norm, guard_eps(r.norm));
    S const dtheta = (r.c * (df(1, 0) - df(0, 1)) - r.s * (df(0, 0) + df(1, 1))) * g;
    return mat<S, 2>(jr * dtheta);
  } else {
    auto const d = dc::svd3(f);
    mat<S, N> const p = projected(d.u, df, d.v);
    S const eps = guard_eps(largest_magnitude(d.sigma));
    mat<S, N> w = mat<S, N>::Zero();
    CTG_UNROLL
    for (int i = 0; i < N; ++i)
      CTG_UNROLL
      for (int j = i + 1; j < N; ++j) {
        S const x = (p(i, j) - p(j, i)) * guarded_inverse(d.sigma(i) + d.sigma(j), eps);
        w(i, j) = x;
        w(j, i) = -x;
      }
    return sandwich(d.u, w, d.v);
  }
}

template <class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> polar_rotation_adjoint(mat<S, N> const& f, mat<S, N> const& g) {
  if constexpr (N == 2) {
    auto const r = dc::polar_rotation2(f);
    mat<S, 2> const jr = rotation_generator2(r);
    S const along = g(0, 0) * jr(0, 0) + g(0, 1) * jr(0, 1) + g(1, 0) * jr(1, 0) + g(1, 1) * jr(1, 1);
    return mat<S, 2>(jr * (along * guarded_inverse(r.norm, guard_eps(r.norm))));
  } else {
    auto const d = dc::svd3(f);
    mat<S, N> const m = projected(d.u, g, d.v);
    S const eps = guard_eps(largest_magnitude(d.sigma));
    mat<S, N> gp = mat<S, N>::Zero();
    CTG_UNROLL
    for (int i = 0; i < N; ++i)
      CTG_UNROLL
      for (int j = i + 1; j < N; ++j) {
        S const x = (m(i, j) - m(j, i)) * guarded_inverse(d.sigma(i) + d.sigma(j), eps);
        gp(i, j) = x;
        gp(j, i) = -x;
      }
    return sandwich(d.u, gp, d.v);
  }
}

// ---- symmetric eigendecomposition --------------------------------------------------------------

template <class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> eigenvector_tangent(mat<S, N> const& a, mat<S, N> const& da) {
  auto const e = dc::sym_eig(a);
  mat<S, N> const p = projected(e.vectors, dc::symmetric_part(da), e.vectors);
  S const eps = guard_eps(largest_magnitude(e.values));
  mat<S, N> z = mat<S, N>::Zero();
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = i + 1; j < N; ++j) {
      S const x = p(i, j) * guarded_inverse(e.values(j) - e.values(i), eps);
      z(i, j) = x;
      z(j, i) = -x;
    }
  return times(e.vectors, z);
}

template <class S, int N>
CTG_NOINLINE CTG_HOST_DEVICE mat<S, N> eigenvector_adjoint(mat<S, N> const& a, mat<S, N> const& g) {
  auto const e = dc::sym_eig(a);
  mat<S, N> const c = dc::transpose_times(e.vectors, g);
  S const eps = guard_eps(largest_magnitude(e.values));
  mat<S, N> gp = mat<S, N>::Zero();
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = i + 1; j < N; ++j) {
      // Z_ij = P_ij g(l_j - l_i) and Z_ji = -Z_ij = P_ji g(l_i - l_j): both
      // entries of the symmetric P carry C_ij - C_ji.
      S const x = (c(i, j) - c(j, i)) * guarded_inverse(e.values(j) - e.values(i), eps) / 2;
      gp(i, j) = x;
      gp(j, i) = x;
    }
  return dc::symmetric_part(sandwich(e.vectors, gp, e.vectors));
}

// Q diag(w) R^T.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> diagonal_sandwich(mat<S, N> const& q, vec<S, N> const& w, mat<S, N> const& r) {
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += q(i, k) * w(k) * r(j, k);
      out(i, j) = s;
    }
  return out;
}

// The diagonal of Q^T dA R.
template <class S, int N>
CTG_HOST_DEVICE vec<S, N> projected_diagonal(mat<S, N> const& q, mat<S, N> const& da, mat<S, N> const& r) {
  vec<S, N> out;
  CTG_UNROLL
  for (int k = 0; k < N; ++k) {
    S s(0);
    CTG_UNROLL
    for (int i = 0; i < N; ++i)
      CTG_UNROLL
      for (int j = 0; j < N; ++j) s += q(i, k) * da(i, j) * r(j, k);
    out(k) = s;
  }
  return out;
}

// ---- U diag(f(sigma)) V^T ----------------------------------------------------------------------
// A function f of each singular value, G = U diag(f(sigma)) V^T: with P =
// U^T dF V, U^T dG V = Q where Q_ii = f'(sigma_i) P_ii and, for i != j,
//   Q_ij = D_ij (P_ij + P_ji) / 2 + M_ij (P_ij - P_ji) / 2,
//   D_ij = (f_i - f_j) / (sigma_i - sigma_j),  M_ij = (f_i + f_j) / (sigma_i + sigma_j).
// D_ij is a divided difference of f, (f'_i + f'_j) / 2 where the two values
// coincide (its limit); 1 / (sigma_i + sigma_j) is guarded as above. The
// rules of U, sigma and V taken one by one cannot give D_ij, which needs f
// itself: they give f(sigma) / sigma in its place (docs/02). The map P -> Q
// is its own transpose, so the adjoint is U Q(U^T G V) V^T.
template <class S, int N>
struct spectral_function {
  vec<S, N> value, slope;  // f(sigma_k) and f'(sigma_k)
};
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> spectral_map(vec<S, N> const& sigma, spectral_function<S, N> const& fn, mat<S, N> const& p) {
  using std::abs;
  S const m = largest_magnitude(sigma);
  S const eps = guard_eps(m);
  mat<S, N> q;
  CTG_UNROLL
  for (int i = 0; i < N; ++i) {
    q(i, i) = fn.slope(i) * p(i, i);
    CTG_UNROLL
    for (int j = i + 1; j < N; ++j) {
      S const gap = sigma(i) - sigma(j);
      S const divided = abs(gap) > std::numeric_limits<S>::epsilon() * m ? (fn.value(i) - fn.value(j)) / gap
                                                                          : (fn.slope(i) + fn.slope(j)) / 2;
      S const mean = (fn.value(i) + fn.value(j)) * guarded_inverse(sigma(i) + sigma(j), eps);
      S const b = (p(i, j) + p(j, i)) / 2, a = (p(i, j) - p(j, i)) / 2;
      q(i, j) = divided * b + mean * a;
      q(j, i) = divided * b - mean * a;
    }
  }
  return q;
}

// clamp(sigma_k, lo, hi) as min(max(sigma_k, lo), hi), whose ties send the
// derivative to the bound (docs/02, edge rules): the values, the slopes, and
// which values took lo and which hi.
template <class S, int N>
struct clamped_values {
  spectral_function<S, N> fn;
  bool took_lo[N], took_hi[N];
};
template <class S, int N>
CTG_HOST_DEVICE clamped_values<S, N> clamp_values(vec<S, N> const& sigma, S lo, S hi) {
  clamped_values<S, N> out;
  CTG_UNROLL
  for (int k = 0; k < N; ++k) {
    bool const to_lo = !(sigma(k) > lo);
    S const raised = to_lo ? lo : sigma(k);
    bool const to_hi = !(raised < hi);
    out.fn.value(k) = to_hi ? hi : raised;
    out.fn.slope(k) = to_lo || to_hi ? S(0) : S(1);
    out.took_lo[k] = to_lo && !to_hi;
    out.took_hi[k] = to_hi;
  }
  return out;
}

// The functor of ctg::svd_clamp (a custom-gradient operation).
struct svd_clamp_rule {
  // F's signed SVD and its clamped singular values, which each pass starts from.
  template <class A, class L, class H>
  CTG_HOST_DEVICE static auto clamped_svd(A const& f, L const& lo, H const& hi) {
    static_assert(dc::accepts<A>(), "CTG-EXPR-002 svd_clamp takes a 2x2 or 3x3 matrix of float or double");
    using S = scalar_t<A>;
    auto const d = dc::svd(square_t<A>(f));
    struct parts {
      dc::svd_value<S, size_v<A>> svd;
      clamped_values<S, size_v<A>> clamped;
    };
    return parts{d, clamp_values(d.sigma, S(lo), S(hi))};
  }
  template <class A, class L, class H>
  CTG_HOST_DEVICE auto forward(A const& f, L const& lo, H const& hi) const {
    auto const [d, c] = clamped_svd(f, lo, hi);
    return diagonal_sandwich(d.u, c.fn.value, d.v);
  }
  template <class A, class L, class H, class G>
  CTG_HOST_DEVICE auto backward(A const& f, L const& lo, H const& hi, G const& g) const {
    using S = scalar_t<A>;
    auto const [d, c] = clamped_svd(f, lo, hi);
    square_t<A> const pg = projected(d.u, square_t<A>(g), d.v);  // U^T G V
    S glo(0), ghi(0);
    CTG_UNROLL
    for (int k = 0; k < size_v<A>; ++k) {
      // Selected, not multiplied by the 0/1 mask: a bound not taken gets an
      // exact zero, as min and max give the operand they did not pick.
      if (c.took_lo[k]) glo += pg(k, k);
      if (c.took_hi[k]) ghi += pg(k, k);
    }
    return ctg::gradients(square_t<A>(sandwich(d.u, spectral_map(d.sigma, c.fn, pg), d.v)), L(glo), H(ghi));
  }
  template <class A, class L, class H, class DA, class DL, class DH>
  CTG_HOST_DEVICE auto tangent(A const& f, L const& lo, H const& hi, DA const& df, DL const& dlo,
                               DH const& dhi) const {
    using S = scalar_t<A>;
    auto const [d, c] = clamped_svd(f, lo, hi);
    square_t<A> q = spectral_map(d.sigma, c.fn, projected(d.u, square_t<A>(df), d.v));
    CTG_UNROLL
    for (int k = 0; k < size_v<A>; ++k) {
      if (c.took_lo[k]) q(k, k) += S(dlo);
      if (c.took_hi[k]) q(k, k) += S(dhi);
    }
    return square_t<A>(sandwich(d.u, q, d.v));
  }
};

// Every decomposition output reads its operand's value in the reverse pass.
struct unary_rule {
  template <int K>
  static constexpr bool needs(bool a0) {
    return a0;
  }
};

template <class V, class D>
CTG_HOST_DEVICE auto operand_and_tangent(V const& v, D const& d) {
  using A = std::remove_cvref_t<decltype(ctg::detail::get<0>(v))>;
  struct pair {
    square_t<A> value, tangent;
  };
  return pair{ctg::detail::get<0>(v), ctg::detail::get<0>(d)};
}

}  // namespace decomposition

template <>
struct rule<ir::fn::svd_sigma> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& f) {
    auto const d = ir::fn::decomp::svd(decomposition::square_t<A>(f));
    return decomposition::diagonal_sandwich(d.u, decomposition::vec<decomposition::scalar_t<A>,
                                                                   decomposition::size_v<A>>(g), d.v);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [f, df] = decomposition::operand_and_tangent(v, t);
    auto const d = ir::fn::decomp::svd(f);
    return decomposition::projected_diagonal(d.u, df, d.v);
  }
};

template <>
struct rule<ir::fn::svd_u> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& f) {
    using M = decomposition::square_t<A>;
    return decomposition::svd_factor_adjoint<decomposition::svd_part::u>(ir::fn::decomp::svd(M(f)), M(g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [f, df] = decomposition::operand_and_tangent(v, t);
    return decomposition::svd_factor_tangent<decomposition::svd_part::u>(ir::fn::decomp::svd(f), df);
  }
};

template <>
struct rule<ir::fn::svd_v> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& f) {
    using M = decomposition::square_t<A>;
    return decomposition::svd_factor_adjoint<decomposition::svd_part::v>(ir::fn::decomp::svd(M(f)), M(g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [f, df] = decomposition::operand_and_tangent(v, t);
    return decomposition::svd_factor_tangent<decomposition::svd_part::v>(ir::fn::decomp::svd(f), df);
  }
};

template <>
struct rule<ir::fn::polar_r> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& f) {
    using M = decomposition::square_t<A>;
    return decomposition::polar_rotation_adjoint(M(f), M(g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [f, df] = decomposition::operand_and_tangent(v, t);
    return decomposition::polar_rotation_tangent(f, df);
  }
};

// S = sym(R^T F): dS = sym(dR^T F + R^T dF); the adjoint G of S reaches F as
// R sym(G) directly and through R as F sym(G)^T.
template <>
struct rule<ir::fn::polar_s> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& f) {
    namespace dc = ir::fn::decomp;
    using M = decomposition::square_t<A>;
    M const fm = f;
    M const gs = dc::symmetric_part(M(g));
    M const r = dc::polar_rotation(fm);
    M out = decomposition::times(r, gs);
    out += decomposition::polar_rotation_adjoint(fm, dc::times_transpose(fm, gs));
    return out;
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    namespace dc = ir::fn::decomp;
    auto const [f, df] = decomposition::operand_and_tangent(v, t);
    auto const r = dc::polar_rotation(f);
    auto const dr = decomposition::polar_rotation_tangent(f, df);
    auto out = dc::transpose_times(dr, f);
    out += dc::transpose_times(r, df);
    return dc::symmetric_part(out);
  }
};

template <>
struct rule<ir::fn::sym_eig_values> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    using M = decomposition::square_t<A>;
    auto const e = ir::fn::decomp::sym_eig(M(a));
    return decomposition::diagonal_sandwich(
        e.vectors, decomposition::vec<decomposition::scalar_t<A>, decomposition::size_v<A>>(g), e.vectors);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [a, da] = decomposition::operand_and_tangent(v, t);
    auto const e = ir::fn::decomp::sym_eig(a);
    return decomposition::projected_diagonal(e.vectors, da, e.vectors);
  }
};

template <>
struct rule<ir::fn::sym_eig_vectors> : decomposition::unary_rule {
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    using M = decomposition::square_t<A>;
    return decomposition::eigenvector_adjoint(M(a), M(g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& t) {
    auto const [a, da] = decomposition::operand_and_tangent(v, t);
    return decomposition::eigenvector_tangent(a, da);
  }
};

}  // namespace ctg::ad

namespace ctg {

// U diag(clamp(sigma, lo, hi)) V^T, F = U diag(sigma) V^T its signed SVD:
// the plastic projection of snow in MPM (singular values of the elastic
// deformation gradient clamped to [1 - theta_c, 1 + theta_s]). One operation
// with the exact derivative everywhere, coinciding singular values
// included; built from ctg::svd's three outputs instead, its derivative is
// wrong where clamped values coincide or nearly do (docs/02). F is a 2 x 2
// or 3 x 3 matrix of float or double; lo and hi are numbers, with
// gradients of their own.
template <ir::dsl_operand A, ir::dsl_operand L, ir::dsl_operand H>
[[nodiscard]] constexpr auto svd_clamp(A const& f, L const& lo, H const& hi) {
  return custom_gradient<"svd_clamp">(ad::decomposition::svd_clamp_rule{})(f, lo, hi);
}

}  // namespace ctg
