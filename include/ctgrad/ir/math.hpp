// The math table: every operation a kernel can apply to values, registered
// once. Each entry names itself, says whether it is linear in its operands
// (linear operations need none of their operands' values in the reverse pass,
// which decides what the adstack must keep), and evaluates on scalars and,
// where it makes sense, on fixed-size Eigen matrices. Derivative rules live in
// ad/derivatives.hpp, keyed by the same types.
#pragma once
#include <cmath>
#include <string_view>
#include <type_traits>

#include <Eigen/Core>

#include "../config.hpp"
#include "../element.hpp"
#include "op_table.hpp"

namespace ctg::ir::fn {

// How an operation relates to gradients.
enum class grad_kind {
  linear,          // derivative independent of operand values (add, sub, neg, ...)
  nonlinear,       // derivative reads operand values (mul, sin, ...)
  none             // piecewise constant or integer-valued: no gradient (floor, <, %, ...)
};

namespace detail {

template <class T>
inline constexpr bool is_mat = is_eigen_fixed_v<T>;

// The scalar type a math function computes in: an integer operand becomes
// double, as C++'s <cmath> functions take it (ctg::sqrt(i), ctg::sin(n) of an
// int argument, ctg::atan2(1, 2)), except for the functions that map
// integers to integers (abs, floor, ceil, round, sign, min, max), which keep
// it, so that their results still index fields.
template <class S, bool KeepsIntegers>
using math_scalar_t = std::conditional_t<std::is_integral_v<S> && !KeepsIntegers, double, S>;
constexpr bool keeps_integers(grad_kind kind, std::string_view name) { return kind == grad_kind::none || name == "abs"; }

// Applies a scalar function to every coefficient of a fixed-size matrix.
template <class M, class F>
CTG_HOST_DEVICE M map_coeffs(M const& m, F f) {
  M out;
  CTG_UNROLL
  for (int k = 0; k < int(M::SizeAtCompileTime); ++k) out.coeffRef(k) = f(m.coeff(k));
  return out;
}

// Calls f(at...) once per entry of two matrices of the same entries, `at`
// addressing the entry in both: one linear index when both are stored in one
// order (or are vectors), a (row, column) pair otherwise, since the k-th
// stored coefficient of a row-major and of a column-major matrix are
// different entries.
template <class A, class B, class F>
CTG_HOST_DEVICE void for_each_entry(F f) {
  if constexpr (bool(A::IsRowMajor) == bool(B::IsRowMajor) || int(A::RowsAtCompileTime) == 1 ||
                int(A::ColsAtCompileTime) == 1) {
    CTG_UNROLL
    for (int k = 0; k < int(A::SizeAtCompileTime); ++k) f(k);
  } else {
    CTG_UNROLL
    for (int r = 0; r < int(A::RowsAtCompileTime); ++r) {
      CTG_UNROLL
      for (int c = 0; c < int(A::ColsAtCompileTime); ++c) f(r, c);
    }
  }
}

template <class A, class B, class F>
CTG_HOST_DEVICE auto zip_coeffs(A const& a, B const& b, F f) {
  if constexpr (is_mat<A> && is_mat<B>) {
    static_assert(int(A::RowsAtCompileTime) == int(B::RowsAtCompileTime) &&
                      int(A::ColsAtCompileTime) == int(B::ColsAtCompileTime),
                  "CTG-EXPR-002 coefficient-wise operation on matrices of different shapes");
    A out;
    for_each_entry<A, B>([&](auto... at) { out.coeffRef(at...) = f(a.coeff(at...), b.coeff(at...)); });
    return out;
  } else if constexpr (is_mat<A>) {
    A out;
    CTG_UNROLL
    for (int k = 0; k < int(A::SizeAtCompileTime); ++k) out.coeffRef(k) = f(a.coeff(k), b);
    return out;
  } else if constexpr (is_mat<B>) {
    B out;
    CTG_UNROLL
    for (int k = 0; k < int(B::SizeAtCompileTime); ++k) out.coeffRef(k) = f(a, b.coeff(k));
    return out;
  } else {
    return f(a, b);
  }
}

}  // namespace detail

// A coefficient-wise unary operation from its row of the op table
// (op_table.hpp): its value from a scalar expression in `x`.
#define CTG_IMPL_UNARY_FN(NAME, KIND, SCALAR_EXPR, DERIVATIVE)                        \
  struct NAME {                                                                       \
    static constexpr char const* name = #NAME;                                        \
    static constexpr grad_kind kind = grad_kind::KIND;                                \
    static constexpr int arity = 1;                                                   \
    static constexpr bool keeps_integers = detail::keeps_integers(grad_kind::KIND, #NAME); \
    template <class S>                                                                \
    CTG_HOST_DEVICE static S scalar(S x) {                                            \
      CTG_IMPL_MATH_USING;                                                            \
      return SCALAR_EXPR;                                                             \
    }                                                                                 \
    template <class A>                                                                \
    CTG_HOST_DEVICE static auto apply(A const& a) {                                   \
      if constexpr (detail::is_mat<A>)                                                \
        return A(detail::map_coeffs(a, [](auto s) { return scalar(s); }));            \
      else                                                                            \
        return scalar(detail::math_scalar_t<A, keeps_integers>(a));                   \
    }                                                                                 \
  };

// In an inline namespace that differs with the math library
// (vector_math.hpp): kernels built with and without vector math are
// distinct types, so two translation units never share an instantiation.
CTG_IMPL_MATH_ABI_BEGIN
CTG_IMPL_UNARY_OP_TABLE(CTG_IMPL_UNARY_FN)
CTG_IMPL_MATH_ABI_END
#undef CTG_IMPL_UNARY_FN

struct neg {
  static constexpr char const* name = "neg";
  static constexpr grad_kind kind = grad_kind::linear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& a) {
    if constexpr (detail::is_mat<A>)
      return A(-a);
    else
      return -a;
  }
};

struct add {
  static constexpr char const* name = "add";
  static constexpr grad_kind kind = grad_kind::linear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    if constexpr (detail::is_mat<A> || detail::is_mat<B>)
      return detail::zip_coeffs(a, b, [](auto x, auto y) { return x + y; });
    else
      return a + b;
  }
};
struct sub {
  static constexpr char const* name = "sub";
  static constexpr grad_kind kind = grad_kind::linear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    if constexpr (detail::is_mat<A> || detail::is_mat<B>)
      return detail::zip_coeffs(a, b, [](auto x, auto y) { return x - y; });
    else
      return a - b;
  }
};
// Scalar product, scalar-matrix scaling, or the matrix product (Eigen's `*`).
struct mul {
  static constexpr char const* name = "mul";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    if constexpr (detail::is_mat<A> && detail::is_mat<B>) {
      static_assert(int(A::ColsAtCompileTime) == int(B::RowsAtCompileTime),
                    "CTG-EXPR-002 matrix product of incompatible shapes");
      // Eigen multiplies no float matrix by a double one (the coefficient-
      // wise operations, dot, cross and outer convert coefficient by
      // coefficient), and a matrix keeps its scalar type where a plain
      // number takes the one it meets.
      constexpr bool same_scalar = std::is_same_v<typename A::Scalar, typename B::Scalar>;
      static_assert(same_scalar,
                    "CTG-EXPR-019 matrix product of matrices of different scalar types (float and double: a "
                    "captured Eigen constant keeps its own, where plain numbers take the one they meet). Fix: "
                    "declare the constant with the fields' scalar type (Eigen::Matrix3f), or convert one side "
                    "with ctg::cast<Eigen::Matrix3f>(m)");
      using R = Eigen::Matrix<typename A::Scalar, A::RowsAtCompileTime, B::ColsAtCompileTime>;
      if constexpr (same_scalar) {
        R r = a * b;
        return r;
      } else {
        return R{};  // the error above, alone
      }
    } else if constexpr (detail::is_mat<A> || detail::is_mat<B>) {
      return detail::zip_coeffs(a, b, [](auto x, auto y) { return x * y; });
    } else {
      return a * b;
    }
  }
};
// Coefficient-wise product of two matrices of one shape (Taichi's `*` on
// vectors); with a scalar on either side it scales.
struct cmul {
  static constexpr char const* name = "cmul";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    return detail::zip_coeffs(a, b, [](auto x, auto y) { return x * y; });
  }
};

struct div {
  static constexpr char const* name = "div";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    static_assert(!detail::is_mat<B>, "CTG-EXPR-002 division by a matrix; use inverse()");
    if constexpr (detail::is_mat<A>)
      return detail::zip_coeffs(a, b, [](auto x, auto y) { return x / y; });
    else
      return a / b;
  }
};
// Integer remainder with C++ semantics (the sign follows the dividend).
struct mod {
  static constexpr char const* name = "mod";
  static constexpr grad_kind kind = grad_kind::none;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    static_assert(std::is_integral_v<A> && std::is_integral_v<B>,
                  "CTG-EXPR-003 % takes integer operands; for floats use ctg::fmod(a, b) or a - b * ctg::floor(a / b)");
    if constexpr (std::is_integral_v<A> && std::is_integral_v<B>)
      return a % b;
    else
      return A{};  // after the assertion: no second error for the operator
  }
};

#define CTG_IMPL_BINARY_FN(NAME, KIND, RESULT, EXPR)              \
  struct NAME {                                                   \
    static constexpr char const* name = #NAME;                    \
    static constexpr grad_kind kind = grad_kind::KIND;            \
    static constexpr int arity = 2;                               \
    template <class A, class B>                                   \
    CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {   \
      static_assert(!detail::is_mat<A> && !detail::is_mat<B>,     \
                    "CTG-EXPR-002 " #NAME " takes scalar operands"); \
      return RESULT(EXPR);                                        \
    }                                                             \
  }

CTG_IMPL_BINARY_FN(lt, none, bool, a < b);
CTG_IMPL_BINARY_FN(le, none, bool, a <= b);
CTG_IMPL_BINARY_FN(gt, none, bool, a > b);
CTG_IMPL_BINARY_FN(ge, none, bool, a >= b);
CTG_IMPL_BINARY_FN(eq, none, bool, a == b);
CTG_IMPL_BINARY_FN(ne, none, bool, a != b);
CTG_IMPL_BINARY_FN(logical_and, none, bool, bool(a) && bool(b));
CTG_IMPL_BINARY_FN(logical_or, none, bool, bool(a) || bool(b));
// && and || evaluate their second operand only where the first does not
// decide, as C++'s do (eval/forward.hpp, the tangent and the adjoint's
// record): a guard such as `i > 0 && x[i - 1] > 0` keeps the read inside
// the field. short_circuit_v<Fn> is the first operand's value that decides.
template <class Fn>
inline constexpr bool short_circuits_v = std::is_same_v<Fn, logical_and> || std::is_same_v<Fn, logical_or>;
template <class Fn>
inline constexpr bool short_circuit_v = std::is_same_v<Fn, logical_or>;
CTG_IMPL_BINARY_FN(bit_and, none, , a & b);
CTG_IMPL_BINARY_FN(bit_or, none, , a | b);
CTG_IMPL_BINARY_FN(bit_xor, none, , a ^ b);
CTG_IMPL_BINARY_FN(shl, none, , a << b);
CTG_IMPL_BINARY_FN(shr, none, , a >> b);
#undef CTG_IMPL_BINARY_FN

struct logical_not {
  static constexpr char const* name = "logical_not";
  static constexpr grad_kind kind = grad_kind::none;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static bool apply(A const& a) {
    return !bool(a);
  }
};

// Binary math on scalars, coefficient-wise when one side is a matrix, in
// the operands' common type (integers to double for atan2 and pow, as C++'s
// <cmath> does: KEEPS_INTEGERS).
#define CTG_IMPL_BINARY_MATH(NAME, KIND, KEEPS_INTEGERS, SCALAR_EXPR)           \
  struct NAME {                                                                 \
    static constexpr char const* name = #NAME;                                  \
    static constexpr grad_kind kind = grad_kind::KIND;                          \
    static constexpr int arity = 2;                                             \
    template <class S>                                                          \
    CTG_HOST_DEVICE static S scalar(S x, S y) {                                 \
      using std::atan2, std::pow, std::fmod;                                    \
      return SCALAR_EXPR;                                                       \
    }                                                                           \
    template <class A, class B>                                                 \
    CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {                 \
      using S = detail::math_scalar_t<std::common_type_t<scalar_of_t<A>, scalar_of_t<B>>, KEEPS_INTEGERS>; \
      return detail::zip_coeffs(a, b, [](auto x, auto y) { return scalar(S(x), S(y)); }); \
    }                                                                           \
  }

CTG_IMPL_BINARY_MATH(atan2, nonlinear, false, atan2(x, y));
CTG_IMPL_BINARY_MATH(pow, nonlinear, false, pow(x, y));
// The floating-point remainder of C (the sign follows the dividend).
CTG_IMPL_BINARY_MATH(fmod, nonlinear, false, fmod(x, y));
// Ties (x == y) send the gradient to the second operand, as in Quadrants.
CTG_IMPL_BINARY_MATH(min, nonlinear, true, (x < y ? x : y));
CTG_IMPL_BINARY_MATH(max, nonlinear, true, (x > y ? x : y));
#undef CTG_IMPL_BINARY_MATH

// ---- linear algebra on fixed-size Eigen matrices ----------------------------

struct dot {
  static constexpr char const* name = "dot";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    static_assert(detail::is_mat<A> && detail::is_mat<B> &&
                      int(A::SizeAtCompileTime) == int(B::SizeAtCompileTime),
                  "CTG-EXPR-002 dot takes two vectors of the same size");
    typename A::Scalar s(0);
    detail::for_each_entry<A, B>([&](auto... at) { s += a.coeff(at...) * b.coeff(at...); });
    return s;
  }
};
struct norm_sqr {
  static constexpr char const* name = "norm_sqr";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& a) {
    static_assert(detail::is_mat<A>, "CTG-EXPR-002 norm_sqr takes a vector or matrix");
    return dot::apply(a, a);
  }
};
struct norm {
  static constexpr char const* name = "norm";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& a) {
    using std::sqrt;
    return sqrt(norm_sqr::apply(a));
  }
};
struct cross {
  static constexpr char const* name = "cross";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    static_assert(detail::is_mat<A> && detail::is_mat<B>, "CTG-EXPR-002 cross takes vectors");
    constexpr int n = int(A::SizeAtCompileTime);
    static_assert(n == int(B::SizeAtCompileTime) && (n == 2 || n == 3),
                  "CTG-EXPR-002 cross takes two 2-vectors (giving a scalar) or two 3-vectors");
    if constexpr (n == 3) {
      A r;
      r(0) = a(1) * b(2) - a(2) * b(1);
      r(1) = a(2) * b(0) - a(0) * b(2);
      r(2) = a(0) * b(1) - a(1) * b(0);
      return r;
    } else {
      return a(0) * b(1) - a(1) * b(0);
    }
  }
};
struct outer {
  static constexpr char const* name = "outer";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 2;
  template <class A, class B>
  CTG_HOST_DEVICE static auto apply(A const& a, B const& b) {
    static_assert(detail::is_mat<A> && detail::is_mat<B>, "CTG-EXPR-002 outer takes vectors");
    using R = Eigen::Matrix<typename A::Scalar, A::SizeAtCompileTime, B::SizeAtCompileTime>;
    R r;
    CTG_UNROLL
    for (int i = 0; i < int(A::SizeAtCompileTime); ++i)
      CTG_UNROLL
      for (int j = 0; j < int(B::SizeAtCompileTime); ++j) r(i, j) = a.coeff(i) * b.coeff(j);
    return r;
  }
};
struct transpose {
  static constexpr char const* name = "transpose";
  static constexpr grad_kind kind = grad_kind::linear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& a) {
    static_assert(detail::is_mat<A>, "CTG-EXPR-002 transpose takes a matrix");
    using R = Eigen::Matrix<typename A::Scalar, A::ColsAtCompileTime, A::RowsAtCompileTime>;
    R r;
    CTG_UNROLL
    for (int i = 0; i < int(A::RowsAtCompileTime); ++i)
      CTG_UNROLL
      for (int j = 0; j < int(A::ColsAtCompileTime); ++j) r(j, i) = a(i, j);
    return r;
  }
};
struct trace {
  static constexpr char const* name = "trace";
  static constexpr grad_kind kind = grad_kind::linear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& a) {
    static_assert(detail::is_mat<A> && int(A::RowsAtCompileTime) == int(A::ColsAtCompileTime),
                  "CTG-EXPR-002 trace takes a square matrix");
    typename A::Scalar s(0);
    CTG_UNROLL
    for (int i = 0; i < int(A::RowsAtCompileTime); ++i) s += a(i, i);
    return s;
  }
};
// Closed-form determinant of 2x2 and 3x3 matrices.
struct det {
  static constexpr char const* name = "det";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static auto apply(A const& m) {
    static_assert(detail::is_mat<A> && int(A::RowsAtCompileTime) == int(A::ColsAtCompileTime) &&
                      (int(A::RowsAtCompileTime) == 2 || int(A::RowsAtCompileTime) == 3),
                  "CTG-EXPR-002 det takes a 2x2 or 3x3 matrix");
    if constexpr (int(A::RowsAtCompileTime) == 2)
      return m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0);
    else
      return m(0, 0) * (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) -
             m(0, 1) * (m(1, 0) * m(2, 2) - m(1, 2) * m(2, 0)) +
             m(0, 2) * (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0));
  }
};
// Closed-form inverse of 2x2 and 3x3 matrices (adjugate over determinant).
struct inverse {
  static constexpr char const* name = "inverse";
  static constexpr grad_kind kind = grad_kind::nonlinear;
  static constexpr int arity = 1;
  template <class A>
  CTG_HOST_DEVICE static A apply(A const& m) {
    auto const d = det::apply(m);
    using S = typename A::Scalar;
    S const inv = S(1) / d;
    A r;
    if constexpr (int(A::RowsAtCompileTime) == 2) {
      r(0, 0) = m(1, 1) * inv;
      r(0, 1) = -m(0, 1) * inv;
      r(1, 0) = -m(1, 0) * inv;
      r(1, 1) = m(0, 0) * inv;
    } else {
      r(0, 0) = (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) * inv;
      r(0, 1) = (m(0, 2) * m(2, 1) - m(0, 1) * m(2, 2)) * inv;
      r(0, 2) = (m(0, 1) * m(1, 2) - m(0, 2) * m(1, 1)) * inv;
      r(1, 0) = (m(1, 2) * m(2, 0) - m(1, 0) * m(2, 2)) * inv;
      r(1, 1) = (m(0, 0) * m(2, 2) - m(0, 2) * m(2, 0)) * inv;
      r(1, 2) = (m(0, 2) * m(1, 0) - m(0, 0) * m(1, 2)) * inv;
      r(2, 0) = (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0)) * inv;
      r(2, 1) = (m(0, 1) * m(2, 0) - m(0, 0) * m(2, 1)) * inv;
      r(2, 2) = (m(0, 0) * m(1, 1) - m(0, 1) * m(1, 0)) * inv;
    }
    return r;
  }
};

// Value type of applying Fn to operands of the given types.
template <class Fn, class... A>
using result_t = std::remove_cvref_t<decltype(Fn::apply(std::declval<A const&>()...))>;

template <class Fn, class... A>
concept applicable = requires(A const&... a) { Fn::apply(a...); };

}  // namespace ctg::ir::fn
