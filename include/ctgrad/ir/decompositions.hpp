// Matrix decompositions of 2x2 and 3x3 matrices as kernel operations: the
// singular value decomposition, the polar decomposition and the symmetric
// eigendecomposition. Each output is an operation of its own (svd_u,
// svd_sigma, svd_v, polar_r, polar_s, sym_eig_values, sym_eig_vectors), so
// that the value types, the activity and the needs analysis treat them like
// any other math operation; ctg::svd, ctg::polar and ctg::sym_eig bundle the
// outputs for structured bindings.
//
// Conventions (docs/02-autodiff.md#matrix-decompositions):
// - svd: F = U diag(sigma) V^T with U and V rotations (det +1), sigma sorted
//   by magnitude, largest first, all >= 0 except the last, which carries the
//   sign of det F (the signed SVD of simulation codes).
// - polar: F = R S with R = U V^T a rotation and S = V diag(sigma) V^T
//   symmetric (indefinite where det F < 0).
// - sym_eig: A = Q diag(values) Q^T for the symmetric part of A, values
//   ascending, Q orthonormal with det +1, eigenvectors as columns.
//
// The algorithms run a fixed amount of work on every input (no dynamic
// memory, no data-dependent iteration count): closed forms for 2x2, and a
// fixed number of cyclic Jacobi sweeps for 3x3 (one-sided on the columns of
// F for the SVD, two-sided on A for the eigendecomposition).
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

#include "../config.hpp"
#include "../element.hpp"
#include "expr.hpp"
#include "math.hpp"

namespace ctg::ir::fn {

namespace decomp {

template <class S, int N>
using mat = Eigen::Matrix<S, N, N>;
template <class S, int N>
using vec = Eigen::Matrix<S, N, 1>;

// Whether A is a matrix the decompositions accept.
template <class A>
constexpr bool accepts() {
  if constexpr (is_eigen_fixed_v<A>) {
    using S = typename A::Scalar;
    return int(A::RowsAtCompileTime) == int(A::ColsAtCompileTime) &&
           (int(A::RowsAtCompileTime) == 2 || int(A::RowsAtCompileTime) == 3) &&
           (std::is_same_v<S, float> || std::is_same_v<S, double>);
  } else {
    return false;
  }
}

// Sweeps of the 3x3 Jacobi iterations. Each sweep visits the three pairs
// once and convergence is quadratic: four sweeps reach rounding level in
// float and double on random, clustered, graded and nearly rank-one inputs;
// the fifth is margin.
inline constexpr int jacobi_sweeps = 5;

template <class S, int N>
struct svd_value {
  mat<S, N> u;
  vec<S, N> sigma;
  mat<S, N> v;
};

template <class S, int N>
struct eig_value {
  vec<S, N> values;
  mat<S, N> vectors;
};

// tan of the Jacobi angle: the root of smaller magnitude of t^2 + 2 zeta t - 1,
// without overflow for large |zeta| (it tends to 1 / (2 zeta)).
template <class S>
CTG_HOST_DEVICE S jacobi_tangent(S zeta) {
  using std::abs, std::sqrt;
  S const az = abs(zeta);
  S const t = az > S(1) ? S(1) / (az * (S(1) + sqrt(S(1) + (S(1) / az) * (S(1) / az))))
                        : S(1) / (az + sqrt(S(1) + az * az));
  return zeta < S(0) ? -t : t;
}

// ---- 2x2 closed forms ------------------------------------------------------------------------

// The rotation [[c, -s], [s, c]] of the polar decomposition: the direction of
// (F00 + F11, F10 - F01). It makes R^T F symmetric with a non-negative trace;
// where that vector is zero every rotation does, and the identity is taken.
template <class S>
struct rotation2 {
  S c, s, norm;  // norm: |(F00 + F11, F10 - F01)| = sigma_0 + sigma_1
};
template <class S>
CTG_HOST_DEVICE rotation2<S> polar_rotation2(mat<S, 2> const& f) {
  using std::sqrt;
  S const x = f(0, 0) + f(1, 1), y = f(1, 0) - f(0, 1);
  S const n = sqrt(x * x + y * y);
  if (n > S(0)) return {x / n, y / n, n};
  return {S(1), S(0), S(0)};
}

// Eigen-decomposition of the symmetric [[p, q], [q, r]]: hi >= lo, and the
// rotation [[c, -s], [s, c]] whose first column belongs to hi.
template <class S>
struct sym2 {
  S hi, lo, c, s;
};
template <class S>
CTG_HOST_DEVICE sym2<S> sym_eig2(S p, S q, S r) {
  using std::sqrt, std::atan2, std::cos, std::sin;
  S const mean = (p + r) / 2, half_gap = (p - r) / 2;
  S const radius = sqrt(half_gap * half_gap + q * q);
  S const angle = atan2(q, half_gap) / 2;  // atan2(0, 0) = 0: the identity for multiples of I
  return {mean + radius, mean - radius, cos(angle), sin(angle)};
}

template <class S>
CTG_NOINLINE CTG_HOST_DEVICE svd_value<S, 2> svd2(mat<S, 2> const& f) {
  auto const r = polar_rotation2(f);
  // S = R^T F, symmetric with trace |(x, y)| >= 0: its larger eigenvalue is
  // sigma_0 >= |sigma_1|, and the other has the sign of det F.
  S const p = r.c * f(0, 0) + r.s * f(1, 0), q_lo = -r.s * f(0, 0) + r.c * f(1, 0);
  S const q_hi = r.c * f(0, 1) + r.s * f(1, 1), w = -r.s * f(0, 1) + r.c * f(1, 1);
  auto const e = sym_eig2(p, (q_lo + q_hi) / 2, w);
  svd_value<S, 2> out;
  // The small singular value from the determinant: relative accuracy where
  // lo = mean - radius would cancel.
  S const det = f(0, 0) * f(1, 1) - f(0, 1) * f(1, 0);
  // The clamp settles rounding-level ties (|sigma_1| = sigma_0) exactly.
  S const small = e.hi > S(0) ? det / e.hi : S(0);
  out.sigma(0) = e.hi;
  out.sigma(1) = small > e.hi ? e.hi : small < -e.hi ? -e.hi : small;
  out.v(0, 0) = e.c, out.v(0, 1) = -e.s, out.v(1, 0) = e.s, out.v(1, 1) = e.c;
  // U = R W: the sum of the two angles.
  S const uc = r.c * e.c - r.s * e.s, us = r.s * e.c + r.c * e.s;
  out.u(0, 0) = uc, out.u(0, 1) = -us, out.u(1, 0) = us, out.u(1, 1) = uc;
  return out;
}

template <class S>
CTG_NOINLINE CTG_HOST_DEVICE eig_value<S, 2> sym_eig_2x2(mat<S, 2> const& a) {
  using std::atan2, std::cos, std::sin;
  S const p = a(0, 0), q = (a(0, 1) + a(1, 0)) / 2, r = a(1, 1);
  auto const e = sym_eig2(p, q, r);
  eig_value<S, 2> out;
  out.values(0) = e.lo, out.values(1) = e.hi;
  // The eigenvector of lo is the one of the larger eigenvalue of -A, at the
  // angle atan2(-q, (r - p) / 2) / 2 (written so that a multiple of I, and
  // any diagonal A already in ascending order, gives Q = I); the other
  // column is that one turned by +90 degrees (det +1).
  S const angle = atan2(S(0) - q, (r - p) / 2) / 2;
  S const c = cos(angle), s = sin(angle);
  out.vectors(0, 0) = c, out.vectors(1, 0) = s;
  out.vectors(0, 1) = -s, out.vectors(1, 1) = c;
  return out;
}

// ---- 3x3 Jacobi ------------------------------------------------------------------------------

template <class S>
struct cols3 {
  S c[3][3];  // c[k][i]: row i of column k
};

template <class S>
CTG_HOST_DEVICE S dot3(S const* a, S const* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// Columns P, Q <- (c P - s Q, s P + c Q). The column indices are template
// arguments throughout: with constant indices the 3x3 working arrays stay in
// registers.
template <int P, int Q, class S>
CTG_HOST_DEVICE void rotate_columns(cols3<S>& m, S c, S s) {
  CTG_UNROLL
  for (int i = 0; i < 3; ++i) {
    S const x = m.c[P][i], y = m.c[Q][i];
    m.c[P][i] = c * x - s * y;
    m.c[Q][i] = s * x + c * y;
  }
}

// Exchanges columns P and Q and negates the new column Q, so that a
// determinant stays what it was.
template <int P, int Q, class S>
CTG_HOST_DEVICE void exchange_columns(cols3<S>& m) {
  CTG_UNROLL
  for (int i = 0; i < 3; ++i) {
    S const x = m.c[P][i];
    m.c[P][i] = m.c[Q][i];
    m.c[Q][i] = -x;
  }
}

// A unit vector orthogonal to the unit vector u: u x e_k for the axis e_k
// least aligned with u.
template <class S>
CTG_HOST_DEVICE void orthogonal_unit(S const* u, S* out) {
  using std::abs, std::sqrt;
  int k = abs(u[0]) <= abs(u[1]) ? 0 : 1;
  if (abs(u[2]) < abs(u[k])) k = 2;
  S e[3] = {S(0), S(0), S(0)};
  e[k] = S(1);
  out[0] = u[1] * e[2] - u[2] * e[1];
  out[1] = u[2] * e[0] - u[0] * e[2];
  out[2] = u[0] * e[1] - u[1] * e[0];
  S const n = sqrt(dot3(out, out));
  out[0] /= n, out[1] /= n, out[2] /= n;
}

// One rotation of the one-sided Jacobi method: makes columns P and Q of B
// orthogonal, and applies the same rotation to V (B = F V throughout).
template <int P, int Q, class S>
CTG_HOST_DEVICE void orthogonalize_columns(cols3<S>& b, cols3<S>& v) {
  using std::sqrt;
  S const gamma = dot3(b.c[P], b.c[Q]);
  if (gamma == S(0)) return;  // already orthogonal (and zeta would be 0/0 for equal norms)
  S const alpha = dot3(b.c[P], b.c[P]), beta = dot3(b.c[Q], b.c[Q]);
  S const t = jacobi_tangent((beta - alpha) / (2 * gamma));
  S const c = S(1) / sqrt(S(1) + t * t), s = c * t;
  rotate_columns<P, Q>(b, c, s);
  rotate_columns<P, Q>(v, c, s);
}

// Puts the larger of keys P and Q first, exchanging the columns of B and V
// with them.
template <int P, int Q, class S>
CTG_HOST_DEVICE void order_columns(S (&key)[3], cols3<S>& b, cols3<S>& v) {
  if (key[P] < key[Q]) {
    S const t = key[P];
    key[P] = key[Q], key[Q] = t;
    exchange_columns<P, Q>(b);
    exchange_columns<P, Q>(v);
  }
}

// One-sided (Hestenes) Jacobi: rotations V applied to the columns of B = F V
// until they are orthogonal; then B = U diag(sigma) with U from the sorted
// columns (the third as u0 x u1, so det U = +1 and sigma_2 takes the sign of
// det F). Singular values come out with high relative accuracy, small ones
// included, as the normal matrix F^T F is never formed.
template <class S>
CTG_NOINLINE CTG_HOST_DEVICE svd_value<S, 3> svd3(mat<S, 3> const& f) {
  using std::sqrt;
  cols3<S> b, v;
  CTG_UNROLL
  for (int k = 0; k < 3; ++k)
    CTG_UNROLL
    for (int i = 0; i < 3; ++i) b.c[k][i] = f(i, k), v.c[k][i] = S(i == k);
  for (int sweep = 0; sweep < jacobi_sweeps; ++sweep) {
    orthogonalize_columns<0, 1>(b, v);
    orthogonalize_columns<0, 2>(b, v);
    orthogonalize_columns<1, 2>(b, v);
  }
  // Sort by column norm, largest first (three compare-exchanges).
  S n[3] = {dot3(b.c[0], b.c[0]), dot3(b.c[1], b.c[1]), dot3(b.c[2], b.c[2])};
  order_columns<0, 1>(n, b, v);
  order_columns<1, 2>(n, b, v);
  order_columns<0, 1>(n, b, v);
  // Where a column is too small to give a direction, any orthonormal
  // completion is a valid U (its singular value is zero to working accuracy).
  S const tiny = std::numeric_limits<S>::min() / std::numeric_limits<S>::epsilon();
  S u[3][3];
  svd_value<S, 3> out;
  S const s0 = sqrt(n[0]);
  if (s0 > tiny) {
    CTG_UNROLL
    for (int i = 0; i < 3; ++i) u[0][i] = b.c[0][i] / s0;
  } else {
    u[0][0] = S(1), u[0][1] = S(0), u[0][2] = S(0);
  }
  S const along = dot3(u[0], b.c[1]);
  CTG_UNROLL
  for (int i = 0; i < 3; ++i) u[1][i] = b.c[1][i] - along * u[0][i];
  S const s1 = sqrt(dot3(u[1], u[1]));
  if (s1 > tiny) {
    CTG_UNROLL
    for (int i = 0; i < 3; ++i) u[1][i] /= s1;
  } else {
    orthogonal_unit(u[0], u[1]);
  }
  u[2][0] = u[0][1] * u[1][2] - u[0][2] * u[1][1];
  u[2][1] = u[0][2] * u[1][0] - u[0][0] * u[1][2];
  u[2][2] = u[0][0] * u[1][1] - u[0][1] * u[1][0];
  // The columns were sorted by norm; the clamps only settle rounding-level
  // ties, so that the order holds exactly.
  using std::abs, std::min;
  out.sigma(0) = s0 > tiny ? s0 : S(0);
  out.sigma(1) = min(s1 > tiny ? s1 : S(0), out.sigma(0));
  S const s2 = dot3(u[2], b.c[2]);
  out.sigma(2) = abs(s2) <= out.sigma(1) ? s2 : s2 < S(0) ? -out.sigma(1) : out.sigma(1);
  CTG_UNROLL
  for (int k = 0; k < 3; ++k)
    CTG_UNROLL
    for (int i = 0; i < 3; ++i) out.u(i, k) = u[k][i], out.v(i, k) = v.c[k][i];
  return out;
}

// One rotation of the two-sided Jacobi method: A <- J^T A J with J the
// rotation in the (P, R) plane that zeroes a_PR (O is the third index); Q
// accumulates J.
template <int P, int R, int O, class S>
CTG_HOST_DEVICE void annihilate(S (&a)[3][3], cols3<S>& q) {
  using std::sqrt;
  S const apr = a[P][R];
  if (apr == S(0)) return;
  S const t = jacobi_tangent((a[R][R] - a[P][P]) / (2 * apr));
  S const c = S(1) / sqrt(S(1) + t * t), s = c * t;
  S const aop = a[O][P], aor = a[O][R];
  a[P][P] -= t * apr;
  a[R][R] += t * apr;
  a[P][R] = a[R][P] = S(0);
  a[O][P] = a[P][O] = c * aop - s * aor;
  a[O][R] = a[R][O] = s * aop + c * aor;
  rotate_columns<P, R>(q, c, s);
}

// Puts the smaller of keys P and R first, exchanging the columns of Q.
template <int P, int R, class S>
CTG_HOST_DEVICE void order_ascending(S (&key)[3], cols3<S>& q) {
  if (key[R] < key[P]) {
    S const t = key[P];
    key[P] = key[R], key[R] = t;
    exchange_columns<P, R>(q);
  }
}

// Cyclic two-sided Jacobi on the symmetric part of A: rotations J with
// A <- J^T A J zero one off-diagonal pair each; Q accumulates them (det +1).
template <class S>
CTG_NOINLINE CTG_HOST_DEVICE eig_value<S, 3> sym_eig_3x3(mat<S, 3> const& m) {
  using std::sqrt;
  S a[3][3];
  cols3<S> q;
  CTG_UNROLL
  for (int i = 0; i < 3; ++i)
    CTG_UNROLL
    for (int j = 0; j < 3; ++j) a[i][j] = (m(i, j) + m(j, i)) / 2, q.c[i][j] = S(i == j);
  for (int sweep = 0; sweep < jacobi_sweeps; ++sweep) {
    annihilate<0, 1, 2>(a, q);
    annihilate<0, 2, 1>(a, q);
    annihilate<1, 2, 0>(a, q);
  }
  S d[3] = {a[0][0], a[1][1], a[2][2]};
  order_ascending<0, 1>(d, q);
  order_ascending<1, 2>(d, q);
  order_ascending<0, 1>(d, q);
  eig_value<S, 3> out;
  CTG_UNROLL
  for (int k = 0; k < 3; ++k) {
    out.values(k) = d[k];
    CTG_UNROLL
    for (int i = 0; i < 3; ++i) out.vectors(i, k) = q.c[k][i];
  }
  return out;
}

// ---- by size ---------------------------------------------------------------------------------

template <class S, int N>
CTG_HOST_DEVICE svd_value<S, N> svd(mat<S, N> const& f) {
  if constexpr (N == 2)
    return svd2(f);
  else
    return svd3(f);
}

template <class S, int N>
CTG_HOST_DEVICE eig_value<S, N> sym_eig(mat<S, N> const& a) {
  if constexpr (N == 2)
    return sym_eig_2x2(a);
  else
    return sym_eig_3x3(a);
}

// The symmetric part (m + m^T) / 2.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> symmetric_part(mat<S, N> const& m) {
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) out(i, j) = (m(i, j) + m(j, i)) / 2;
  return out;
}

// a^T b for square matrices.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> transpose_times(mat<S, N> const& a, mat<S, N> const& b) {
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += a(k, i) * b(k, j);
      out(i, j) = s;
    }
  return out;
}

// a b^T for square matrices.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> times_transpose(mat<S, N> const& a, mat<S, N> const& b) {
  mat<S, N> out;
  CTG_UNROLL
  for (int i = 0; i < N; ++i)
    CTG_UNROLL
    for (int j = 0; j < N; ++j) {
      S s(0);
      CTG_UNROLL
      for (int k = 0; k < N; ++k) s += a(i, k) * b(j, k);
      out(i, j) = s;
    }
  return out;
}

// The rotation R of F = R S: closed form for 2x2, U V^T of the SVD for 3x3.
template <class S, int N>
CTG_HOST_DEVICE mat<S, N> polar_rotation(mat<S, N> const& f) {
  if constexpr (N == 2) {
    auto const r = polar_rotation2(f);
    mat<S, 2> out;
    out(0, 0) = r.c, out(0, 1) = -r.s, out(1, 0) = r.s, out(1, 1) = r.c;
    return out;
  } else {
    auto const d = svd3(f);
    return times_transpose(d.u, d.v);
  }
}

}  // namespace decomp

// Declares one output of a decomposition as a unary operation.
#define CTG_IMPL_DECOMPOSITION_FN(NAME, ...)                                         \
  struct NAME {                                                                            \
    static constexpr char const* name = #NAME;                                             \
    static constexpr grad_kind kind = grad_kind::nonlinear;                                \
    static constexpr int arity = 1;                                                        \
    template <class A>                                                                     \
    CTG_HOST_DEVICE static auto apply(A const& m) {                                        \
      static_assert(decomp::accepts<A>(),                                                  \
                    "CTG-EXPR-002 " #NAME " takes a 2x2 or 3x3 matrix of float or double"); \
      using S = typename A::Scalar;                                                        \
      constexpr int N = int(A::RowsAtCompileTime);                                         \
      decomp::mat<S, N> const f = m;                                                       \
      return __VA_ARGS__;                                                                  \
    }                                                                                      \
  }

CTG_IMPL_DECOMPOSITION_FN(svd_u, decomp::svd(f).u);
CTG_IMPL_DECOMPOSITION_FN(svd_sigma, decomp::svd(f).sigma);
CTG_IMPL_DECOMPOSITION_FN(svd_v, decomp::svd(f).v);
CTG_IMPL_DECOMPOSITION_FN(polar_r, decomp::polar_rotation(f));
CTG_IMPL_DECOMPOSITION_FN(polar_s, decomp::symmetric_part(decomp::transpose_times(decomp::polar_rotation(f), f)));
CTG_IMPL_DECOMPOSITION_FN(sym_eig_values, decomp::sym_eig(f).values);
CTG_IMPL_DECOMPOSITION_FN(sym_eig_vectors, decomp::sym_eig(f).vectors);
#undef CTG_IMPL_DECOMPOSITION_FN

}  // namespace ctg::ir::fn

namespace ctg {

// The outputs of ctg::svd(F), for `auto [U, sigma, V] = ctg::svd(F);`. Each
// member is an expression of its own: a kernel that uses all three evaluates
// F once per member, so bind an expensive F to a local first.
template <class EU, class ESigma, class EV>
struct svd_result {
  EU U;
  ESigma sigma;
  EV V;
};
template <class ER, class ES>
struct polar_result {
  ER R;
  ES S;
};
template <class EValues, class EVectors>
struct sym_eig_result {
  EValues values;
  EVectors vectors;
};

#define CTG_IMPL_DECOMPOSITION_FUNCTION(NAME)           \
  template <ir::dsl_operand A>                          \
  [[nodiscard]] constexpr auto NAME(A const& m) {       \
    return ir::make_math<ir::fn::NAME>(m);              \
  }
CTG_IMPL_DECOMPOSITION_FUNCTION(svd_u)
CTG_IMPL_DECOMPOSITION_FUNCTION(svd_sigma)
CTG_IMPL_DECOMPOSITION_FUNCTION(svd_v)
CTG_IMPL_DECOMPOSITION_FUNCTION(polar_r)
CTG_IMPL_DECOMPOSITION_FUNCTION(polar_s)
CTG_IMPL_DECOMPOSITION_FUNCTION(sym_eig_values)
CTG_IMPL_DECOMPOSITION_FUNCTION(sym_eig_vectors)
#undef CTG_IMPL_DECOMPOSITION_FUNCTION

// F = U diag(sigma) V^T (signed: U, V rotations, |sigma| descending, the
// last one carrying the sign of det F).
template <ir::dsl_operand A>
[[nodiscard]] constexpr auto svd(A const& f) {
  using result = svd_result<decltype(ctg::svd_u(f)), decltype(ctg::svd_sigma(f)), decltype(ctg::svd_v(f))>;
  return result{ctg::svd_u(f), ctg::svd_sigma(f), ctg::svd_v(f)};
}

// F = R S (R a rotation, S symmetric).
template <ir::dsl_operand A>
[[nodiscard]] constexpr auto polar(A const& f) {
  using result = polar_result<decltype(ctg::polar_r(f)), decltype(ctg::polar_s(f))>;
  return result{ctg::polar_r(f), ctg::polar_s(f)};
}

// sym(A) = Q diag(values) Q^T (values ascending, Q a rotation).
template <ir::dsl_operand A>
[[nodiscard]] constexpr auto sym_eig(A const& a) {
  using result = sym_eig_result<decltype(ctg::sym_eig_values(a)), decltype(ctg::sym_eig_vectors(a))>;
  return result{ctg::sym_eig_values(a), ctg::sym_eig_vectors(a)};
}

}  // namespace ctg
