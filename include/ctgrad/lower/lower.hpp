// Lowering: from what kernel code returns (nodes with pending loops, lets and
// func calls inside) to the closure-free IR. The context carries the loop level
// (how many loops enclose this point, counted through func calls), the next
// free local slot, the chain of funcs being inlined and whether a func's
// arguments may be bound to locals here (not in a while_ condition, which is
// evaluated anew before every iteration and cannot hold statements).
#pragma once
#include <array>
#include <type_traits>
#include <utility>

#include "../ir/custom.hpp"
#include "builders.hpp"

namespace ctg::ir {

template <int Level, int NextSlot, class Funcs = detail::type_list<>, bool BindsArguments = true>
struct lower_ctx {
  static constexpr int level = Level;
  static constexpr int next_slot = NextSlot;
  static constexpr bool binds_arguments = BindsArguments;
  using funcs = Funcs;
};

template <class IR, int Next>
struct lowered {
  IR ir;
  static constexpr int next_slot = Next;
};

template <class Ctx, int Next>
using with_next_slot = lower_ctx<Ctx::level, Next, typename Ctx::funcs, Ctx::binds_arguments>;

// ---- settling plain numbers ------------------------------------------------------
// (settled_scalar, settle_against and anchor_value: ir/expr.hpp, where
// operators settle them already when they can.)
template <class N>
constexpr auto settle_self(N const& n) {
  return settle_against<void>(n);
}
// Whether E is a statement with nothing left to settle (a subtree that
// still holds a pending construct has no value type yet, and is lowered).
template <class E>
constexpr bool settled_statement_v() {
  if constexpr (holds_unsettled<E>::value)
    return false;
  else
    return is_statement_v<E>;
}
// A lowered node where a value belongs (a store's right-hand side, a let's
// initial value, the condition of an if_ or a while_): a statement there is
// CTG-EXPR-020, and a zero of type T marked as the mistake takes its place,
// so that the launch reports it once (ir/misuse.hpp).
template <class T = double, class N>
constexpr auto value_operand(N const& n) {
  if constexpr (is_statement_v<N>) {
    return statement_value_stand_in<T>{};
  } else {
    return n;
  }
}
// A value operand settled on its own (a condition, a let's initial value).
template <class N>
constexpr auto settle_value(N const& n) {
  return settle_self(value_operand(n));
}
// Whether an operation that computes a value from its operands (a math
// function, a cast, a select) was given a statement as one:
// CTG-EXPR-020, the whole node then replaced like a value operand above.
template <class Op, class Kids>
struct node_of;
template <class Op, class... K>
struct node_of<Op, detail::tuple<K...>> {
  using type = node<Op, K...>;
};
template <class Op, class Kids>
inline constexpr bool statement_operand_v = false;
template <class Fn, class... K>
inline constexpr bool statement_operand_v<op::math<Fn>, detail::tuple<K...>> = (is_statement_v<K> || ...);
template <class T, class K>
inline constexpr bool statement_operand_v<op::cast<T>, detail::tuple<K>> = is_statement_v<K>;
template <class C, class A, class B>
inline constexpr bool statement_operand_v<op::select, detail::tuple<C, A, B>> =
    is_statement_v<C> || is_statement_v<A> || is_statement_v<B>;
// Whether a select chooses between values of two shapes (CTG-EXPR-002),
// replaced the same way.
template <class Op, class Kids>
inline constexpr bool unselectable_v = false;
template <class C, class A, class B>
inline constexpr bool unselectable_v<op::select, detail::tuple<C, A, B>> = !selectable_values<value_t<A>, value_t<B>>;
// Either mistake, and which one the stand-in reports.
template <class Op, class Kids>
inline constexpr bool misused_operands_v = statement_operand_v<Op, Kids> || unselectable_v<Op, Kids>;
template <class Op, class Kids>
inline constexpr misuse_kind operand_misuse_v =
    statement_operand_v<Op, Kids> ? misuse_kind::statement_value : misuse_kind::select_shapes;
// What settle() checks of indices and components (also read by
// lowers_as_is, below): an index is an integer expression, a component
// access has one or two indices into a fixed-size matrix.
template <class N>
inline constexpr bool integer_node_v = std::is_integral_v<value_t<N>>;
template <class N>
inline constexpr bool matrix_node_v = is_eigen_fixed_v<value_t<N>>;
// The same, asked before lowering of a subtree that may still hold a pending
// construct (a func call, a let-block), whose value type is not known yet:
// no value type is computed there (ctg::vec(f(x[i]), y) has none before the
// call is lowered), and the answer is no, so that lowering settles it first.
template <class N>
struct integer_node : std::bool_constant<integer_node_v<N>> {};
template <class N>
struct matrix_node : std::bool_constant<matrix_node_v<N>> {};
template <template <class> class Trait, class N>
inline constexpr bool settled_and_v = std::conditional_t<holds_unsettled<N>::value, std::false_type, Trait<N>>::value;
template <class... I>
inline constexpr bool component_arity_v = sizeof...(I) == 1 || sizeof...(I) == 2;

// Index operands are int.
template <class N>
constexpr auto settle_index(N const& n) {
  if constexpr (is_weak_v<N>) {
    static_assert(std::is_integral_v<decltype(n.op.value)>,
                  "CTG-EXPR-008 an index or loop bound must be an integer");
    return node<op::literal<int>>{{int(n.op.value)}, {}};
  } else {
    static_assert(integer_node_v<N>,
                  "CTG-EXPR-008 an index or loop bound must be an integer expression");
    return n;
  }
}

// A node's operation goes by reference through lowering (here, settle and
// finish_lowering): some hold the kernel's numbers (a literal, a loop bound
// written as a number, a custom functor's members), and g++ 12 at -O2
// dropped them when an operation read from a node taken by reference was
// passed by value. Its interprocedural mod/ref analysis counted such an
// argument as no read of the node, so the caller's stores of the numbers
// into the statement it was about to lower looked dead and were removed:
// a 4 x 4 loop read its bounds from uninitialised stack (`-fno-ipa-modref`
// or `-fno-tree-dse` gave the right loop).
template <class Op, class... K>
constexpr auto rebuild(Op const& op, K const&... k) {
  return node<Op, K...>{op, detail::make_tuple(k...)};
}
// The same with the kids in a tuple. Not detail::apply of a lambda calling
// rebuild: the lambda's name spells the function it sits in, and apply's
// and its helper's names spell the lambda's.
template <class Op, class... K>
constexpr auto rebuild_from(Op const& op, detail::tuple<K...> const& kids) {
  return node<Op, K...>{op, kids};
}

template <class Op, class Tuple, std::size_t... Is>
constexpr auto settle_default(Op const& op, Tuple const& t, std::index_sequence<Is...>) {
  return rebuild(op, settle_self(detail::get<Is>(t))...);
}

// Settles the operands of a freshly lowered node. Default: each weak literal
// keeps its own type; operators settle their numbers against their operands.
template <class Op, class... K>
constexpr auto settle(Op const& op, detail::tuple<K...> const& t) {
  return settle_default(op, t, std::index_sequence_for<K...>{});
}

template <class Fn, class... K>
constexpr auto settle(op::math<Fn> const& op, detail::tuple<K...> const& t) {
  using A = typename anchor_value<K...>::type;
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_against<A>(detail::get<Is>(t))...);
  }(std::index_sequence_for<K...>{});
}

template <class N, class F, class... K>
constexpr auto settle(op::custom<N, F> const& op, detail::tuple<K...> const& t) {
  using A = typename anchor_value<K...>::type;
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_against<A>(detail::get<Is>(t))...);
  }(std::index_sequence_for<K...>{});
}

template <class C, class A, class B>
constexpr auto settle(op::select const& op, detail::tuple<C, A, B> const& t) {
  using V = typename anchor_value<A, B>::type;
  return rebuild(op, settle_self(detail::get<0>(t)), settle_against<V>(detail::get<1>(t)),
                 settle_against<V>(detail::get<2>(t)));
}

template <int R, int C, class... K>
constexpr auto settle(op::make_matrix<R, C> const& op, detail::tuple<K...> const& t) {
  using A = typename anchor_value<K...>::type;
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_against<A>(detail::get<Is>(t))...);
  }(std::index_sequence_for<K...>{});
}

template <class T, class K>
constexpr auto settle(op::cast<T> const& op, detail::tuple<K> const& t) {
  return rebuild(op, settle_against<T>(detail::get<0>(t)));
}

template <class L, class E>
constexpr auto settle_write(L const&, E const& rhs) {
  return settle_against<value_t<L>>(value_operand<value_t<L>>(rhs));
}
template <class L, class E>
constexpr auto settle(op::store const& op, detail::tuple<L, E> const& t) {
  return rebuild(op, detail::get<0>(t), settle_write(detail::get<0>(t), detail::get<1>(t)));
}
template <atomic_kind A, class L, class E>
constexpr auto settle(op::atomic<A> const& op, detail::tuple<L, E> const& t) {
  return rebuild(op, detail::get<0>(t), settle_write(detail::get<0>(t), detail::get<1>(t)));
}
template <int Site, class L, class E>
constexpr auto settle(op::assign<Site> const& op, detail::tuple<L, E> const& t) {
  return rebuild(op, detail::get<0>(t), settle_write(detail::get<0>(t), detail::get<1>(t)));
}

template <class V, class... I>
constexpr auto settle(op::component const& op, detail::tuple<V, I...> const& t) {
  static_assert(component_arity_v<I...>, "CTG-EXPR-009 component access takes one index (v[k]) or two (m(r, c))");
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    auto const& v = detail::get<0>(t);
    static_assert(matrix_node_v<V>,
                  "CTG-EXPR-009 component access on a value that is not a vector or matrix");
    return rebuild(op, v, settle_index(detail::get<Is + 1>(t))...);
  }(std::index_sequence_for<I...>{});
}

template <int I, class T, int R, bool G, bool D, buffer B, class... Idx>
constexpr auto settle(op::access<I, T, R, G, D, B> const& op, detail::tuple<Idx...> const& t) {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_index(detail::get<Is>(t))...);
  }(std::index_sequence_for<Idx...>{});
}

template <loop_kind K, int L, int A, int Site, class... Kids>
constexpr auto settle(op::loop<K, L, A, Site> const& op, detail::tuple<Kids...> const& t) {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_index(detail::get<Is>(t))..., detail::get<2 * A>(t));
  }(std::make_index_sequence<2 * A>{});
}

template <int Site, class C, class... S>
constexpr auto settle(op::if_<Site> const& op, detail::tuple<C, S...> const& t) {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return rebuild(op, settle_value(detail::get<0>(t)), detail::get<Is + 1>(t)...);
  }(std::index_sequence_for<S...>{});
}

// ---- lowering -----------------------------------------------------------------------
// The first free slot before element I of a sequence (I = its length: after
// the last), as std::integral_constant: each element's lowering starts where
// the one before it left the counter. Neither a function nor a static data
// member of a class spelling the sequence: g++ gives every function and
// variable it instantiates an assembler name, emitted or not, in time
// quadratic in the name's length, and a per-element step spelling the whole
// sequence makes that cubic in a block's length (docs/05, *Names
// nobody emits*).
template <class Ctx, class Tuple, std::size_t I>
struct sequence_slot;
template <class Ctx, class... Ts>
struct sequence_slot<Ctx, detail::tuple<Ts...>, 0> {
  using type = std::integral_constant<int, Ctx::next_slot>;
};
template <class Ctx, class... Ts, std::size_t I>
  requires(I > 0)
struct sequence_slot<Ctx, detail::tuple<Ts...>, I> {
  using type = std::integral_constant<
      int, decltype(lower(with_next_slot<Ctx, sequence_slot<Ctx, detail::tuple<Ts...>, I - 1>::type::value>{},
                          std::declval<detail::tuple_element_t<I - 1, detail::tuple<Ts...>> const&>()))::next_slot>;
};
template <class Ctx, class... Ts, std::size_t... Is>
constexpr auto lower_elements(detail::tuple<Ts...> const& t, std::index_sequence<Is...>) {
  using seq = detail::tuple<Ts...>;
  return lowered<detail::tuple<decltype(lower(with_next_slot<Ctx, sequence_slot<Ctx, seq, Is>::type::value>{},
                                              detail::get<Is>(t))
                                            .ir)...>,
                 sequence_slot<Ctx, seq, sizeof...(Ts)>::type::value>{
      {{{lower(with_next_slot<Ctx, sequence_slot<Ctx, seq, Is>::type::value>{}, detail::get<Is>(t)).ir}...}}};
}

// Lowers the elements of a tuple left to right, threading the slot counter.
template <class Ctx, class... Ts>
constexpr auto lower_seq(detail::tuple<Ts...> const& t) {
  return lower_elements<Ctx>(t, std::index_sequence_for<Ts...>{});
}

// Plain values passed through func calls (field parameters, numbers).
template <class Ctx, class X>
  requires(!is_node_v<X> && !is_pending_v<X>)
constexpr auto lower(Ctx, X const& x) {
  return lowered<X, Ctx::next_slot>{x};
}

// Gives a statement that the reverse pass replays its own frame slot.
template <class Op, int Slot>
struct with_site {
  using type = Op;
  static constexpr int used = 0;
};
template <int Slot>
struct with_site<op::assign<-1>, Slot> {
  using type = op::assign<Slot>;
  static constexpr int used = 1;
};
template <int Slot>
struct with_site<op::if_<-1>, Slot> {
  using type = op::if_<Slot>;
  static constexpr int used = 1;
};
template <int Slot>
struct with_site<op::while_<-1>, Slot> {
  using type = op::while_<Slot>;
  static constexpr int used = 1;
};
template <loop_kind K, int L, int A, int Slot>
struct with_site<op::loop<K, L, A, -1>, Slot> {
  using type = op::loop<K, L, A, Slot>;
  static constexpr int used = 1;
};

template <int Slot, class Op, class... K>
constexpr auto attach_site(node<Op, K...> const& n) {
  using S = with_site<Op, Slot>;
  if constexpr (S::used)
    return node<typename S::type, K...>{typename S::type{}, n.kids};
  else
    return n;
}

// ---- statements inside expressions -------------------------------------------------
// Whether an expression holds a let-block that yields a value (a func
// computing its result in statements). Hoisting (normalize.hpp) moves such
// blocks in front of the statement that holds them.
template <class N>
struct has_let_value : std::false_type {};
template <class Op, class... K>
struct has_let_value<node<Op, K...>> : std::bool_constant<(has_let_value<K>::value || ...)> {};
template <int... S, class... K>
struct has_let_value<node<op::let_value<S...>, K...>> : std::true_type {};
template <class N>
inline constexpr bool has_let_value_v = has_let_value<N>::value;

// A select whose sides hold statements: hoisting them in front of the
// statement would run both sides whatever the condition (a NaN gradient from
// the side not taken, a read out of range), so it becomes control flow here,
// where slots are numbered:
//   select(c, a, b)  ->  let_value r = 0 { if_(c, r = a, r = b) } yields r
// Hoisting then moves only this block out of the expression; each side's own
// let-blocks are hoisted inside its arm of the if_, and the forward pass, the
// adjoint (an if_ replays the branch it took, lets included) and the tangent
// run the chosen side alone. Slots: First the value, then the sites of the
// if_ and of the two assignments.
template <class S>
inline constexpr bool is_branching_select_v = false;
template <class C, class A, class B>
inline constexpr bool is_branching_select_v<node<op::select, C, A, B>> = has_let_value_v<A> || has_let_value_v<B>;

template <int First, class C, class A, class B>
constexpr auto select_as_branches(node<op::select, C, A, B> const& s) {
  using V = value_t<node<op::select, C, A, B>>;
  using value_local = node<op::local<First, V>>;
  auto then_arm = rebuild(op::assign<First + 2>{}, value_local{}, kid<1>(s));
  auto else_arm = rebuild(op::assign<First + 3>{}, value_local{}, kid<2>(s));
  auto branches = rebuild(op::if_<First + 1>{}, kid<0>(s), then_arm, else_arm);
  auto const zero = node<op::literal<V>>{op::literal<V>::of(zero_of<V>()), {}};
  auto out = rebuild(op::let_value<First>{}, zero, branches, value_local{});
  return lowered<decltype(out), First + 4>{out};
}

// The end of lowering a node, once its kids are lowered: settle the
// operands' numbers, then turn a select of statements into branches or give
// a statement its frame slot.
template <class Ctx, class Op, class Kids>
constexpr auto finish_lowering(Op const& op, Kids const& kids) {
  constexpr int next = Ctx::next_slot;
  if constexpr (misused_operands_v<Op, Kids>) {
    using stand_in = value_stand_in<operand_misuse_v<Op, Kids>, value_t<typename node_of<Op, Kids>::type>>;
    return lowered<stand_in, next>{stand_in{}};
  } else if constexpr (is_branching_select_v<decltype(settle(op, kids))>) {
    return select_as_branches<next>(settle(op, kids));
  } else {
    auto out = attach_site<next>(settle(op, kids));
    return lowered<decltype(out), next + with_site<Op, next>::used>{out};
  }
}

// Whether lowering gives a subtree back as it is: no number left to settle
// (a weak literal), no statement to give a frame slot, nothing pending (a
// loop, a let, a func call), and the checks of settle() hold. Such a subtree
// is returned whole instead of rebuilt node by node, which instantiated
// some ten functions per node (lower, settle, rebuild, attach_site, the
// tuples'), each named after the node's subtree. Only the operations below
// qualify (math, casts and selects: value_op_lowers_as_is, after them); any
// other is lowered as usual.
template <class Op, class... K>
inline constexpr bool settles_as_is_v = false;
template <class T>
inline constexpr bool settles_as_is_v<op::literal<T>> = true;
template <long long N>
inline constexpr bool settles_as_is_v<op::constant<N>> = true;
template <int L, int A>
inline constexpr bool settles_as_is_v<op::loop_index<L, A>> = true;
template <int S, class T>
inline constexpr bool settles_as_is_v<op::local<S, T>> = true;
template <int I, int A>
inline constexpr bool settles_as_is_v<op::extent<I, A>> = true;
template <class N, class F, class... K>
inline constexpr bool settles_as_is_v<op::custom<N, F>, K...> = true;
template <class K>
inline constexpr bool settles_as_is_v<op::stop_grad, K> = true;
template <int R, int C, class... K>
inline constexpr bool settles_as_is_v<op::make_matrix<R, C>, K...> = true;
// A store whose right-hand side is a statement (a chained assignment) is
// settled, where settle_write reports it (CTG-EXPR-020).
template <class L, class E>
inline constexpr bool settles_as_is_v<op::store, L, E> = !settled_statement_v<E>();
template <atomic_kind A, class L, class E>
inline constexpr bool settles_as_is_v<op::atomic<A>, L, E> = !settled_statement_v<E>();
// Only where settle()'s checks hold (CTG-EXPR-008, CTG-EXPR-009 above).
template <int I, class T, int R, bool G, bool D, buffer B, class... Idx>
inline constexpr bool settles_as_is_v<op::access<I, T, R, G, D, B>, Idx...> =
    (settled_and_v<integer_node, Idx> && ...);
template <class V, class... I>
inline constexpr bool settles_as_is_v<op::component, V, I...> =
    component_arity_v<I...> && (settled_and_v<integer_node, I> && ...) && settled_and_v<matrix_node, V>;

template <class N>
struct lowers_as_is : std::bool_constant<!holds_unsettled<N>::value> {};  // plain values pass through; pending ones lower
template <class Op, class... K>
struct lowers_as_is<node<Op, K...>> : std::bool_constant<(lowers_as_is<K>::value && ...) && settles_as_is_v<Op, K...>> {};
// An operation computing a value from its operands lowers as it is unless
// its operands are a mistake (misused_operands_v: CTG-EXPR-020, -002); asked
// only once the operands lower as they are, so that no value type is taken
// of a subtree that still holds a pending construct.
template <bool OperandsAsIs, class Op, class... K>
struct value_op_lowers_as_is : std::false_type {};
template <class Op, class... K>
struct value_op_lowers_as_is<true, Op, K...> : std::bool_constant<!misused_operands_v<Op, detail::tuple<K...>>> {};
template <class Fn, class... K>
struct lowers_as_is<node<op::math<Fn>, K...>> : value_op_lowers_as_is<(lowers_as_is<K>::value && ...), op::math<Fn>, K...> {};
template <class T, class K>
struct lowers_as_is<node<op::cast<T>, K>> : value_op_lowers_as_is<lowers_as_is<K>::value, op::cast<T>, K> {};
template <class C, class A, class B>
struct lowers_as_is<node<op::select, C, A, B>>
    : value_op_lowers_as_is<lowers_as_is<C>::value && lowers_as_is<A>::value && lowers_as_is<B>::value, op::select, C, A, B> {};
template <class N>
inline constexpr bool lowers_as_is_v = lowers_as_is<N>::value;

// Operands are lowered here, not through lower_seq, for nodes of up to
// three kids: one level of template instantiation per level of the tree, so
// that deep expressions stay within the compilers' default depth.
template <class Ctx, class Op, class... Kids>
constexpr auto lower(Ctx, node<Op, Kids...> const& n) {
  constexpr std::size_t arity = sizeof...(Kids);
  if constexpr (lowers_as_is_v<node<Op, Kids...>>) {
    return lowered<node<Op, Kids...>, Ctx::next_slot>{n};
  } else if constexpr (arity == 0) {
    return finish_lowering<Ctx>(n.op, n.kids);
  } else if constexpr (arity <= 3) {
    auto r0 = lower(Ctx{}, detail::get<0>(n.kids));
    using C1 = with_next_slot<Ctx, decltype(r0)::next_slot>;
    if constexpr (arity == 1) {
      return finish_lowering<C1>(n.op, detail::make_tuple(r0.ir));
    } else {
      auto r1 = lower(C1{}, detail::get<1>(n.kids));
      using C2 = with_next_slot<Ctx, decltype(r1)::next_slot>;
      if constexpr (arity == 2) {
        return finish_lowering<C2>(n.op, detail::make_tuple(r0.ir, r1.ir));
      } else {
        auto r2 = lower(C2{}, detail::get<2>(n.kids));
        using C3 = with_next_slot<Ctx, decltype(r2)::next_slot>;
        return finish_lowering<C3>(n.op, detail::make_tuple(r0.ir, r1.ir, r2.ir));
      }
    }
  } else {
    auto r = lower_seq<Ctx>(n.kids);
    return finish_lowering<with_next_slot<Ctx, decltype(r)::next_slot>>(n.op, r.ir);
  }
}

// Whether a loop body returned a value where its statement belongs (x[i],
// x[i] * 2): a read or a settled expression whose value type is not void.
// A body still holding a pending construct is lowered, and judged there.
template <class B>
constexpr bool returns_value() {
  if constexpr (!dsl_statement<B>)
    return true;
  else if constexpr (!is_node_v<B> || holds_unsettled<B>::value)
    return false;
  else
    return !is_statement_v<B>;
}
template <class B>
inline constexpr bool returns_value_v = returns_value<B>();

template <class Ctx, loop_kind K, int Axes, class F, class... Bounds>
constexpr auto lower(Ctx, pending_loop<K, Axes, F, Bounds...> const& p) {
  constexpr int level = Ctx::level;
  auto b = lower_seq<Ctx>(p.bounds);
  constexpr int after_bounds = decltype(b)::next_slot;
  auto body = [&]<std::size_t... As>(std::index_sequence<As...>) {
    if constexpr (std::is_void_v<decltype(p.body(node<op::loop_index<Ctx::level, int(As)>>{}...))>) {
      // An empty statement marked as the mistake, reported at the launch
      // (ir/misuse.hpp): no second error follows.
      return node<op::func_scope<misuse<misuse_kind::missing_return, -1, 0, 0>>, node<op::block>>{};
    } else if constexpr (returns_value_v<decltype(p.body(node<op::loop_index<Ctx::level, int(As)>>{}...))>) {
      // A value (return x[i] * 2): marked, like a body that returns nothing.
      return node<op::func_scope<misuse<misuse_kind::value_body, -1, 0, 0>>, node<op::block>>{};
    } else {
      note_taken_type<decltype(p.body(node<op::loop_index<Ctx::level, int(As)>>{}...))>();
      return p.body(node<op::loop_index<Ctx::level, int(As)>>{}...);
    }
  }(std::make_index_sequence<Axes>{});
  using inner = lower_ctx<level + 1, after_bounds, typename Ctx::funcs, Ctx::binds_arguments>;
  auto lb = lower(inner{}, body);
  auto all = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return detail::make_tuple(detail::get<Is>(b.ir)..., lb.ir);
  }(std::make_index_sequence<2 * Axes>{});
  constexpr int site = decltype(lb)::next_slot;
  auto out = settle(op::loop<K, level, Axes, site>{}, all);
  return lowered<decltype(out), site + 1>{out};
}

template <class Ctx, long long B, long long E, class F>
constexpr auto lower(Ctx, pending_static_loop<B, E, F> const& p) {
  static_assert(B <= E, "static_range<B, E>: B must not exceed E");
  auto bodies = [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
    return detail::make_tuple(p.body(c<B + (long long)(Ks)>)...);
  }(std::make_index_sequence<std::size_t(E - B)>{});
  detail::apply([](auto const&... b) { (note_taken(b), ...); }, bodies);
  auto r = lower_seq<Ctx>(bodies);
  auto out = rebuild_from(op::block{}, r.ir);
  return lowered<decltype(out), decltype(r)::next_slot>{out};
}

template <class N>
struct ends_in_result : std::false_type {};
template <class E>
struct ends_in_result<node<op::result, E>> : std::true_type {};
template <class... S>
  requires(sizeof...(S) > 0)
struct ends_in_result<node<op::block, S...>>
    : ends_in_result<detail::tuple_element_t<sizeof...(S) - 1, detail::tuple<S...>>> {};

// Splits a let body ending in result(e) into (statements, e).
template <class E>
constexpr auto split_result(node<op::result, E> const& r) {
  return detail::make_tuple(rebuild(op::block{}), kid<0>(r));
}
template <class... S>
constexpr auto split_result(node<op::block, S...> const& b) {
  constexpr std::size_t n = sizeof...(S);
  auto tail = split_result(detail::get<n - 1>(b.kids));
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return detail::make_tuple(rebuild(op::block{}, detail::get<Is>(b.kids)..., detail::get<0>(tail)),
                              detail::get<1>(tail));
  }(std::make_index_sequence<n - 1>{});
}

// What a let body returned: a local, a field element or a component comes
// as the handle that assignments take (return v, return a[j], return
// v[1_c]); the let yields its value.
template <class B>
constexpr auto let_body_node(B const& b) {
  if constexpr (is_lvalue_v<B>)
    return b.expr;
  else
    return b;
}

template <class Ctx, class F, class... Inits>
constexpr auto lower(Ctx, pending_let<F, Inits...> const& p) {
  auto r = lower_seq<Ctx>(p.inits);
  constexpr int first = decltype(r)::next_slot;
  auto inits = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return detail::make_tuple(settle_value(detail::get<Is>(r.ir))...);
  }(std::index_sequence_for<Inits...>{});
  using init_tuple = decltype(inits);
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    auto body =
        let_body_node(p.body(lvalue<node<op::local<first + int(Is), value_t<detail::tuple_element_t<Is, init_tuple>>>>>{}...));
    static_assert(dsl_statement<decltype(body)>,
                  "CTG-EXPR-010 a let body must return a statement, a value, or a block ending in ctg::result(e)");
    note_taken(body);
    using inner = with_next_slot<Ctx, first + int(sizeof...(Inits))>;
    auto lb = lower(inner{}, body);
    using LB = decltype(lb.ir);
    if constexpr (ends_in_result<LB>::value) {
      auto parts = split_result(lb.ir);
      auto out = rebuild(op::let_value<first + int(Is)...>{}, detail::get<Is>(inits)...,
                         detail::get<0>(parts), detail::get<1>(parts));
      return lowered<decltype(out), decltype(lb)::next_slot>{out};
    } else if constexpr (!is_statement_v<LB>) {
      // The lambda returns a value (an expression, or a let that is one):
      // the let yields it, as if written ctg::block(ctg::result(e)). Its
      // block holds one `nothing`, which marks it for the statement
      // position, where a bare value is a mistake (normalize.hpp).
      auto out = rebuild(op::let_value<first + int(Is)...>{}, detail::get<Is>(inits)...,
                         rebuild(op::block{}, node<op::nothing>{}), lb.ir);
      return lowered<decltype(out), decltype(lb)::next_slot>{out};
    } else {
      auto out = rebuild(op::let<first + int(Is)...>{}, detail::get<Is>(inits)..., lb.ir);
      return lowered<decltype(out), decltype(lb)::next_slot>{out};
    }
  }(std::index_sequence_for<Inits...>{});
}

// ---- func calls ---------------------------------------------------------------------
// A func is inlined, but its arguments are evaluated once, the way a C++ call
// evaluates them: an argument that computes something is bound to a local of
// the call (a let around the func's body), and the body reads the local. Left
// to substitution, a func that uses its argument k times would copy the
// argument's tree, loops and let-blocks included, k times into the kernel, and
// nested calls would multiply the copies, in compile time and in run time.
// Passed as they are: field parameters, leaves (numbers, locals, loop
// indices, extents), plain field loads, statements, and integer expressions
// without statements, which stay visible to the index analyses of the checks
// (a func's u[i + 1] must still be seen as the element next to u[i]). A plain
// load is bound after all when the func writes its field: read again after
// the write, it would not be the value the call passed.
template <class N>
struct binds_as_argument : std::false_type {};
template <class Op, class... K>
struct binds_as_argument<node<Op, K...>> {
  using N = node<Op, K...>;
  static constexpr bool computes = sizeof...(K) > 0 && !is_access_op<Op>;
  static constexpr bool value =
      !is_statement_v<N> && (has_let_value_v<N> || (computes && !std::is_integral_v<value_t<N>>));
};

// Slot of each argument bound to a local (First, First + 1, ... in argument
// order), or -1 for one passed as it is; then the first slot after them.
// Binding pays where a call runs per iteration (Binds); a call at the top
// level of a kernel runs once, and a statement func there may hold the
// kernel's parallel loop, which must stay at the top to be offloaded.
// Rebind: a mask of the arguments bound as well (plain loads the func's body
// writes over, loads_written_over below).
template <bool Binds, int First, unsigned long long Rebind = 0, class... A>
constexpr auto argument_slots(detail::tuple<A...> const*) {
  std::array<int, sizeof...(A) + 1> slots{};
  int next = First;
  [[maybe_unused]] std::size_t i = 0;
  ((slots[i] = Binds && (binds_as_argument<A>::value || (Rebind >> i & 1)) ? next++ : -1, ++i), ...);
  slots[sizeof...(A)] = next;
  return slots;
}

// The arguments passed as they are that are plain loads of a field the
// lowered call Out writes (bit k: argument k).
template <class Out, std::size_t N>
struct loads_written_over {
  template <class A>
  static constexpr bool one() {
    if constexpr (requires { typename A::op_type; }) {
      if constexpr (is_access_op<typename A::op_type>)
        return (written_params_v<Out> & param_bit(A::op_type::param)) != 0;
      else
        return false;
    } else {
      return false;
    }
  }
  template <class... A>
  static constexpr unsigned long long mask(std::array<int, N> const& slots, detail::tuple<A...> const*) {
    unsigned long long m = 0;
    std::size_t i = 0;
    ((m |= (slots[i] < 0 && one<A>() ? 1ull << i : 0ull), ++i), ...);
    return m;
  }
};

// Positions of the bound arguments, in slot order.
template <std::size_t Count, std::size_t N>
constexpr auto bound_arguments(std::array<int, N> const& slots) {
  std::array<std::size_t, Count> positions{};
  for (std::size_t i = 0, j = 0; i + 1 < N; ++i)
    if (slots[i] >= 0) positions[j++] = i;
  return positions;
}

template <int Slot, class A>
constexpr auto argument_as_passed(A const& a) {
  if constexpr (Slot < 0)
    return a;
  else
    return node<op::local<Slot, value_t<A>>>{};
}

// The call with its arguments in the slots Slots describes.
template <class Ctx, auto Slots, int First, class Name, class F, class... Args, class LoweredArgs>
constexpr auto lower_call(pending_call<Name, F, Args...> const& p, LoweredArgs const& args) {
  func_trace_scope<Name> const traced_in_func;  // what its body builds is the func's
  constexpr int first = First;
  constexpr auto slots = Slots;
  constexpr std::size_t n_args = sizeof...(Args);
  constexpr int after_bound = slots[slots.size() - 1];
  constexpr bool returns_nothing = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return std::is_void_v<decltype(p.fn(argument_as_passed<slots[Is]>(detail::get<Is>(args))...))>;
  }(std::make_index_sequence<n_args>{});
  static_assert(!returns_nothing,
                "CTG-EXPR-010 a func's lambda returns nothing (a missing return?): it must return a statement "
                "or a value expression");
  auto body = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    if constexpr (returns_nothing && sizeof...(Is) == n_args)  // (a condition on Is: discarded per call)
      return node<op::block>{};  // in its place, so that no second error follows where it is a statement
    else
      return p.fn(argument_as_passed<slots[Is]>(detail::get<Is>(args))...);
  }(std::make_index_sequence<n_args>{});
  static_assert(dsl_operand<decltype(body)> || dsl_statement<decltype(body)>,
                "CTG-EXPR-010 a func must return a statement or a value expression");
  note_taken(body);
  using funcs = typename detail::push_back<typename Ctx::funcs, op::func_scope<Name>>::type;
  using inner = lower_ctx<Ctx::level, after_bound, funcs, Ctx::binds_arguments>;
  auto lb = lower(inner{}, as_expr(body));
  auto scoped = rebuild(op::func_scope<Name>{}, settle_self(lb.ir));
  if constexpr (after_bound == first) {
    return lowered<decltype(scoped), decltype(lb)::next_slot>{scoped};
  } else {
    // let(bound arguments..., body) or, for a value, let_value(bound
    // arguments..., {}, body): hoisting (normalize.hpp) moves it in front of
    // the statement that holds the call, like any value-yielding let-block.
    constexpr auto bound = bound_arguments<std::size_t(after_bound - first)>(slots);
    auto out = [&]<std::size_t... Js>(std::index_sequence<Js...>) {
      if constexpr (is_statement_v<decltype(scoped)>)
        return rebuild(op::let<(first + int(Js))...>{}, detail::get<bound[Js]>(args)..., scoped);
      else
        return rebuild(op::let_value<(first + int(Js))...>{}, detail::get<bound[Js]>(args)..., rebuild(op::block{}),
                       scoped);
    }(std::make_index_sequence<bound.size()>{});
    return lowered<decltype(out), decltype(lb)::next_slot>{out};
  }
}

template <class Ctx, class Name, class F, class... Args>
constexpr auto lower(Ctx, pending_call<Name, F, Args...> const& p) {
  auto r = lower_seq<Ctx>(p.args);
  using lowered_args = decltype(r.ir);
  constexpr int first = decltype(r)::next_slot;
  constexpr bool binds = Ctx::binds_arguments && (Ctx::level > 0);
  constexpr auto slots = argument_slots<binds, first>(static_cast<lowered_args const*>(nullptr));
  auto call = lower_call<Ctx, slots, first>(p, r.ir);
  using written_over = loads_written_over<decltype(call.ir), slots.size()>;
  constexpr unsigned long long rebind =
      binds ? written_over::mask(slots, static_cast<lowered_args const*>(nullptr)) : 0ull;
  if constexpr (rebind == 0) {
    return call;
  } else {
    // Lowered again with those loads bound (the first lowering is discarded;
    // the statements the func built were all taken, so the trace balances).
    constexpr auto rebound = argument_slots<binds, first, rebind>(static_cast<lowered_args const*>(nullptr));
    return lower_call<Ctx, rebound, first>(p, r.ir);
  }
}

// A while_ condition is evaluated before every iteration: a func called in it
// keeps its arguments substituted (a let-block there would be hoisted out of
// the loop and run once).
template <class Ctx, int Site, class C, class B>
constexpr auto lower(Ctx, node<op::while_<Site>, C, B> const& n) {
  using condition_ctx = lower_ctx<Ctx::level, Ctx::next_slot, typename Ctx::funcs, false>;
  auto c = lower(condition_ctx{}, kid<0>(n));
  using body_ctx = with_next_slot<Ctx, decltype(c)::next_slot>;
  auto b = lower(body_ctx{}, kid<1>(n));
  constexpr int next = decltype(b)::next_slot;
  auto out = attach_site<next>(rebuild(n.op, settle_value(c.ir), b.ir));
  return lowered<decltype(out), next + with_site<op::while_<Site>, next>::used>{out};
}

}  // namespace ctg::ir
