// After lowering: (1) hoist let-blocks that yield values (value-returning
// funcs with statements inside) out of expressions, so that expressions are
// pure trees and statements hold all the control flow; (2) split the kernel's
// top level into offloads: each top-level loop is a parallel offload, each run
// of other statements one serial offload.
#pragma once
#include <type_traits>
#include <utility>

#include "lower.hpp"

namespace ctg::ir {

// ---- let-blocks inside expressions ------------------------------------------------
template <class N>
struct has_let_value : std::false_type {};
template <class Op, class... K>
struct has_let_value<node<Op, K...>> : std::disjunction<has_let_value<K>...> {};
template <int... S, class... K>
struct has_let_value<node<op::let_value<S...>, K...>> : std::true_type {};
template <class N>
inline constexpr bool has_let_value_v = has_let_value<N>::value;

template <class Funcs, class LV, class R>
struct extraction {
  using funcs = Funcs;
  LV let_node;
  R replaced;
};

template <class Tuple, std::size_t I, class R, std::size_t... Is>
constexpr auto replace_at(Tuple const& t, R const& r, std::index_sequence<Is...>) {
  return detail::make_tuple([&]() -> decltype(auto) {
    if constexpr (Is == I)
      return r;
    else
      return detail::get<Is>(t);
  }()...);
}

template <class... K>
constexpr std::size_t first_with_let_value() {
  constexpr bool flags[] = {has_let_value_v<K>..., false};
  for (std::size_t i = 0; i < sizeof...(K); ++i)
    if (flags[i]) return i;
  return sizeof...(K);
}

// Takes the leftmost let-block out of an expression, leaving its value behind.
template <class Funcs, class E>
constexpr auto extract(E const& e) {
  if constexpr (is_let_value_op<typename E::op_type>) {
    constexpr std::size_t n = E::arity;
    return extraction<Funcs, E, std::remove_cvref_t<decltype(kid<n - 1>(e))>>{e, kid<n - 1>(e)};
  } else {
    return [&]<class Op, class... K>(node<Op, K...> const& nd) {
      constexpr std::size_t i = first_with_let_value<K...>();
      using inner_funcs = std::conditional_t<
          is_func_scope_op<Op>, typename detail::push_back<Funcs, Op>::type, Funcs>;
      auto x = extract<inner_funcs>(detail::get<i>(nd.kids));
      auto kids = replace_at<detail::tuple<K...>, i>(nd.kids, x.replaced, std::index_sequence_for<K...>{});
      auto rebuilt = detail::apply([&](auto const&... k) { return rebuild(nd.op, k...); }, kids);
      return extraction<typename decltype(x)::funcs, decltype(x.let_node), decltype(rebuilt)>{x.let_node,
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

template <class Op, class... K>
constexpr auto hoist_node(node<Op, K...> const& s) {
  constexpr std::size_t n_expr = expression_kids<Op, sizeof...(K)>::count;
  constexpr std::size_t i = [] {
    constexpr bool flags[] = {has_let_value_v<K>..., false};
    std::size_t j = 0;
    while (j != n_expr && !flags[j]) ++j;
    return j;
  }();
  if constexpr (i < n_expr) {
    // s[...let_value(inits, body, v)...]  ->  let(inits, block(body, s[...v...]))
    auto x = extract<detail::type_list<>>(detail::get<i>(s.kids));
    auto kids = replace_at<detail::tuple<K...>, i>(s.kids, x.replaced, std::index_sequence_for<K...>{});
    auto rest = detail::apply([&](auto const&... k) { return rebuild(s.op, k...); }, kids);
    auto const& lv = x.let_node;
    return [&]<int... Slots, class... LK>(node<op::let_value<Slots...>, LK...> const& l) {
      constexpr std::size_t n_init = sizeof...(Slots);
      auto body = rebuild(op::block{},
                          wrap_in<typename decltype(x)::funcs>::apply(detail::get<n_init>(l.kids)), rest);
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        return hoist(rebuild(op::let<Slots...>{}, detail::get<Is>(l.kids)..., body));
      }(std::make_index_sequence<n_init>{});
    }(lv);
  } else {
    // No let-block in expression position: recurse into the statement kids.
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return rebuild(s.op, [&]() {
        if constexpr (Is < n_expr)
          return detail::get<Is>(s.kids);
        else
          return hoist(detail::get<Is>(s.kids));
      }()...);
    }(std::index_sequence_for<K...>{});
  }
}

template <class S>
constexpr auto hoist(S const& s) {
  using Op = typename S::op_type;
  if constexpr (is_let_value_op<Op>) {
    // A value-yielding let used as a statement: keep its statements, drop the value.
    return [&]<int... Slots, class... LK>(node<op::let_value<Slots...>, LK...> const& l) {
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        return hoist(rebuild(op::let<Slots...>{}, detail::get<Is>(l.kids)..., detail::get<sizeof...(Slots)>(l.kids)));
      }(std::make_index_sequence<sizeof...(Slots)>{});
    }(s);
  } else if constexpr (is_while_op<Op>) {
    static_assert(!has_let_value_v<std::remove_cvref_t<decltype(kid<0>(s))>>,
                  "CTG-EXPR-011 a while_ condition cannot contain statements (a func with loops "
                  "or a let-block): compute the condition into a local inside the loop");
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
      return detail::apply(
          [&](auto const&... p) {
            return detail::make_tuple(done..., serial_offload<node<op::block, Pending...>>{rebuild(op::block{}, p...)},
                                      more...);
          },
          pending);
  };
  if constexpr (I == Pieces::size) {
    return flush();
  } else {
    auto const& piece = detail::get<I>(pieces);
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
