// How kernel code builds expressions: operators and functions on IR nodes,
// writable element handles (lvalue), constants, casts, select and stop_grad.
// Nothing here evaluates anything; it only builds node types.
#pragma once
#include <type_traits>
#include <utility>

#include "../element.hpp"
#include "math.hpp"
#include "node.hpp"
#include "statement_trace.hpp"

namespace ctg::ir {

// A writable place in a kernel: a field element, a local, or one component of
// either. Assigning to it builds a statement; reading it is an expression.
// Frontend-only (never part of the lowered IR), so it may define operator=.
template <class N>
struct lvalue;

template <class T>
struct is_lvalue : std::false_type {};
template <class N>
struct is_lvalue<lvalue<N>> : std::true_type {};
template <class T>
inline constexpr bool is_lvalue_v = is_lvalue<std::remove_cvref_t<T>>::value;

// Anything kernel code may combine with operators: IR nodes, element handles
// and not-yet-lowered constructs (func calls, let-blocks yielding a value).
template <class T>
concept dsl_expr = is_node_v<T> || is_lvalue_v<T> || is_pending_v<T>;

// What may appear as an operand: a dsl_expr, a plain number, an Eigen constant.
template <class T>
concept dsl_operand = dsl_expr<T> || std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                      is_eigen_fixed_v<std::remove_cvref_t<T>>;

template <class T>
constexpr auto as_expr(T const& x) {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_lvalue_v<U>)
    return x.expr;
  else if constexpr (is_node_v<U> || is_pending_v<U>)
    return x;
  else if constexpr (std::is_arithmetic_v<U>)
    return node<op::weak_literal<U>>{{x}, {}};
  else if constexpr (is_eigen_fixed_v<U>)
    return node<op::literal<U>>{op::literal<U>::of(x), {}};
  else
    static_assert(detail::dependent_false<T>,
                  "CTG-EXPR-001 this value cannot appear in a kernel expression: use numbers, "
                  "fixed-size Eigen matrices, field elements, locals or loop indices");
}
template <class T>
using as_expr_t = decltype(as_expr(std::declval<T const&>()));

// ---- settling plain numbers ------------------------------------------------------
// A weak literal meeting a value of type V takes V's scalar type when that
// keeps the number exact in spirit: any number next to a floating-point value
// becomes that floating type; an integer next to an integer becomes that
// integer type; a floating number next to an integer keeps its own type.
template <class V, class W>
struct settled_scalar {
  using S = scalar_of_t<V>;
  using type = std::conditional_t<
      std::is_floating_point_v<S> || (std::is_integral_v<W> && std::is_integral_v<S> &&
                                      !std::is_same_v<S, bool>),
      S, W>;
};

template <class N>
inline constexpr bool is_weak_v = false;
template <class T>
inline constexpr bool is_weak_v<node<op::weak_literal<T>>> = true;

// Settles a weak literal against value type V (void: its own type).
template <class V, class N>
constexpr auto settle_against(N const& n) {
  if constexpr (is_weak_v<N>) {
    using W = decltype(n.op.value);
    if constexpr (std::is_void_v<V>) {
      return node<op::literal<W>>{{n.op.value}, {}};
    } else {
      using S = typename settled_scalar<V, W>::type;
      return node<op::literal<S>>{{S(n.op.value)}, {}};
    }
  } else {
    return n;
  }
}
// The first non-weak operand's value type, or void.
template <class... K>
struct anchor_value {
  using type = void;
};
template <class K, class... Rest>
struct anchor_value<K, Rest...> {
  using type = std::conditional_t<is_weak_v<K>, typename anchor_value<Rest...>::type, value_t<K>>;
};

// Whether a subtree holds something lowering still settles: a weak literal
// or a pending construct (a loop, a let-block, a func call), whose value type
// is not yet the one it will have.
template <class N>
struct holds_unsettled : std::bool_constant<is_pending_v<N>> {};
template <class Op, class... K>
struct holds_unsettled<node<Op, K...>> : std::bool_constant<(holds_unsettled<K>::value || ...)> {};
template <class T>
struct holds_unsettled<node<op::weak_literal<T>>> : std::true_type {};

// Whether operands K settle here: one is a plain number and the others hold
// nothing lowering would still settle.
template <class... K>
inline constexpr bool settles_here_v = (is_weak_v<K> || ...) && ((is_weak_v<K> || !holds_unsettled<K>::value) && ...);

// A math node. Its plain numbers are settled here against the operands, as
// lowering would settle them (settle in lower/lower.hpp), when every other
// operand is settled already: the node then lowers as it is, which spares
// lowering a rebuild of each node above it (lower/lower.hpp, lowers_as_is).
template <class Fn, class... A>
constexpr auto make_math_any(A const&... a) {
  if constexpr (settles_here_v<as_expr_t<A>...>) {
    using V = typename anchor_value<as_expr_t<A>...>::type;
    return node<op::math<Fn>, decltype(settle_against<V>(as_expr(a)))...>{{}, {{{settle_against<V>(as_expr(a))}...}}};
  } else {
    return node<op::math<Fn>, as_expr_t<A>...>{{}, {{{as_expr(a)}...}}};
  }
}

// An operand that goes into a math node as it is: a node that is not a
// plain number (as_expr returns it unchanged, and so does settle_against).
template <class T>
inline constexpr bool node_as_is_v = is_node_v<T> && !is_weak_v<T>;

// One and two operands, the operators' and math functions' case: an operand
// that is node_as_is_v goes into the new node as it is, not through
// as_expr and settle_against, which would each be a function named after
// its type, the subtree below it (one per level of a deep expression, the
// names the compiler spends its time on: docs/05, *Names without records*).
// The node built is make_math_any's. The operators and math functions
// expand these bodies themselves, for the same reason: a make_math between
// them and the node would be one more such name per level.
#define CTG_IMPL_RETURN_MATH1(FN, A0, a0)        \
  if constexpr (node_as_is_v<A0>)                \
    return node<op::math<FN>, A0>{{}, {{{a0}}}}; \
  else                                           \
    return make_math_any<FN>(a0)
#define CTG_IMPL_RETURN_MATH2(FN, A0, A1, a0, a1)                                                                      \
  if constexpr (node_as_is_v<A0> && node_as_is_v<A1>) {                                                                \
    return node<op::math<FN>, A0, A1>{{}, {{{a0}, {a1}}}};                                                             \
  } else if constexpr (node_as_is_v<A0>) {                                                                             \
    if constexpr (settles_here_v<A0, as_expr_t<A1>>)                                                                   \
      return node<op::math<FN>, A0,                                                                                    \
                  decltype(settle_against<typename anchor_value<A0, as_expr_t<A1>>::type>(as_expr(a1)))>{              \
          {}, {{{a0}, {settle_against<typename anchor_value<A0, as_expr_t<A1>>::type>(as_expr(a1))}}}};                \
    else                                                                                                               \
      return node<op::math<FN>, A0, as_expr_t<A1>>{{}, {{{a0}, {as_expr(a1)}}}};                                       \
  } else if constexpr (node_as_is_v<A1>) {                                                                             \
    if constexpr (settles_here_v<as_expr_t<A0>, A1>)                                                                   \
      return node<op::math<FN>, decltype(settle_against<typename anchor_value<as_expr_t<A0>, A1>::type>(as_expr(a0))), \
                  A1>{{}, {{{settle_against<typename anchor_value<as_expr_t<A0>, A1>::type>(as_expr(a0))}, {a1}}}};    \
    else                                                                                                               \
      return node<op::math<FN>, as_expr_t<A0>, A1>{{}, {{{as_expr(a0)}, {a1}}}};                                       \
  } else {                                                                                                             \
    return make_math_any<FN>(a0, a1);                                                                                  \
  }

// ---- trees built out of line ----------------------------------------------
// Each builder copies its operands into the node it returns, so a tree
// built by inlined builders is copied once per level, each copy addressing
// values as many levels down as the subtree is tall: clang's combining
// passes spend the cube of the height on the kernel's lambda (231 of the
// 324 s of a 400-operation chain). A builder over an operand at least
// out_of_line_height tall is therefore declared a second time, [[gnu::noinline]],
// so that each level is one function copying one operand. Shorter trees,
// every ordinary kernel's, stay inline: the generated loops then see their
// literals' values (docs/05, *Trees built out of line*).
inline constexpr int out_of_line_height = 32;

// ---- trees evaluated out of line ------------------------------------------
// The evaluators (the forward value, the adjoint's record and its
// propagation) are one function per node, each calling its operands'.
// Inlined bottom up, each is simplified with its whole subtree inside it,
// so a tall expression costs the optimiser the square of its height (clang:
// the mean time per record function rose from 0.9 ms at the lowest tenth of
// a 200-operation chain to 54 ms at the highest). A math node at least
// out_of_line_height tall whose height is a multiple of
// evaluated_apart_every is therefore evaluated by a function that is not
// inlined: above the lowest out_of_line_height levels, a chain of math nodes
// is cut every evaluated_apart_every levels (other nodes are not cut).
// Shorter trees stay inline (docs/05, *Evaluators out of line*).
inline constexpr int evaluated_apart_every = 8;
template <class N>
inline constexpr bool evaluated_apart_v = height_v<N> >= out_of_line_height && height_v<N> % evaluated_apart_every == 0;
// An evaluator's function for math nodes is written once, as a macro
// DECLARE(APART, ATTRIBUTE) that constrains it on evaluated_apart_v == APART
// and adds ATTRIBUTE, and declared in both forms by this one. Two functions
// of one body, rather than one calling the other where it is apart, keep the
// instantiations one per level of the tree.
#define CTG_IMPL_INLINE_AND_APART(DECLARE) DECLARE(false, ) DECLARE(true, CTG_NOINLINE)

template <class T>
inline constexpr int operand_height_v = height_v<T>;
template <class N>
inline constexpr int operand_height_v<lvalue<N>> = height_v<N>;

template <class... A>
inline constexpr bool builds_out_of_line_v = ((operand_height_v<A> >= out_of_line_height) || ...);

// Each such builder is written once, as a macro DECLARE(TALL, ATTRIBUTES, ...)
// that constrains it on builds_out_of_line_v<...> == TALL and adds ATTRIBUTES
// to its own, and declared in both forms by this one.
#define CTG_IMPL_OUT_OF_LINE_ATTRIBUTE , gnu::noinline
#define CTG_IMPL_INLINE_AND_OUT_OF_LINE(DECLARE, ...) \
  DECLARE(false, , __VA_ARGS__) DECLARE(true, CTG_IMPL_OUT_OF_LINE_ATTRIBUTE, __VA_ARGS__)

#define CTG_IMPL_MAKE_MATH(TALL, ATTRIBUTES, ...)                                             \
  template <class Fn, class A0>                                                             \
    requires(builds_out_of_line_v<A0> == TALL)                                              \
  [[nodiscard ATTRIBUTES]] constexpr auto make_math(A0 const& a0) {                         \
    CTG_IMPL_RETURN_MATH1(Fn, A0, a0);                                                      \
  }                                                                                         \
  template <class Fn, class A0, class A1>                                                   \
    requires(builds_out_of_line_v<A0, A1> == TALL)                                          \
  [[nodiscard ATTRIBUTES]] constexpr auto make_math(A0 const& a0, A1 const& a1) {           \
    CTG_IMPL_RETURN_MATH2(Fn, A0, A1, a0, a1)                                               \
  }                                                                                         \
  template <class Fn, class A0, class A1, class A2, class... A>                             \
    requires(builds_out_of_line_v<A0, A1, A2, A...> == TALL)                                \
  [[nodiscard ATTRIBUTES]] constexpr auto make_math(A0 const& a0, A1 const& a1, A2 const& a2, \
                                                    A const&... a) {                        \
    return make_math_any<Fn>(a0, a1, a2, a...);                                             \
  }                                                                                         \
  template <class Op, class... A>                                                           \
    requires(builds_out_of_line_v<A...> == TALL)                                            \
  [[nodiscard ATTRIBUTES]] constexpr auto make_expr(Op op, A const&... a) {                 \
    return node<Op, as_expr_t<A>...>{op, {{{as_expr(a)}...}}};                              \
  }
CTG_IMPL_INLINE_AND_OUT_OF_LINE(CTG_IMPL_MAKE_MATH)
#undef CTG_IMPL_MAKE_MATH

// ---- operators -------------------------------------------------------------
// The operators need an expression on one side (two numbers are C++'s own).
template <class A, class B>
concept binary_operands = dsl_operand<A> && dsl_operand<B> && (dsl_expr<A> || dsl_expr<B>);
// The named functions take plain numbers too, as the unary ones do: a func
// called with a number, or a scalar kernel argument, is one (ctg::pow(h, 2)).
template <class A, class B>
concept function_operands = dsl_operand<A> && dsl_operand<B>;

#define CTG_IMPL_BINARY_OPERATOR_AS(TALL, ATTRIBUTES, OP, FN)                  \
  template <class A, class B>                                                  \
    requires(binary_operands<A, B> && builds_out_of_line_v<A, B> == TALL)      \
  [[nodiscard ATTRIBUTES]] constexpr auto operator OP(A const& a, B const& b) { \
    CTG_IMPL_RETURN_MATH2(fn::FN, A, B, a, b)                                  \
  }
#define CTG_IMPL_BINARY_OPERATOR(OP, FN) CTG_IMPL_INLINE_AND_OUT_OF_LINE(CTG_IMPL_BINARY_OPERATOR_AS, OP, FN)
CTG_IMPL_BINARY_OPERATOR(+, add)
CTG_IMPL_BINARY_OPERATOR(-, sub)
CTG_IMPL_BINARY_OPERATOR(*, mul)
CTG_IMPL_BINARY_OPERATOR(/, div)
CTG_IMPL_BINARY_OPERATOR(%, mod)
CTG_IMPL_BINARY_OPERATOR(<, lt)
CTG_IMPL_BINARY_OPERATOR(<=, le)
CTG_IMPL_BINARY_OPERATOR(>, gt)
CTG_IMPL_BINARY_OPERATOR(>=, ge)
CTG_IMPL_BINARY_OPERATOR(==, eq)
CTG_IMPL_BINARY_OPERATOR(!=, ne)
CTG_IMPL_BINARY_OPERATOR(&&, logical_and)
CTG_IMPL_BINARY_OPERATOR(||, logical_or)
CTG_IMPL_BINARY_OPERATOR(&, bit_and)
CTG_IMPL_BINARY_OPERATOR(|, bit_or)
CTG_IMPL_BINARY_OPERATOR(^, bit_xor)
CTG_IMPL_BINARY_OPERATOR(<<, shl)
CTG_IMPL_BINARY_OPERATOR(>>, shr)
#undef CTG_IMPL_BINARY_OPERATOR
#undef CTG_IMPL_BINARY_OPERATOR_AS

#define CTG_IMPL_NEGATION(TALL, ATTRIBUTES, ...)                 \
  template <dsl_expr A>                                          \
    requires(builds_out_of_line_v<A> == TALL)                    \
  [[nodiscard ATTRIBUTES]] constexpr auto operator-(A const& a) { \
    CTG_IMPL_RETURN_MATH1(fn::neg, A, a);                        \
  }
CTG_IMPL_INLINE_AND_OUT_OF_LINE(CTG_IMPL_NEGATION)
#undef CTG_IMPL_NEGATION
template <dsl_expr A>
[[nodiscard]] constexpr auto operator+(A const& a) {
  return as_expr(a);
}
template <dsl_expr A>
[[nodiscard]] constexpr auto operator!(A const& a) {
  return make_math<fn::logical_not>(a);
}

// ---- element handles -------------------------------------------------------
// Whether an element handle names a local (or a component of one).
template <class N>
struct writes_local : std::false_type {};
template <int S, class T>
struct writes_local<node<op::local<S, T>>> : std::true_type {};
template <class V, class... I>
struct writes_local<node<op::component, V, I...>> : writes_local<V> {};

template <class N>
struct lvalue {
  N expr;

  constexpr lvalue() = default;
  constexpr explicit lvalue(N e) : expr(e) {}
  constexpr lvalue(lvalue const&) = default;

  // A field element or a local in C++'s if or ?: (see node's operator bool).
  constexpr explicit operator bool() const {
    static_assert(detail::dependent_false<N>, CTG_IMPL_MSG_EXPR_016);
    return false;
  }

  // Assignment builds a statement: a store for field elements, an assignment
  // for locals. The copy-assignment form is spelled out so that `a = a` builds
  // a statement too instead of copying the handle. A statement written on its
  // own line is built and dropped: the launch reports it (statement_trace.hpp),
  // or, where the body then returns nothing, the build (CTG-EXPR-010). Not
  // [[nodiscard]]: the compiler's warning would come first, with every
  // template the launch instantiated on the way to the body.
  constexpr auto operator=(lvalue const& rhs) const { return assign_from(rhs); }
  template <dsl_operand E>
  constexpr auto operator=(E const& rhs) const {
    return assign_from(rhs);
  }

  // On field elements `+=`/`-=` are atomic accumulations (an offload's
  // iterations may hit the same element); on locals they are plain updates.
  template <dsl_operand E>
  constexpr auto operator+=(E const& rhs) const {
    if constexpr (targets_field)
      return accumulate<atomic_kind::add>(rhs);
    else
      return assign_from(expr + rhs);
  }
  template <dsl_operand E>
  constexpr auto operator-=(E const& rhs) const {
    if constexpr (targets_field)
      return accumulate<atomic_kind::sub>(rhs);
    else
      return assign_from(expr - rhs);
  }
  // An accumulation into the field element (targets_field): += and -= above,
  // atomic_min and atomic_max (lower/builders.hpp), each of which says so.
  template <atomic_kind K, dsl_operand E>
  constexpr auto accumulate(E const& rhs) const {
    note_built({statement_kind::accumulation, written_param<N>::value});
    return make_expr(op::atomic<K>{}, expr, rhs);
  }
  template <dsl_operand E>
  constexpr auto operator*=(E const& rhs) const {
    static_assert(!targets_field,
                  "CTG-EXPR-004 *= on a field element: there is no atomic multiply; write "
                  "f[i] = f[i] * e where no other iteration touches f[i]");
    return assign_from(expr * rhs);
  }
  template <dsl_operand E>
  constexpr auto operator/=(E const& rhs) const {
    static_assert(!targets_field,
                  "CTG-EXPR-004 /= on a field element: there is no atomic divide; write "
                  "f[i] = f[i] / e where no other iteration touches f[i]");
    return assign_from(expr / rhs);
  }

  // One component of a vector- or matrix-valued element: f[i][k], v(r, c).
  template <dsl_operand I>
  constexpr auto operator[](I const& k) const {
    return lvalue<node<op::component, N, as_expr_t<I>>>{make_expr(op::component{}, expr, k)};
  }
  template <dsl_operand R, dsl_operand C>
  constexpr auto operator()(R const& r, C const& c) const {
    return lvalue<node<op::component, N, as_expr_t<R>, as_expr_t<C>>>{
        make_expr(op::component{}, expr, r, c)};
  }

  static constexpr bool targets_field = !writes_local<N>::value;

 private:
  template <class E>
  constexpr auto assign_from(E const& rhs) const {
    if constexpr (targets_field) {
      note_built({statement_kind::store, written_param<N>::value});
      return make_expr(op::store{}, expr, rhs);
    } else {
      note_built({statement_kind::local_update});
      return make_expr(op::assign<>{}, expr, rhs);
    }
  }
};

// ---- component access on expressions -----------------------------------------
template <class Op, class... Kids>
template <class I>
constexpr auto node<Op, Kids...>::operator[](I k) const {
  return make_expr(op::component{}, *this, k);
}
template <class Op, class... Kids>
template <class R, class C>
constexpr auto node<Op, Kids...>::operator()(R r, C c) const {
  return make_expr(op::component{}, *this, r, c);
}

// ---- constants -------------------------------------------------------------
// A compile-time index constant: `out[ctg::c<0>]`, `ctg::range(ctg::c<4>, ...)`.
template <long long N>
inline constexpr node<op::constant<N>> c{};

namespace literals {
namespace detail_c {
template <char... Cs>
constexpr long long parse() {
  long long v = 0;
  ((v = v * 10 + (Cs - '0')), ...);
  return v;
}
}  // namespace detail_c
// 4_c is ctg::c<4>.
template <char... Cs>
constexpr auto operator""_c() {
  static_assert(((Cs >= '0' && Cs <= '9') && ...), "CTG-EXPR-006 _c takes a decimal integer");
  return c<detail_c::parse<Cs...>()>;
}
}  // namespace literals

// ---- value functions -------------------------------------------------------
template <class T, dsl_operand A>
[[nodiscard]] constexpr auto cast(A const& a) {
  static_assert(is_element_type_v<T>, "CTG-EXPR-001 cast<T>: T must be a field element type");
  return make_expr(op::cast<T>{}, a);
}

// c ? a : b, evaluating only the chosen side.
template <dsl_operand C, dsl_operand A, dsl_operand B>
[[nodiscard]] constexpr auto select(C const& c, A const& a, B const& b) {
  return make_expr(op::select{}, c, a, b);
}

// The value of e, through which no gradient flows.
template <dsl_operand A>
[[nodiscard]] constexpr auto stop_grad(A const& a) {
  return make_expr(op::stop_grad{}, a);
}

// Unary functions take kernel expressions and also plain numbers (a scalar
// kernel argument is a number): ctg::sin(x) is an expression either way.
#define CTG_IMPL_UNARY_FUNCTION_AS(TALL, ATTRIBUTES, NAME)  \
  template <dsl_operand A>                                  \
    requires(builds_out_of_line_v<A> == TALL)               \
  [[nodiscard ATTRIBUTES]] constexpr auto NAME(A const& a) { \
    CTG_IMPL_RETURN_MATH1(fn::NAME, A, a);                  \
  }
#define CTG_IMPL_UNARY_FUNCTION(NAME) CTG_IMPL_INLINE_AND_OUT_OF_LINE(CTG_IMPL_UNARY_FUNCTION_AS, NAME)
#define CTG_IMPL_UNARY_FUNCTION_ROW(NAME, KIND, VALUE, DERIVATIVE) CTG_IMPL_UNARY_FUNCTION(NAME)
CTG_IMPL_UNARY_OP_TABLE(CTG_IMPL_UNARY_FUNCTION_ROW)
#undef CTG_IMPL_UNARY_FUNCTION_ROW
CTG_IMPL_UNARY_FUNCTION(norm)
CTG_IMPL_UNARY_FUNCTION(norm_sqr)
CTG_IMPL_UNARY_FUNCTION(transpose)
CTG_IMPL_UNARY_FUNCTION(trace)
CTG_IMPL_UNARY_FUNCTION(det)
CTG_IMPL_UNARY_FUNCTION(inverse)
#undef CTG_IMPL_UNARY_FUNCTION
#undef CTG_IMPL_UNARY_FUNCTION_AS

#define CTG_IMPL_BINARY_FUNCTION_AS(TALL, ATTRIBUTES, NAME)                  \
  template <class A, class B>                                               \
    requires(function_operands<A, B> && builds_out_of_line_v<A, B> == TALL) \
  [[nodiscard ATTRIBUTES]] constexpr auto NAME(A const& a, B const& b) {     \
    CTG_IMPL_RETURN_MATH2(fn::NAME, A, B, a, b)                             \
  }
#define CTG_IMPL_BINARY_FUNCTION(NAME) CTG_IMPL_INLINE_AND_OUT_OF_LINE(CTG_IMPL_BINARY_FUNCTION_AS, NAME)
CTG_IMPL_BINARY_FUNCTION(atan2)
CTG_IMPL_BINARY_FUNCTION(pow)
CTG_IMPL_BINARY_FUNCTION(fmod)
CTG_IMPL_BINARY_FUNCTION(min)
CTG_IMPL_BINARY_FUNCTION(max)
CTG_IMPL_BINARY_FUNCTION(dot)
CTG_IMPL_BINARY_FUNCTION(cross)
CTG_IMPL_BINARY_FUNCTION(outer)
CTG_IMPL_BINARY_FUNCTION(cmul)
#undef CTG_IMPL_BINARY_FUNCTION
#undef CTG_IMPL_BINARY_FUNCTION_AS
#undef CTG_IMPL_RETURN_MATH1
#undef CTG_IMPL_RETURN_MATH2
#undef CTG_IMPL_OUT_OF_LINE_ATTRIBUTE
#undef CTG_IMPL_INLINE_AND_OUT_OF_LINE

template <dsl_operand X, dsl_operand L, dsl_operand H>
[[nodiscard]] constexpr auto clamp(X const& x, L const& lo, H const& hi) {
  return make_math<fn::min>(make_math<fn::max>(x, lo), hi);
}

template <dsl_expr A>
[[nodiscard]] constexpr auto normalized(A const& a) {
  return make_math<fn::div>(a, make_math<fn::norm>(a));
}

// A column vector from scalar expressions: ctg::vec(a, b, c).
template <dsl_operand... A>
[[nodiscard]] constexpr auto vec(A const&... a) {
  return make_expr(op::make_matrix<int(sizeof...(A)), 1>{}, a...);
}
// An R x C matrix from R*C scalar expressions given row by row.
template <int R, int C, dsl_operand... A>
[[nodiscard]] constexpr auto mat(A const&... a) {
  static_assert(int(sizeof...(A)) == R * C, "CTG-EXPR-002 ctg::mat<R, C> takes R*C coefficients");
  return make_expr(op::make_matrix<R, C>{}, a...);
}

// ---- value types of expression nodes ------------------------------------------
template <class Fn, class... Kids>
struct value_of<node<op::math<Fn>, Kids...>> {
  // A double in a statement's place: lowering replaces the node and the
  // launch reports it (CTG-EXPR-020, ir/misuse.hpp); no error before that.
  using type = fn::result_t<Fn, std::conditional_t<is_statement_v<Kids>, double, value_t<Kids>>...>;
};
// Whether a component index that is a compile-time constant (N_c, a
// static_range index) lies in [0, extent): the types see it, and Eigen's
// coeff() would read past the element. Other indices are not constants.
template <class I>
constexpr bool constant_index_within(long long, I const*) {
  return true;
}
template <long long N>
constexpr bool constant_index_within(long long extent, node<op::constant<N>> const*) {
  return N >= 0 && N < extent;
}
template <class M, class... I>
constexpr bool component_indices_within() {
  if constexpr (!is_eigen_fixed_v<M>) {
    return true;  // not a matrix: CTG-EXPR-009 from lowering
  } else if constexpr (sizeof...(I) == 1) {
    return (constant_index_within(M::SizeAtCompileTime, static_cast<I const*>(nullptr)) && ...);
  } else {
    long long const extents[] = {M::RowsAtCompileTime, M::ColsAtCompileTime};
    int k = 0;
    return (constant_index_within(extents[k++], static_cast<I const*>(nullptr)) && ...);
  }
}
#define CTG_IMPL_MSG_COMPONENT_RANGE                                                                    \
  "CTG-EXPR-009 component index out of range: v[k] takes 0 <= k < the vector's size, m(r, c) 0 <= r < " \
  "rows and 0 <= c < cols"
template <class V, class... Idx>
struct value_of<node<op::component, V, Idx...>> {
  using type = scalar_of_t<value_t<V>>;
};
template <int R, int C, class... Kids>
struct value_of<node<op::make_matrix<R, C>, Kids...>> {
  using type = Eigen::Matrix<std::common_type_t<scalar_of_t<value_t<Kids>>...>, R, C>;
};

}  // namespace ctg::ir
