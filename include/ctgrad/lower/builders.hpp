// The constructs that take a lambda (loops, let, func) and the statement
// containers. Loops, let-blocks and func calls do not call their lambda here:
// they stay pending until lowering, which calls each lambda once with
// placeholders for the loop indices or locals, under the caller's context
// (loop level, slots in use, func chain). That is why a func can never reset
// the loop level: it is lowered where it is called.
#pragma once
#include <array>
#include <bit>
#include <type_traits>
#include <utility>

#include "../field.hpp"
#include "../ir/expr.hpp"
#include "../ir/misuse.hpp"

namespace ctg {

namespace ir {

// node<op::constant<0>> for each axis (a struct, not an alias, so that nvcc
// accepts its expansion over an index pack).
template <std::size_t>
struct zero_index {
  using type = node<op::constant<0>>;
};

// ---- kernel parameters -----------------------------------------------------
// A field argument as kernel code sees it: indexing gives element handles.
template <int I, class T, int Rank, bool HasGrad, bool HasDual, buffer Buf = buffer::primal>
struct field_handle {
  using value_type = T;
  static constexpr int param = I;
  static constexpr int rank = Rank;
  static constexpr bool has_grad = HasGrad;
  static constexpr bool has_dual = HasDual;
  using access_op = op::access<I, T, Rank, HasGrad, HasDual, Buf>;

  // f() for rank 0, f(i, j, ...) for any rank.
  template <dsl_operand... Idx>
  constexpr auto operator()(Idx const&... idx) const {
    if constexpr (sizeof...(Idx) == Rank) {
      return lvalue<node<access_op, as_expr_t<Idx>...>>{make_expr(access_op{}, idx...)};
    } else if constexpr (Rank > 0) {
      // Reported at the launch (ir/misuse.hpp); the rest of the kernel still
      // builds around the stand-in: one error, not fifty.
      return misused<misuse_kind::index_count, int(sizeof...(Idx))>();
    } else {
      static_assert(sizeof...(Idx) == Rank,
                    "CTG-EXPR-007 wrong number of indices: a field of rank 0 takes none, f()");
      return element_at_origin();
    }
  }
  template <dsl_operand Idx>
  constexpr auto operator[](Idx const& i) const {
    if constexpr (Rank == 1) {
      return (*this)(i);
    } else if constexpr (Rank > 1) {
      return misused<misuse_kind::subscript_rank, 1>();
    } else {
      static_assert(Rank == 1, "CTG-EXPR-007 f[i] indexes rank-1 fields; a field of rank 0 is f()");
      return element_at_origin();
    }
  }
  // shape(1) with a plain number: the axis must be a compile-time constant.
  template <class A>
    requires std::is_integral_v<A>
  constexpr auto shape(A) const {
    static_assert(!std::is_integral_v<A>,
                  "CTG-EXPR-015 shape(axis) takes a compile-time axis: write f.shape(1_c) (with `using "
                  "namespace ctg::literals;`) or f.shape(ctg::c<1>); a rank-1 field has f.size()");
    return node<op::extent<I, 0>>{};
  }
  // The extent of an axis, read at run time: ctg::range(f.shape(0_c), ...).
  // The axis is a compile-time constant (ctg::c<A> or A_c).
  template <long long A>
  constexpr auto shape(node<op::constant<A>>) const {
    static_assert(A >= 0 && A < Rank, "CTG-EXPR-007 shape(axis): axis out of range");
    return node<op::extent<I, int(A)>>{};
  }
  // The extent of a rank-1 field.
  constexpr auto size() const {
    static_assert(Rank == 1, "CTG-EXPR-007 size() is the extent of a rank-1 field; use shape(axis_c)");
    return node<op::extent<I, 0>>{};
  }

  // An element with every index 0 (what a wrong access turns into after its
  // error, so that only that error prints).
  constexpr auto element_at_origin() const {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return lvalue<node<access_op, typename zero_index<Is>::type...>>{
          make_expr(access_op{}, typename zero_index<Is>::type{}...)};
    }(std::make_index_sequence<std::size_t(Rank)>{});
  }

  // The element at the origin whose first index carries the misuse, so that
  // the launch finds it in the IR's type (ir/misuse.hpp).
  template <misuse_kind Kind, int Given>
  constexpr auto misused() const {
    using marked = node<op::func_scope<misuse<Kind, I, Rank, Given>>, node<op::constant<0>>>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return lvalue<node<access_op, marked, typename zero_index<Is + 1>::type...>>{
          make_expr(access_op{}, marked{}, typename zero_index<Is + 1>::type{}...)};
    }(std::make_index_sequence<std::size_t(Rank - 1)>{});
  }

  // The gradient or tangent buffer of this field, readable and writable like a
  // field of its own. Reading it inside a kernel that is differentiated is an
  // error (CTG-AD-011).
  constexpr auto grad() const {
    static_assert(HasGrad, "CTG-FIELD-004 grad() on a field declared without ctg::grad");
    return field_handle<I, T, Rank, false, false, buffer::grad>{};
  }
  constexpr auto dual() const {
    static_assert(HasDual, "CTG-FIELD-004 dual() on a field declared without ctg::dual");
    return field_handle<I, T, Rank, false, false, buffer::dual>{};
  }
};

template <class T>
struct is_field_handle : std::false_type {};
template <int I, class T, int R, bool G, bool D, buffer B>
struct is_field_handle<field_handle<I, T, R, G, D, B>> : std::true_type {};
template <class T>
inline constexpr bool is_field_handle_v = is_field_handle<std::remove_cvref_t<T>>::value;

// ---- pending constructs ------------------------------------------------------
// A body lambda is called after the function that made it has returned (the
// kernel's lambda, or the body around it), so a reference it captured would
// read a local that no longer exists: a wrong value, not an error. A closure
// holds a reference (or a pointer: `this`) exactly when it cannot be made
// from bytes in a constant expression (std::bit_cast, [bit.cast]); that test
// needs a trivially copyable literal type, so a closure that copies a value
// of another type (an Eigen matrix) is not tested.
template <int>
struct constant_probe {};
template <class F>
inline constexpr bool captures_by_value_v =
    !std::is_trivially_copyable_v<F> || !__is_literal_type(F) ||
    requires { typename constant_probe<(std::bit_cast<F>(std::array<unsigned char, sizeof(F)>{}), 0)>; };

// Asserted by every builder that keeps a body (in the function, not in the
// pending type, so that the kernel still builds around it and one error
// prints).
template <class F>
constexpr void require_capture_by_value() {
  static_assert(captures_by_value_v<F>,
                "CTG-EXPR-018 a loop or let body captures by reference ([&], &x) or holds a pointer (this): ctgrad "
                "calls the body while it builds the kernel, after the function that made the lambda has returned, "
                "so the reference would read a local that no longer exists. Fix: capture by value, [=] (a member "
                "through a local copy, or [=, *this])");
}

// A loop whose body lambda has not been called yet. Bounds: begin_0.., end_0...
template <loop_kind K, int Axes, class F, class... Bounds>
struct pending_loop : pending_tag {
  static constexpr bool traced_as_loop = true;  // statement_trace.hpp
  detail::tuple<Bounds...> bounds;
  F body;
};

// static_range<B, E>: the body is lowered once per value, with ctg::c<k> as index.
template <long long B, long long E, class F>
struct pending_static_loop : pending_tag {
  static constexpr bool traced_as_loop = true;
  F body;
};

// let(init..., [=](auto v...) { ... }): locals in fresh slots.
template <class F, class... Inits>
struct pending_let : pending_tag {
  detail::tuple<Inits...> inits;
  F body;
};

// A call of a ctg::func: inlined at lowering with the caller's context. Name
// is a func_name<"...">.
template <class Name, class F, class... Args>
struct pending_call : pending_tag {
  F fn;
  detail::tuple<Args...> args;
};

// Statements are nodes or pending constructs; plain numbers are not statements.
template <class T>
concept dsl_statement = is_node_v<T> || is_pending_v<T>;


template <class B>
constexpr auto as_bound(B const& b) {
  return as_expr(b);
}

}  // namespace ir

// ---- loops -------------------------------------------------------------------
// range(n, body) / range(begin, end, body): a parallel offload at the top level
// of a kernel, a serial loop anywhere else. Bounds may be numbers, ctg::c<N>,
// scalar parameters, field loads or any integer expression.
template <ir::dsl_operand N, class F>
constexpr auto range(N const& n, F body) {
  ir::require_capture_by_value<F>();
  using ir::as_bound;
  auto lo = ir::c<0>;
  auto hi = as_bound(n);
  ir::note_built({ir::statement_kind::loop});
  return ir::pending_loop<ir::loop_kind::range, 1, F, decltype(lo), decltype(hi)>{
      {}, {{{lo}, {hi}}}, body};
}
template <ir::dsl_operand B, ir::dsl_operand E, class F>
constexpr auto range(B const& b, E const& e, F body) {
  ir::require_capture_by_value<F>();
  using ir::as_bound;
  auto lo = as_bound(b);
  auto hi = as_bound(e);
  ir::note_built({ir::statement_kind::loop});
  return ir::pending_loop<ir::loop_kind::range, 1, F, decltype(lo), decltype(hi)>{
      {}, {{{lo}, {hi}}}, body};
}

// serial_range: iterations run in order on one thread (and in reverse order in
// the adjoint), so iterations may read what earlier ones wrote.
template <ir::dsl_operand N, class F>
constexpr auto serial_range(N const& n, F body) {
  ir::require_capture_by_value<F>();
  using ir::as_bound;
  auto lo = ir::c<0>;
  auto hi = as_bound(n);
  ir::note_built({ir::statement_kind::loop});
  return ir::pending_loop<ir::loop_kind::serial, 1, F, decltype(lo), decltype(hi)>{
      {}, {{{lo}, {hi}}}, body};
}
template <ir::dsl_operand B, ir::dsl_operand E, class F>
constexpr auto serial_range(B const& b, E const& e, F body) {
  ir::require_capture_by_value<F>();
  using ir::as_bound;
  auto lo = as_bound(b);
  auto hi = as_bound(e);
  ir::note_built({ir::statement_kind::loop});
  return ir::pending_loop<ir::loop_kind::serial, 1, F, decltype(lo), decltype(hi)>{
      {}, {{{lo}, {hi}}}, body};
}

// ndrange(n0, n1, ..., body): all index tuples of a box, body(i, j, ...).
template <class... A>
constexpr auto ndrange(A const&... a) {
  static_assert(sizeof...(A) >= 2, "ndrange(n0, ..., body) takes at least one extent and a body");
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    auto all = detail::tuple<A const&...>{{{a}...}};
    auto body = detail::get<sizeof...(A) - 1>(all);
    ir::require_capture_by_value<decltype(body)>();
    constexpr int axes = int(sizeof...(A)) - 1;
    auto his = detail::make_tuple(ir::as_bound(detail::get<Is>(all))...);
    ir::note_built({ir::statement_kind::loop});
    return ir::pending_loop<ir::loop_kind::range, axes, decltype(body),
                            typename ir::zero_index<Is>::type...,
                            decltype(ir::as_bound(detail::get<Is>(all)))...>{
        {}, {{{typename ir::zero_index<Is>::type{}}..., {detail::get<Is>(his)}...}}, body};
  }(std::make_index_sequence<sizeof...(A) - 1>{});
}

// each(f, body): every index of field parameter f, body(i, j, ...).
template <int I, class T, int R, bool G, bool D, ir::buffer B, class F>
constexpr auto each(ir::field_handle<I, T, R, G, D, B> const&, F body) {
  static_assert(R >= 1, "each(f, body) iterates a field of rank >= 1");
  ir::require_capture_by_value<F>();
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    ir::note_built({ir::statement_kind::loop});
    return ir::pending_loop<ir::loop_kind::range, R, F,
                            typename ir::zero_index<Is>::type...,
                            ir::node<ir::op::extent<I, int(Is)>>...>{
        {}, {{{typename ir::zero_index<Is>::type{}}..., {ir::node<ir::op::extent<I, int(Is)>>{}}...}}, body};
  }(std::make_index_sequence<R>{});
}

// static_range<N>(body) / static_range<B, E>(body): unrolled at compile time;
// the body receives ctg::c<k>. Not a loop for the checks (no level).
template <long long B, long long E = -1, class F>
constexpr auto static_range(F body) {
  ir::require_capture_by_value<F>();
  ir::note_built({ir::statement_kind::loop});
  if constexpr (E == -1)
    return ir::pending_static_loop<0, B, F>{{}, body};
  else
    return ir::pending_static_loop<B, E, F>{{}, body};
}

// ---- locals and statements -------------------------------------------------------
// let(init..., [=](auto v...) { return ...; }): mutable locals scoped by the lambda.
// The lambda returns a statement, or a block ending in ctg::result(e) to yield e.
template <class... A>
[[nodiscard]] constexpr auto let(A const&... a) {
  static_assert(sizeof...(A) >= 2, "let(init..., body) takes at least one initial value and a body");
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    auto all = detail::tuple<A const&...>{{{a}...}};
    auto body = detail::get<sizeof...(A) - 1>(all);
    ir::require_capture_by_value<decltype(body)>();
    return ir::pending_let<decltype(body), decltype(ir::as_expr(detail::get<Is>(all)))...>{
        {}, {{{ir::as_expr(detail::get<Is>(all))}...}}, body};
  }(std::make_index_sequence<sizeof...(A) - 1>{});
}

// Statements in order.
//
// A block of more than detail::block_chunk statements is built as blocks of
// at most that many, in order, inside one: the same program. clang limits a
// fold expression to 256 operands (its -fbracket-depth), and the walks over
// a block's statements, here and in every pass, are folds. (Hence also the
// check of the statements: not a constrained pack, whose constraint is such
// a fold.)
namespace detail {
inline constexpr std::size_t block_chunk = 128;
template <class... S>
inline constexpr bool all_statements_v = all_of({ir::dsl_statement<S>...});
template <std::size_t Chunk, class... S>
constexpr auto block_chunk_of(tuple<S const&...> const& all);
}  // namespace detail

template <class... S>
  requires detail::all_statements_v<S...>
constexpr auto block(S const&... s) {
  if constexpr (sizeof...(S) <= detail::block_chunk) {
    (ir::note_taken(s), ...);
    ir::note_built({ir::statement_kind::block});
    return ir::node<ir::op::block, S...>{{}, {{{s}...}}};
  } else {
    detail::tuple<S const&...> const all{{{s}...}};
    return [&]<std::size_t... Chunks>(std::index_sequence<Chunks...>) {
      return block(detail::block_chunk_of<Chunks>(all)...);
    }(std::make_index_sequence<(sizeof...(S) + detail::block_chunk - 1) / detail::block_chunk>{});
  }
}

namespace detail {
template <std::size_t Chunk, class... S>
constexpr auto block_chunk_of(tuple<S const&...> const& all) {
  constexpr std::size_t first = Chunk * block_chunk;
  constexpr std::size_t count = sizeof...(S) - first < block_chunk ? sizeof...(S) - first : block_chunk;
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return ctg::block(get<first + Is>(all)...);
  }(std::make_index_sequence<count>{});
}
}  // namespace detail

// The value a let-block yields (its last statement).
template <ir::dsl_operand E>
[[nodiscard]] constexpr auto result(E const& e) {
  return ir::make_expr(ir::op::result{}, e);
}

template <ir::dsl_operand C, ir::dsl_statement T>
constexpr auto if_(C const& c, T const& then) {
  auto cond = ir::as_expr(c);
  ir::note_taken(then);
  ir::note_built({ir::statement_kind::condition});
  return ir::node<ir::op::if_<>, decltype(cond), T, ir::node<ir::op::nothing>>{
      {}, {{{cond}, {then}, {ir::node<ir::op::nothing>{}}}}};
}
template <ir::dsl_operand C, ir::dsl_statement T, ir::dsl_statement E>
constexpr auto if_(C const& c, T const& then, E const& otherwise) {
  auto cond = ir::as_expr(c);
  ir::note_taken(then);
  ir::note_taken(otherwise);
  ir::note_built({ir::statement_kind::condition});
  return ir::node<ir::op::if_<>, decltype(cond), T, E>{{}, {{{cond}, {then}, {otherwise}}}};
}

template <ir::dsl_operand C, ir::dsl_statement B>
constexpr auto while_(C const& c, B const& body) {
  auto cond = ir::as_expr(c);
  ir::note_taken(body);
  ir::note_built({ir::statement_kind::while_loop});
  return ir::node<ir::op::while_<>, decltype(cond), B>{{}, {{{cond}, {body}}}};
}

// atomic_min(f[i], e) / atomic_max(f[i], e): f[i] = min(f[i], e), atomically.
// Not differentiable: on a field with a gradient they fail to build (CTG-AD-008).
template <class N, ir::dsl_operand E>
constexpr auto atomic_min(ir::lvalue<N> const& dst, E const& e) {
  static_assert(ir::lvalue<N>::targets_field, "CTG-EXPR-012 atomic_min takes a field element");
  return dst.template accumulate<ir::atomic_kind::min>(e);
}
template <class N, ir::dsl_operand E>
constexpr auto atomic_max(ir::lvalue<N> const& dst, E const& e) {
  static_assert(ir::lvalue<N>::targets_field, "CTG-EXPR-012 atomic_max takes a field element");
  return dst.template accumulate<ir::atomic_kind::max>(e);
}

// A statement that does nothing.
inline constexpr ir::node<ir::op::nothing> nothing{};

// ---- funcs ---------------------------------------------------------------------
template <detail::fixed_string Name, class F>
struct func_t {
  F fn;
  static constexpr auto name = Name;

  // Arguments: field parameters, expressions and plain numbers, as values: a
  // func cannot assign to its caller's locals through them. Lowering binds an
  // argument that computes something to a local of the call (lower.hpp).
  template <class... A>
  [[nodiscard]] constexpr auto operator()(A const&... a) const {
    (ir::note_taken(a), ...);  // a statement passed as an argument is the func's to keep
    return ir::pending_call<ir::func_name<Name>, F, std::remove_cvref_t<decltype(pass(a))>...>{{}, fn, {{{pass(a)}...}}};
  }

 private:
  template <class A>
  static constexpr auto pass(A const& a) {
    if constexpr (ir::is_lvalue_v<A>)
      return a.expr;
    else
      return a;
  }
};

// ctg::func<"name">(lambda): a named, reusable piece of a kernel.
template <detail::fixed_string Name, class F>
[[nodiscard]] constexpr auto func(F f) {
  return func_t<Name, F>{f};
}

// The coefficient-wise unary functions, one per row of the op table.
#define CTG_IMPL_USING_UNARY_ROW(NAME, KIND, VALUE, DERIVATIVE) using ir::NAME;
CTG_IMPL_UNARY_OP_TABLE(CTG_IMPL_USING_UNARY_ROW)
#undef CTG_IMPL_USING_UNARY_ROW
using ir::atan2;
using ir::c;
using ir::cast;
using ir::clamp;
using ir::cmul;
using ir::cross;
using ir::det;
using ir::dot;
using ir::inverse;
using ir::mat;
using ir::max;
using ir::min;
using ir::norm;
using ir::norm_sqr;
using ir::normalized;
using ir::outer;
using ir::pow;
using ir::fmod;
using ir::select;
using ir::stop_grad;
using ir::trace;
using ir::transpose;
using ir::vec;
namespace literals {
using ir::literals::operator""_c;
}

}  // namespace ctg
