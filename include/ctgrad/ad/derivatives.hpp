// Derivative rules for the math table, keyed by the same operation types.
//
// For each operation: needs<K>(active...) says whether the reverse pass needs
// the value of operand K given which operands carry a gradient (this is what
// makes an operation "linear" for the adstack: linear operations need none);
// vjp<K>(g, v...) is the adjoint contribution to operand K from the result's
// adjoint g (operands whose value is not needed arrive as ctg::ad::absent);
// jvp(v, d) is the tangent of the result from the operands' values and
// tangents (tuples).
//
// Edge rules (documented in docs/02-autodiff.md): min/max ties send the
// gradient to the second operand; abs'(0) = 0; sqrt'(0) = +inf as the math
// says; norm'(0) = 0; d/dy pow(x, y) = 0 where x <= 0; floor, ceil, round,
// sign, comparisons, logic, integer % and / carry no gradient.
#pragma once
#include <cmath>
#include <type_traits>

#include <Eigen/Core>

#include "../config.hpp"
#include "../detail/meta.hpp"
#include "../detail/tuple.hpp"
#include "../element.hpp"
#include "../ir/math.hpp"

namespace ctg::ad {

// Stands for an operand value (of type T) that the reverse pass did not need
// to compute.
template <class T>
struct absent {
  using type = T;
};
template <class X>
inline constexpr bool is_absent_v = false;
template <class T>
inline constexpr bool is_absent_v<absent<T>> = true;
template <class X>
struct operand_type {
  using type = X;
};
template <class T>
struct operand_type<absent<T>> {
  using type = T;
};
template <class X>
using operand_t = typename operand_type<std::remove_cvref_t<X>>::type;

template <class T>
CTG_HOST_DEVICE T zero() {
  return zero_of<T>();
}

// Sums an adjoint over the coefficients a broadcast scalar was combined with.
template <class A, class G>
CTG_HOST_DEVICE auto reduce_to(G const& g) {
  if constexpr (!is_eigen_fixed_v<A> && is_eigen_fixed_v<G>) {
    scalar_of_t<G> s(0);
    CTG_UNROLL
    for (int k = 0; k < int(G::SizeAtCompileTime); ++k) s += g.coeff(k);
    return s;
  } else {
    return g;
  }
}

// Coefficient-wise product (Eigen's cwiseProduct without expression templates).
template <class A, class B>
CTG_HOST_DEVICE auto cmul(A const& a, B const& b) {
  return ir::fn::detail::zip_coeffs(a, b, [](auto x, auto y) { return x * y; });
}

template <class A, class B>
CTG_HOST_DEVICE auto sum_cmul(A const& a, B const& b) {
  return reduce_to<float>(cmul(a, b));
}

template <class M>
CTG_HOST_DEVICE auto transposed(M const& m) {
  return ir::fn::transpose::apply(m);
}

// The cofactor matrix: d det(A) / dA, defined also where A is singular.
template <class M>
CTG_HOST_DEVICE M cofactor(M const& m) {
  M c;
  if constexpr (int(M::RowsAtCompileTime) == 2) {
    c(0, 0) = m(1, 1);
    c(0, 1) = -m(1, 0);
    c(1, 0) = -m(0, 1);
    c(1, 1) = m(0, 0);
  } else {
    c(0, 0) = m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1);
    c(0, 1) = m(1, 2) * m(2, 0) - m(1, 0) * m(2, 2);
    c(0, 2) = m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0);
    c(1, 0) = m(0, 2) * m(2, 1) - m(0, 1) * m(2, 2);
    c(1, 1) = m(0, 0) * m(2, 2) - m(0, 2) * m(2, 0);
    c(1, 2) = m(0, 1) * m(2, 0) - m(0, 0) * m(2, 1);
    c(2, 0) = m(0, 1) * m(1, 2) - m(0, 2) * m(1, 1);
    c(2, 1) = m(0, 2) * m(1, 0) - m(0, 0) * m(1, 2);
    c(2, 2) = m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0);
  }
  return c;
}

// Every operation of the math table has its rule below; an operation added
// without one fails here (a gap in ctgrad, not in the user's kernel).
template <class Fn>
struct rule {
  static_assert(detail::dependent_false<Fn>, "ctgrad: a math operation was added without its derivative rule");
};

// Whether the adjoint of a math node reads the value of its operand I: only
// when the node is active and its rule reads that operand, given which
// operands are active. Templated on the operation and the flags, not on the
// node, so that the nodes of one operation share one instantiation (the
// reverse pass and the checks both ask).
template <class Fn, int I, bool ActiveNode, bool... ActiveKids>
constexpr bool operand_value_needed() {
  if constexpr (Fn::kind == ir::fn::grad_kind::none || !ActiveNode)
    return false;
  else
    return rule<Fn>::template needs<I>(ActiveKids...);
}

// Unary operations acting coefficient by coefficient: f'(x) from x, from
// the operation's row of the op table (ir/op_table.hpp). A linear row needs
// no operand value; a `none` row is never differentiated (its derivative
// column is a placeholder).
#define CTG_IMPL_CWISE_UNARY_RULE(NAME, KIND, VALUE, DERIV)                                   \
  template <>                                                                                 \
  struct rule<ir::fn::NAME> {                                                                 \
    template <int K>                                                                          \
    static constexpr bool needs(bool a0) {                                                    \
      return a0 && ir::fn::NAME::kind == ir::fn::grad_kind::nonlinear;                        \
    }                                                                                         \
    template <class S>                                                                        \
    CTG_HOST_DEVICE static S deriv([[maybe_unused]] S x) {                                    \
      CTG_IMPL_MATH_USING;                                                                    \
      return DERIV;                                                                           \
    }                                                                                         \
    template <class A>                                                                        \
    CTG_HOST_DEVICE static A slope(A const& a) {                                              \
      if constexpr (is_eigen_fixed_v<A>)                                                      \
        return ir::fn::detail::map_coeffs(a, [](auto s) { return deriv(s); });               \
      else                                                                                    \
        return deriv(a);                                                                      \
    }                                                                                         \
    template <int K, class G, class A>                                                        \
    CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {                                 \
      return cmul(g, slope(a));                                                               \
    }                                                                                         \
    template <class V, class D>                                                               \
    CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {                                 \
      return cmul(detail::get<0>(d), slope(detail::get<0>(v)));                              \
    }                                                                                         \
  };

CTG_IMPL_UNARY_OP_TABLE(CTG_IMPL_CWISE_UNARY_RULE)
#undef CTG_IMPL_CWISE_UNARY_RULE

template <>
struct rule<ir::fn::neg> {
  template <int K>
  static constexpr bool needs(bool) {
    return false;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const&) {
    return ir::fn::neg::apply(g);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const&, D const& d) {
    return ir::fn::neg::apply(detail::get<0>(d));
  }
};

template <>
struct rule<ir::fn::add> {
  template <int K>
  static constexpr bool needs(bool, bool) {
    return false;
  }
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const&, B const&) {
    if constexpr (K == 0)
      return reduce_to<operand_t<A>>(g);
    else
      return reduce_to<operand_t<B>>(g);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const&, D const& d) {
    return ir::fn::add::apply(detail::get<0>(d), detail::get<1>(d));
  }
};
template <>
struct rule<ir::fn::sub> {
  template <int K>
  static constexpr bool needs(bool, bool) {
    return false;
  }
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const&, B const&) {
    if constexpr (K == 0)
      return reduce_to<operand_t<A>>(g);
    else
      return reduce_to<operand_t<B>>(ir::fn::neg::apply(g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const&, D const& d) {
    return ir::fn::sub::apply(detail::get<0>(d), detail::get<1>(d));
  }
};

// Bilinear operations (products): each operand's adjoint needs the other
// operand's value.
struct bilinear_rule {
  template <int K>
  static constexpr bool needs(bool a0, bool a1) {
    return K == 0 ? a1 : a0;
  }
};

template <>
struct rule<ir::fn::mul> : bilinear_rule {
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    constexpr bool mat_a = is_eigen_fixed_v<operand_t<A>>, mat_b = is_eigen_fixed_v<operand_t<B>>;
    if constexpr (K == 0) {
      if constexpr (mat_a && mat_b)
        return ir::fn::mul::apply(g, transposed(b));
      else if constexpr (mat_a)
        return ir::fn::mul::apply(g, b);
      else
        return reduce_to<float>(cmul(g, b));
    } else {
      if constexpr (mat_a && mat_b)
        return ir::fn::mul::apply(transposed(a), g);
      else if constexpr (mat_b)
        return ir::fn::mul::apply(a, g);
      else
        return reduce_to<float>(cmul(a, g));
    }
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::add::apply(ir::fn::mul::apply(detail::get<0>(d), detail::get<1>(v)),
                              ir::fn::mul::apply(detail::get<0>(v), detail::get<1>(d)));
  }
};

template <>
struct rule<ir::fn::cmul> : bilinear_rule {
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    if constexpr (K == 0)
      return reduce_to<operand_t<A>>(cmul(g, b));
    else
      return reduce_to<operand_t<B>>(cmul(a, g));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::add::apply(cmul(detail::get<0>(d), detail::get<1>(v)), cmul(detail::get<0>(v), detail::get<1>(d)));
  }
};

template <>
struct rule<ir::fn::div> {
  template <int K>
  static constexpr bool needs(bool a0, bool a1) {
    return K == 0 ? a1 : (a0 || a1);
  }
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    if constexpr (K == 0)
      return ir::fn::div::apply(g, b);
    else
      return -reduce_to<float>(cmul(g, a)) / (b * b);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    auto const& a = detail::get<0>(v);
    auto const& b = detail::get<1>(v);
    return ir::fn::div::apply(ir::fn::sub::apply(detail::get<0>(d), ir::fn::mul::apply(a, detail::get<1>(d) / b)), b);
  }
};

// Binary operations acting coefficient by coefficient, a scalar operand
// broadcast over a matrix one (as ir::fn's zip_coeffs computes them). Rule R
// gives the adjoint and the tangent of one coefficient, in scalars
// (coeff_vjp<K>(g, x, y), coeff_jvp(x, y, dx, dy)); these apply it to every
// entry and sum a broadcast operand's adjoint over the entries it met.
template <class A, class B>
using cwise_scalar_t = std::common_type_t<scalar_of_t<A>, scalar_of_t<B>>;

// Entry (r, c) of a matrix, or the scalar itself.
template <class X>
CTG_HOST_DEVICE auto entry_or_self(X const& x, [[maybe_unused]] int r, [[maybe_unused]] int c) {
  if constexpr (is_eigen_fixed_v<X>)
    return x(r, c);
  else
    return x;
}

template <class R, int K, class G, class A, class B>
CTG_HOST_DEVICE auto cwise_vjp(G const& g, A const& a, B const& b) {
  using S = cwise_scalar_t<operand_t<A>, operand_t<B>>;
  if constexpr (!is_eigen_fixed_v<G>) {
    return R::template coeff_vjp<K>(S(g), S(a), S(b));
  } else {
    G out;
    CTG_UNROLL
    for (int r = 0; r < int(G::RowsAtCompileTime); ++r) {
      CTG_UNROLL
      for (int c = 0; c < int(G::ColsAtCompileTime); ++c)
        out(r, c) = R::template coeff_vjp<K>(S(g(r, c)), S(entry_or_self(a, r, c)), S(entry_or_self(b, r, c)));
    }
    return reduce_to<std::conditional_t<K == 0, operand_t<A>, operand_t<B>>>(out);
  }
}

template <class R, class V, class D>
CTG_HOST_DEVICE auto cwise_jvp(V const& v, D const& d) {
  using A = std::remove_cvref_t<decltype(detail::get<0>(v))>;
  using B = std::remove_cvref_t<decltype(detail::get<1>(v))>;
  using S = cwise_scalar_t<A, B>;
  auto const& a = detail::get<0>(v);
  auto const& b = detail::get<1>(v);
  auto const& da = detail::get<0>(d);
  auto const& db = detail::get<1>(d);
  if constexpr (!is_eigen_fixed_v<A> && !is_eigen_fixed_v<B>) {
    return R::coeff_jvp(S(a), S(b), S(da), S(db));
  } else {
    using M = std::conditional_t<is_eigen_fixed_v<A>, A, B>;  // the value's type (zip_coeffs)
    M out;
    CTG_UNROLL
    for (int r = 0; r < int(M::RowsAtCompileTime); ++r) {
      CTG_UNROLL
      for (int c = 0; c < int(M::ColsAtCompileTime); ++c)
        out(r, c) = R::coeff_jvp(S(entry_or_self(a, r, c)), S(entry_or_self(b, r, c)), S(entry_or_self(da, r, c)),
                                 S(entry_or_self(db, r, c)));
    }
    return out;
  }
}

// The binary rules below, on scalars and coefficient by coefficient.
template <class Self>
struct cwise_binary_rule {
  template <int K>
  static constexpr bool needs(bool a0, bool a1) {
    return a0 || a1;
  }
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    return cwise_vjp<Self, K>(g, a, b);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return cwise_jvp<Self>(v, d);
  }
};

template <>
struct rule<ir::fn::atan2> : cwise_binary_rule<rule<ir::fn::atan2>> {
  template <int K, class S>
  CTG_HOST_DEVICE static S coeff_vjp(S g, S y, S x) {
    S const r2 = x * x + y * y;
    if constexpr (K == 0)
      return g * x / r2;
    else
      return -g * y / r2;
  }
  template <class S>
  CTG_HOST_DEVICE static S coeff_jvp(S y, S x, S dy, S dx) {
    return (x * dy - y * dx) / (x * x + y * y);
  }
};

template <>
struct rule<ir::fn::pow> : cwise_binary_rule<rule<ir::fn::pow>> {
  template <class S>
  CTG_HOST_DEVICE static S dx(S x, S y) {
    using std::pow;
    return y == S(0) ? S(0) : y * pow(x, y - S(1));
  }
  template <class S>
  CTG_HOST_DEVICE static S dy(S x, S y) {
    using std::pow, std::log;
    return x > S(0) ? pow(x, y) * log(x) : S(0);
  }
  template <int K, class S>
  CTG_HOST_DEVICE static S coeff_vjp(S g, S x, S y) {
    if constexpr (K == 0)
      return g * dx(x, y);
    else
      return g * dy(x, y);
  }
  template <class S>
  CTG_HOST_DEVICE static S coeff_jvp(S x, S y, S tx, S ty) {
    return dx(x, y) * tx + dy(x, y) * ty;
  }
};

// fmod(x, y) = x - q y, the integer q constant between its jumps. q is
// read back from fmod itself, which is exact: trunc(x / y) may round to the
// next integer (x / y of 1.0 and 0.1 is 10, fmod's q is 9).
template <>
struct rule<ir::fn::fmod> : cwise_binary_rule<rule<ir::fn::fmod>> {
  template <class S>
  CTG_HOST_DEVICE static S quotient(S x, S y) {
    using std::fmod, std::round;
    return round((x - fmod(x, y)) / y);
  }
  template <int K, class S>
  CTG_HOST_DEVICE static S coeff_vjp(S g, S x, S y) {
    if constexpr (K == 0)
      return g;
    else
      return -g * quotient(x, y);
  }
  template <class S>
  CTG_HOST_DEVICE static S coeff_jvp(S x, S y, S tx, S ty) {
    return tx - quotient(x, y) * ty;
  }
};

// min/max pick one operand; ties go to the second (as Quadrants does). The
// operand not picked gets an exact zero, whatever the adjoint holds.
template <bool Max>
struct pick_rule : cwise_binary_rule<pick_rule<Max>> {
  template <class S>
  CTG_HOST_DEVICE static bool first_wins(S a, S b) {
    if constexpr (Max)
      return a > b;
    else
      return a < b;
  }
  template <int K, class S>
  CTG_HOST_DEVICE static S coeff_vjp(S g, S a, S b) {
    return (K == 0) == first_wins(a, b) ? g : S(0);
  }
  template <class S>
  CTG_HOST_DEVICE static S coeff_jvp(S a, S b, S da, S db) {
    return first_wins(a, b) ? da : db;
  }
};
template <>
struct rule<ir::fn::min> : pick_rule<false> {};
template <>
struct rule<ir::fn::max> : pick_rule<true> {};

template <>
struct rule<ir::fn::dot> : bilinear_rule {
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    if constexpr (K == 0)
      return ir::fn::mul::apply(b, g);
    else
      return ir::fn::mul::apply(a, g);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::dot::apply(detail::get<0>(d), detail::get<1>(v)) +
           ir::fn::dot::apply(detail::get<0>(v), detail::get<1>(d));
  }
};

template <>
struct rule<ir::fn::norm_sqr> {
  template <int K>
  static constexpr bool needs(bool a0) {
    return a0;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    return ir::fn::mul::apply(a, g * scalar_of_t<A>(2));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return scalar_of_t<std::remove_cvref_t<decltype(detail::get<0>(v))>>(2) *
           ir::fn::dot::apply(detail::get<0>(v), detail::get<0>(d));
  }
};

// norm'(0) = 0: the zero vector has no direction.
template <>
struct rule<ir::fn::norm> {
  template <int K>
  static constexpr bool needs(bool a0) {
    return a0;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    auto const n = ir::fn::norm::apply(a);
    using S = scalar_of_t<A>;
    return ir::fn::mul::apply(a, n > S(0) ? S(g / n) : S(0));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    auto const n = ir::fn::norm::apply(detail::get<0>(v));
    using S = std::remove_cvref_t<decltype(n)>;
    return n > S(0) ? S(ir::fn::dot::apply(detail::get<0>(v), detail::get<0>(d)) / n) : S(0);
  }
};

template <>
struct rule<ir::fn::cross> : bilinear_rule {
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    if constexpr (is_eigen_fixed_v<G>) {  // 3-vectors: <g, a x b> = <a, b x g> = <b, g x a>
      if constexpr (K == 0)
        return ir::fn::cross::apply(b, g);
      else
        return ir::fn::cross::apply(g, a);
    } else {  // 2-vectors give the scalar a0 b1 - a1 b0
      if constexpr (K == 0)
        return B(g * b(1), -g * b(0));
      else
        return A(-g * a(1), g * a(0));
    }
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::add::apply(ir::fn::cross::apply(detail::get<0>(d), detail::get<1>(v)),
                              ir::fn::cross::apply(detail::get<0>(v), detail::get<1>(d)));
  }
};

template <>
struct rule<ir::fn::outer> : bilinear_rule {
  template <int K, class G, class A, class B>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a, B const& b) {
    using AT = operand_t<A>;
    using BT = operand_t<B>;
    if constexpr (K == 0) {  // G b, shaped like a
      AT r;
      for (int i = 0; i < int(AT::SizeAtCompileTime); ++i) {
        scalar_of_t<AT> s(0);
        for (int j = 0; j < int(BT::SizeAtCompileTime); ++j) s += g(i, j) * b.coeff(j);
        r.coeffRef(i) = s;
      }
      return r;
    } else {  // G^T a, shaped like b
      BT r;
      for (int j = 0; j < int(BT::SizeAtCompileTime); ++j) {
        scalar_of_t<BT> s(0);
        for (int i = 0; i < int(AT::SizeAtCompileTime); ++i) s += g(i, j) * a.coeff(i);
        r.coeffRef(j) = s;
      }
      return r;
    }
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::add::apply(ir::fn::outer::apply(detail::get<0>(d), detail::get<1>(v)),
                              ir::fn::outer::apply(detail::get<0>(v), detail::get<1>(d)));
  }
};

template <>
struct rule<ir::fn::transpose> {
  template <int K>
  static constexpr bool needs(bool) {
    return false;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const&) {
    return transposed(g);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const&, D const& d) {
    return transposed(detail::get<0>(d));
  }
};

template <>
struct rule<ir::fn::trace> {
  template <int K>
  static constexpr bool needs(bool) {
    return false;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const&) {
    using M = operand_t<A>;
    M r = M::Zero();
    for (int k = 0; k < int(M::RowsAtCompileTime); ++k) r(k, k) = g;
    return r;
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const&, D const& d) {
    return ir::fn::trace::apply(detail::get<0>(d));
  }
};

template <>
struct rule<ir::fn::det> {
  template <int K>
  static constexpr bool needs(bool a0) {
    return a0;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    return ir::fn::mul::apply(cofactor(a), g);
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    return ir::fn::dot::apply(cofactor(detail::get<0>(v)), detail::get<0>(d));
  }
};

template <>
struct rule<ir::fn::inverse> {
  template <int K>
  static constexpr bool needs(bool a0) {
    return a0;
  }
  template <int K, class G, class A>
  CTG_HOST_DEVICE static auto vjp(G const& g, A const& a) {
    auto const bt = transposed(ir::fn::inverse::apply(a));
    return ir::fn::neg::apply(ir::fn::mul::apply(ir::fn::mul::apply(bt, g), bt));
  }
  template <class V, class D>
  CTG_HOST_DEVICE static auto jvp(V const& v, D const& d) {
    auto const b = ir::fn::inverse::apply(detail::get<0>(v));
    return ir::fn::neg::apply(ir::fn::mul::apply(ir::fn::mul::apply(b, detail::get<0>(d)), b));
  }
};

}  // namespace ctg::ad
