// After lowering: (1) hoist let-blocks that yield values (value-returning
// funcs with statements inside) out of expressions, so that expressions are
// pure trees and statements hold all the control flow; (2) split the kernel's
// top level into offloads: each top-level loop is a parallel offload, each run
// of other statements one serial offload.
//
// Hoisting runs a let-block's statements before the statement that holds it,
// always. That is only what the program asks for where the expression always
// evaluates the block: a select of blocks became an if_ during lowering
// (lower.hpp) for that reason, && and || evaluate both operands anyway, and a
// while_ condition may hold none (CTG-EXPR-011).
#pragma once
#include <type_traits>
#include <utility>

#include "lower.hpp"

namespace ctg::ir {

// ---- let-blocks inside expressions ------------------------------------------------
// Every function here takes nodes by const reference and returns new nodes by
// value: a rebuilt tree owns copies of its kids (literal values, custom
// functors), never a reference into the tree it came from, so no result can
// outlive what it was made of.

// Kid I of the tuple, or the replacement r where I is the kid being replaced.
template <bool Replace, class Kid, class R>
constexpr auto kid_or(Kid const& kid, R const& r) {
  if constexpr (Replace)
    return r;
  else
    return kid;
}
template <std::size_t I, class R, class... K>
constexpr auto replace_at(detail::tuple<K...> const& t, R const& r) {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return detail::make_tuple(kid_or<Is == I>(detail::get<Is>(t), r)...);
  }(std::index_sequence_for<K...>{});
}

template <class... K>
constexpr std::size_t first_with_let_value() {
  constexpr bool flags[] = {has_let_value_v<K>..., false};
  for (std::size_t i = 0; i < sizeof...(K); ++i)
    if (flags[i]) return i;
  return sizeof...(K);
}

// Whether kid I of an expression node receives no adjoint from the node: the
// node or the kid has no differentiable value (comparisons, indices, integer
// casts), or the node stops the gradient (stop_grad, floor and the other
// piecewise-constant operations).
template <class Op>
struct stops_gradient : std::is_same<Op, op::stop_grad> {};
template <class Fn>
struct stops_gradient<op::math<Fn>> : std::bool_constant<Fn::kind == fn::grad_kind::none> {};

template <class N, class Kid>
inline constexpr bool gradient_free_kid_v = !is_differentiable_v<value_t<N>> || !is_differentiable_v<value_t<Kid>> ||
                                            stops_gradient<typename N::op_type>::value;

// The same for the expression kids of a statement: conditions and bounds carry
// no gradient, nor does the value stored into a field without one.
template <class S, std::size_t I>
constexpr bool gradient_free_statement_kid() {
  using Op = typename S::op_type;
  using Kid = std::remove_cvref_t<decltype(kid<I>(std::declval<S const&>()))>;
  if constexpr (!is_differentiable_v<value_t<Kid>>) {
    return true;
  } else if constexpr ((is_store_op<Op> || is_atomic_op<Op>) && I == 1) {
    using A = typename written_access<std::remove_cvref_t<decltype(kid<0>(std::declval<S const&>()))>>::type::op_type;
    return !(A::has_grad && A::which == buffer::primal);
  } else {
    return false;
  }
}

// The leftmost let-block of an expression taken out of it, and the expression
// with the block's value in its place. Funcs: the func scopes it sat in, to
// wrap its statements in. NoGradient: whether its value reaches a place that
// takes no gradient (then its statements need none either; see detached).
template <class Funcs, bool NoGradient, class LV, class R>
struct extraction {
  using funcs = Funcs;
  static constexpr bool no_gradient = NoGradient;
  LV let_node;
  R replaced;
};

template <class Funcs, bool NoGradient, class E>
constexpr auto extract(E const& e) {
  if constexpr (is_let_value_op<typename E::op_type>) {
    constexpr std::size_t n = E::arity;
    using value_type = std::remove_cvref_t<decltype(kid<n - 1>(e))>;
    return extraction<Funcs, NoGradient, E, value_type>{e, kid<n - 1>(e)};
  } else {
    return [&]<class Op, class... K>(node<Op, K...> const& nd) {
      constexpr std::size_t i = first_with_let_value<K...>();
      using inner_funcs = std::conditional_t<
          is_func_scope_op<Op>, typename detail::push_back<Funcs, Op>::type, Funcs>;
      using Kid = detail::tuple_element_t<i, detail::tuple<K...>>;
      auto x = extract<inner_funcs, NoGradient || gradient_free_kid_v<E, Kid>>(detail::get<i>(nd.kids));
      auto kids = replace_at<i>(nd.kids, x.replaced);
      auto rebuilt = rebuild_from(nd.op, kids);
      using X = decltype(x);
      return extraction<typename X::funcs, X::no_gradient, decltype(x.let_node), decltype(rebuilt)>{x.let_node,
                                                                                                  rebuilt};
    }(e);
  }
}

template <class Funcs>
struct wrap_in;
template <>
struct wrap_in<detail::type_list<>> {
  template <class S>
  static constexpr auto apply(S const& s) {
    return s;
  }
};
template <class F, class... Fs>
struct wrap_in<detail::type_list<F, Fs...>> {
  template <class S>
  static constexpr auto apply(S const& s) {
    return rebuild(F{}, wrap_in<detail::type_list<Fs...>>::apply(s));
  }
};

// ---- let-blocks whose value takes no gradient ------------------------------------------
// Hoisted in front of its statement, a let-block's statements are swept by
// the adjoint like any other, with a zero adjoint when the value goes where no
// gradient flows (stop_grad(f(x)), if_(dist(p, q) < r, ...)): and zero times
// an infinite partial (sqrt at 0) is NaN, where the same expression written
// inline takes no gradient at all. Such a block gets its initial values and
// assignments wrapped in stop_grad, which leaves every value as it was — when
// it writes nothing but its own locals: a store, or an assignment to a local
// of the enclosing code, must keep its gradient.
template <class L>
struct assigned_slot;
template <int S, class T>
struct assigned_slot<node<op::local<S, T>>> : std::integral_constant<int, S> {};
template <class V, class... I>
struct assigned_slot<node<op::component, V, I...>> : assigned_slot<V> {};

template <class N, int... Declared>
struct writes_outside : std::false_type {};
template <class Op, class... K, int... D>
struct writes_outside<node<Op, K...>, D...> : std::bool_constant<(writes_outside<K, D...>::value || ...)> {};
template <class L, class E, int... D>
struct writes_outside<node<op::store, L, E>, D...> : std::true_type {};
template <atomic_kind A, class L, class E, int... D>
struct writes_outside<node<op::atomic<A>, L, E>, D...> : std::true_type {};
template <int Site, class L, class E, int... D>
struct writes_outside<node<op::assign<Site>, L, E>, D...>
    : std::bool_constant<((assigned_slot<L>::value != D) && ...) || writes_outside<E, D...>::value> {};
template <int... S, class... K, int... D>
struct writes_outside<node<op::let<S...>, K...>, D...> : std::bool_constant<(writes_outside<K, D..., S...>::value || ...)> {};
template <int... S, class... K, int... D>
struct writes_outside<node<op::let_value<S...>, K...>, D...>
    : std::bool_constant<(writes_outside<K, D..., S...>::value || ...)> {};

template <class Op>
inline constexpr std::size_t init_count = 0;
template <int... S>
inline constexpr std::size_t init_count<op::let<S...>> = sizeof...(S);
template <int... S>
inline constexpr std::size_t init_count<op::let_value<S...>> = sizeof...(S);

template <class N>
constexpr auto detached(N const& n) {
  using Op = typename N::op_type;
  if constexpr (N::arity == 0) {
    return n;
  } else if constexpr (is_assign_op<Op>) {
    return rebuild(n.op, kid<0>(n), rebuild(op::stop_grad{}, detached(kid<1>(n))));
  } else {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return rebuild(n.op, [&]() {
        if constexpr (Is < init_count<Op>)
          return rebuild(op::stop_grad{}, detached(detail::get<Is>(n.kids)));
        else
          return detached(detail::get<Is>(n.kids));
      }()...);
    }(std::make_index_sequence<N::arity>{});
  }
}

// Which kids of a statement are expressions (their let-blocks are hoisted).
template <class Op, std::size_t Arity>
struct expression_kids {
  static constexpr std::size_t count = 0;
};
template <std::size_t A>
struct expression_kids<op::store, A> {
  static constexpr std::size_t count = 2;
};
template <atomic_kind K, std::size_t A>
struct expression_kids<op::atomic<K>, A> {
  static constexpr std::size_t count = 2;
};
template <int Site, std::size_t A>
struct expression_kids<op::assign<Site>, A> {
  static constexpr std::size_t count = 2;
};
template <int Site, std::size_t A>
struct expression_kids<op::if_<Site>, A> {
  static constexpr std::size_t count = 1;
};
template <loop_kind K, int L, int Ax, int Site, std::size_t A>
struct expression_kids<op::loop<K, L, Ax, Site>, A> {
  static constexpr std::size_t count = 2 * Ax;
};
template <int Site, std::size_t A>
struct expression_kids<op::while_<Site>, A> {
  static constexpr std::size_t count = 1;
};
template <int... S, std::size_t A>
struct expression_kids<op::let<S...>, A> {
  static constexpr std::size_t count = sizeof...(S);
};

template <class S>
constexpr auto hoist(S const& s);

// let_value(inits, body, v) taken out of statement s, which now reads v:
//   let(inits, block(body, s))
template <class Funcs, int... Slots, class... LK, class Rest>
constexpr auto let_around(node<op::let_value<Slots...>, LK...> const& l, Rest const& rest) {
  constexpr std::size_t n_init = sizeof...(Slots);
  auto body = rebuild(op::block{}, wrap_in<Funcs>::apply(detail::get<n_init>(l.kids)), rest);
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return hoist(rebuild(op::let<Slots...>{}, detail::get<Is>(l.kids)..., body));
  }(std::make_index_sequence<n_init>{});
}

// A kid of a statement, hoisted where it is a statement itself. A function of
// the kid alone rather than a lambda in hoist_node: a lambda's name spells the
// function it sits in, here the whole statement, once per kid.
template <bool IsStatement, class Kid>
constexpr auto hoisted_kid(Kid const& kid) {
  if constexpr (IsStatement)
    return hoist(kid);
  else
    return kid;
}
template <std::size_t NExpr, class Op, class... K, std::size_t... Is>
constexpr auto hoist_statement_kids(node<Op, K...> const& s, std::index_sequence<Is...>) {
  return rebuild(s.op, hoisted_kid<(Is >= NExpr)>(detail::get<Is>(s.kids))...);
}

template <class Op, class... K>
constexpr auto hoist_node(node<Op, K...> const& s) {
  using S = node<Op, K...>;
  constexpr std::size_t n_expr = expression_kids<Op, sizeof...(K)>::count;
  constexpr std::size_t i = [] {
    constexpr bool flags[] = {has_let_value_v<K>..., false};
    std::size_t j = 0;
    while (j != n_expr && !flags[j]) ++j;
    return j;
  }();
  if constexpr (i < n_expr) {
    // s[...let_value(inits, body, v)...]  ->  let(inits, block(body, s[...v...]))
    auto x = extract<detail::type_list<>, gradient_free_statement_kid<S, i>()>(detail::get<i>(s.kids));
    auto kids = replace_at<i>(s.kids, x.replaced);
    auto rest = rebuild_from(s.op, kids);
    using X = decltype(x);
    if constexpr (X::no_gradient && !writes_outside<decltype(x.let_node)>::value)
      return let_around<typename X::funcs>(detached(x.let_node), rest);
    else
      return let_around<typename X::funcs>(x.let_node, rest);
  } else {
    // No let-block in expression position: recurse into the statement kids.
    return hoist_statement_kids<n_expr>(s, std::index_sequence_for<K...>{});
  }
}

template <class S>
constexpr auto hoist(S const& s) {
  using Op = typename S::op_type;
  if constexpr (is_let_value_op<Op>) {
    // A value-yielding let used as a statement: keep its statements, drop the
    // value. (A value func called as a statement with bound arguments,
    // lower.hpp, is one: like a func whose body is a let-block, its value is
    // dropped.)
    return [&]<int... Slots, class... LK>(node<op::let_value<Slots...>, LK...> const& l) {
      using block_t = detail::tuple_element_t<sizeof...(Slots), detail::tuple<LK...>>;
      static_assert(!std::is_same_v<block_t, node<op::block, node<op::nothing>>>,
                    "CTG-EXPR-010 a let whose lambda returns a value is used where a statement is expected: "
                    "the value would be dropped (did you mean to store it: f[i] = ctg::let(...)?)");
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        return hoist(rebuild(op::let<Slots...>{}, detail::get<Is>(l.kids)..., detail::get<sizeof...(Slots)>(l.kids)));
      }(std::make_index_sequence<sizeof...(Slots)>{});
    }(s);
  } else if constexpr (is_while_op<Op>) {
    // Hoisted in front of the loop, the statements would run once instead of
    // before every test of the condition.
    static_assert(!has_let_value_v<std::remove_cvref_t<decltype(kid<0>(s))>>,
                  "CTG-EXPR-011 a while_ condition cannot contain statements (a func with loops "
                  "or a let-block, or a select of one): compute the condition into a local inside the loop");
    return hoist_node(s);
  } else if constexpr (std::is_same_v<Op, op::result>) {
    static_assert(detail::dependent_false<S>,
                  "CTG-EXPR-005 ctg::result(e) must be the last statement of a let block");
    return s;
  } else if constexpr (is_func_scope_op<Op> && !is_statement_v<S>) {
    // A value-returning func called as a statement.
    return rebuild(Op{}, hoist(kid<0>(s)));
  } else {
    static_assert(is_statement_v<S> || is_let_op<Op>,
                  "CTG-EXPR-010 an expression is used where a statement is expected (did you mean "
                  "to store it: f[i] = e?)");
    return hoist_node(s);
  }
}

// ---- offloads --------------------------------------------------------------------------
// One top-level loop, run in parallel over its iteration space. Stmt is the
// loop, possibly inside func_scope nodes (a func holding the loop, called at
// the top of the kernel).
template <class Stmt>
struct parallel_offload {
  Stmt stmt;
};
// Statements run once, in order, on one thread.
template <class Body>
struct serial_offload {
  Body body;
};

template <class S>
struct unwrap_funcs {
  using type = S;
  static constexpr S const& get(S const& s) { return s; }
};
template <class N, class K>
struct unwrap_funcs<node<op::func_scope<N>, K>> {
  using type = typename unwrap_funcs<K>::type;
  static constexpr type const& get(node<op::func_scope<N>, K> const& s) {
    return unwrap_funcs<K>::get(kid<0>(s));
  }
};

// One description of an offload, read by the checks, the adjoint and every
// backend: its root statement, its parallel loop (funcs unwrapped) with the
// loop's axes and body, where the body sits (loop level 1, or 0 on one
// thread), and references to them.
template <class Offload>
struct offload_traits;
template <class S>
struct offload_traits<parallel_offload<S>> {
  using root = S;
  using loop = typename unwrap_funcs<S>::type;
  static constexpr int axes = loop::op_type::axes;
  using body = std::remove_cvref_t<decltype(::ctg::detail::get<2 * axes>(std::declval<loop const&>().kids))>;
  static constexpr bool parallel = true;
  static constexpr int body_level = 1;
  static constexpr loop const& loop_of(parallel_offload<S> const& o) { return unwrap_funcs<S>::get(o.stmt); }
  static constexpr body const& body_of(parallel_offload<S> const& o) {
    return ::ctg::detail::get<2 * axes>(loop_of(o).kids);
  }
};
template <class B>
struct offload_traits<serial_offload<B>> {
  using root = B;
  using loop = void;
  static constexpr int axes = 0;
  using body = B;
  static constexpr bool parallel = false;
  static constexpr int body_level = 0;
  static constexpr body const& body_of(serial_offload<B> const& o) { return o.body; }
};

// ---- offloads under short names ----------------------------------------------------------
// A class template whose arguments spell an offload's body spells it again in
// the mangled name of each of its member functions, and g++ mangles every
// function it instantiates, inlined or not, in time that grows with the
// square of the name's length (docs/05, *Offloads named by a key*). The
// per-node members of the adjoint, the frames and the row walk are
// instantiated once per node of the body, so a launch names its offloads by
// a short key instead:
// Key::offload is the offload's type, and Key itself is spelled by the
// kernel, its argument types and the offload's position (kernel.hpp).
// keyed_offload<Key> is never constructed: it stands for Key::offload where
// a plan is chosen (backend/plan.hpp), and named_body<Key> stands for its
// body in the analyses' arguments; named_t<T> is the type either stands for.
template <class Key>
struct keyed_offload {};
template <class Key>
struct named_body {};

template <class T>
struct named {
  using type = T;
};
template <class Key>
struct named<keyed_offload<Key>> {
  using type = typename Key::offload;
};
template <class Key>
struct named<named_body<Key>> {
  using type = typename offload_traits<typename Key::offload>::body;
};
template <class T>
using named_t = typename named<T>::type;

template <class Key>
struct offload_traits<keyed_offload<Key>> : offload_traits<typename Key::offload> {};

// The name a plan gives an offload's body in the arguments of the classes it
// instantiates per node: its key's where it has one.
template <class Offload>
struct body_name_of {
  using type = typename offload_traits<Offload>::body;
};
template <class Key>
struct body_name_of<keyed_offload<Key>> {
  using type = named_body<Key>;
};
template <class Offload>
using body_name_t = typename body_name_of<Offload>::type;

template <class S>
inline constexpr bool is_parallel_loop_v = false;
template <int A, int Site, class... K>
inline constexpr bool is_parallel_loop_v<node<op::loop<loop_kind::range, 0, A, Site>, K...>> = true;

template <class... Ts>
constexpr auto tuple_cat_all(Ts const&... ts);

template <class A, class B, std::size_t... Ia, std::size_t... Ib>
constexpr auto tuple_cat2(A const& a, B const& b, std::index_sequence<Ia...>, std::index_sequence<Ib...>) {
  return detail::make_tuple(detail::get<Ia>(a)..., detail::get<Ib>(b)...);
}
template <class... Ts>
constexpr auto tuple_cat_all(Ts const&... ts) {
  if constexpr (sizeof...(Ts) == 0) {
    return detail::tuple<>{};
  } else {
    return [](auto const& first, auto const&... rest) {
      if constexpr (sizeof...(rest) == 0) {
        return first;
      } else {
        auto tail = tuple_cat_all(rest...);
        return tuple_cat2(first, tail, std::make_index_sequence<std::remove_cvref_t<decltype(first)>::size>{},
                          std::make_index_sequence<decltype(tail)::size>{});
      }
    }(ts...);
  }
}

// The top-level statements, seen through blocks, static unrolling and funcs.
template <class S>
constexpr auto flatten(S const& s) {
  using Op = typename S::op_type;
  if constexpr (std::is_same_v<Op, op::block>) {
    return detail::apply([](auto const&... k) { return tuple_cat_all(flatten(k)...); }, s.kids);
  } else if constexpr (!std::is_void_v<first_misuse_t<Op>>) {
    // A statement marked as a mistake (ir/misuse.hpp) stays one piece, empty
    // as it is, so that the launch finds it in the offloads and reports it.
    return detail::make_tuple(s);
  } else if constexpr (is_func_scope_op<Op>) {
    return detail::apply([](auto const&... piece) { return detail::make_tuple(rebuild(Op{}, piece)...); },
                         flatten(kid<0>(s)));
  } else {
    return detail::make_tuple(s);
  }
}

// Groups flattened pieces: parallel loops alone, consecutive others together.
template <std::size_t I, class Pieces, class... Pending, class... Done>
constexpr auto group_offloads(Pieces const& pieces, detail::tuple<Pending...> const& pending,
                              Done const&... done) {
  auto flush = [&](auto const&... more) {
    if constexpr (sizeof...(Pending) == 0)
      return detail::make_tuple(done..., more...);
    else
      return detail::make_tuple(
          done..., serial_offload<node<op::block, Pending...>>{rebuild_from(op::block{}, pending)}, more...);
  };
  if constexpr (I == Pieces::size) {
    return flush();
  } else {
    auto piece = detail::get<I>(pieces);
    using P = std::remove_cvref_t<decltype(piece)>;
    if constexpr (is_parallel_loop_v<typename unwrap_funcs<P>::type>) {
      auto flushed = flush(parallel_offload<P>{piece});
      return detail::apply(
          [&](auto const&... d) { return group_offloads<I + 1>(pieces, detail::tuple<>{}, d...); }, flushed);
    } else {
      auto more = detail::apply([&](auto const&... p) { return detail::make_tuple(p..., piece); }, pending);
      return group_offloads<I + 1>(pieces, more, done...);
    }
  }
}

template <class S>
constexpr auto split_offloads(S const& top) {
  auto pieces = flatten(top);
  return group_offloads<0>(pieces, detail::tuple<>{});
}

}  // namespace ctg::ir
