// The field accesses of one offload in program order, as a type list of
// events: loads, stores and atomics, each with the path of kid indices that
// leads to its access node (so that launch-time checks can read the literal
// values inside it), the loop sites that enclose it within the offload body,
// and, for loads, whether the reverse pass needs the loaded value.
#pragma once
#include <array>
#include <type_traits>
#include <utility>

#include "../ad/activity.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::check {

CTG_IMPL_IR_VOCABULARY;


enum class access_kind { load, store, accumulate, extremum };

// A loop enclosing an event, packed in an int: its frame site, its index
// level (15 for while_, which has no index) and its number of axes.
constexpr int loop_entry(int site, int level, int axes) { return site * 256 + level * 16 + axes; }
constexpr int entry_level(int e) { return (e / 16) % 16; }
constexpr int entry_axes(int e) { return e % 16; }
inline constexpr int while_level = 15;

// Access is the access node itself and Around what surrounds it (funcs and
// loops): both are known where the walk meets the access, so the checks read
// them here instead of walking the path down from the root again for every
// event (which costs the depth of the tree per event, and per pair of events
// in the pairwise checks).
template <access_kind Kind, class Path, bool Needed, class Loops, class Access, class Around>
struct event {
  static constexpr access_kind kind = Kind;
  using path = Path;
  static constexpr bool needed = Needed;
  using loops = Loops;  // std::integer_sequence<int, loop_entry...>, outermost first
  using access = Access;
  using funcs = typename Around::funcs;            // detail::type_list<op::func_scope<...>...>
  using loop_paths = typename Around::loop_paths;  // paths of the loop nodes around it
};

template <std::size_t... P>
using path_t = std::index_sequence<P...>;

template <class Path, std::size_t K>
struct path_append;
template <std::size_t... P, std::size_t K>
struct path_append<std::index_sequence<P...>, K> {
  using type = std::index_sequence<P..., K>;
};

template <class Loops, int Site>
struct loops_append;
template <int... S, int Site>
struct loops_append<std::integer_sequence<int, S...>, Site> {
  using type = std::integer_sequence<int, S..., Site>;
};

// What surrounds a node: the funcs it sits in and the paths of the loop
// nodes above it, both outermost first.
template <class Funcs, class LoopPaths>
struct around {
  using funcs = Funcs;           // detail::type_list<op::func_scope<...>...>
  using loop_paths = LoopPaths;  // detail::type_list<std::index_sequence<...>...>
};
// What surrounds the kids of the node at Path: one func more below a func,
// one loop more below a loop (its bounds included, as they sit below it).
template <class Op, class Path, class Around>
struct around_kids {
  using type = Around;
};
template <class Name, class Path, class... F, class L>
struct around_kids<op::func_scope<Name>, Path, around<detail::type_list<F...>, L>> {
  using type = around<detail::type_list<F..., op::func_scope<Name>>, L>;
};
template <loop_kind K, int Level, int A, int Site, class Path, class F, class... L>
struct around_kids<op::loop<K, Level, A, Site>, Path, around<F, detail::type_list<L...>>> {
  using type = around<F, detail::type_list<L..., Path>>;
};

template <class Op>
struct math_fn;
template <class Fn>
struct math_fn<op::math<Fn>> {
  using type = Fn;
};
// Whether the reverse pass needs the value of kid I of a node of operation
// Op, given whether it needs the node's own value (Need) and which of the
// node and its kids are active. Keyed on the operation and the flags rather
// than the node, so that the nodes of one operation share it.
template <class Op, std::size_t I, bool Need, bool ActiveNode, bool... ActiveKids>
constexpr bool kid_value_needed() {
  if constexpr (is_access_op<Op> || is_custom_op<Op>)
    return Need || ActiveNode;  // an access needs its indices, a custom op its operands
  else if constexpr (requires { typename math_fn<Op>::type; })
    return Need || ad::operand_value_needed<typename math_fn<Op>::type, int(I), ActiveNode, ActiveKids...>();
  else if constexpr (std::is_same_v<Op, op::select>)
    return I == 0 ? (Need || ActiveNode) : Need;
  else if constexpr (std::is_same_v<Op, op::component>)
    return I == 0 ? Need : (Need || ActiveNode);
  else
    return Need;
}

// Walks statements and expressions. Analysis supplies is_active and needed.
template <class Analysis>
struct event_walk {
  template <class E>
  static constexpr bool active = Analysis::template is_active<E>;
  static constexpr bool needed_slot(int s) { return Analysis::needed[s]; }

  // ---- expressions: loads ------------------------------------------------------------------------
  // The kids' positions ride along (ir::kid_positions). Reached: whether the
  // adjoint propagates through the expression at all; the value stored into
  // a field without a gradient is not, so nothing in it is needed for its
  // active operands (the adjoint does not evaluate it: ad::reverse::rev of
  // a store or an accumulation).
  template <class E, class Path, bool Need, class Loops, class Around, class Positions, bool Reached>
  struct expr_walk {
    using type = detail::type_list<>;
  };
  template <class Op, class... K, class Path, bool Need, class Loops, class Around, std::size_t... Is, bool Reached>
  struct expr_walk<node<Op, K...>, Path, Need, Loops, Around, std::index_sequence<Is...>, Reached> {
    using N = node<Op, K...>;
    using inner_around = typename around_kids<Op, Path, Around>::type;
    using kids_type = typename detail::concat_all<
        typename expr_walk<K, typename path_append<Path, Is>::type,
                           kid_value_needed<Op, Is, Need, Reached && active<N>, (Reached && active<K>)...>(), Loops,
                           inner_around, kid_positions_t<K>, Reached>::type...>::type;
    // Loads of the indices come before the load itself.
    using own = std::conditional_t<is_access_op<Op>,
                                   detail::type_list<event<access_kind::load, Path, Need, Loops, N, Around>>,
                                   detail::type_list<>>;
    using type = detail::concat_t<kids_type, own>;
  };
  template <class E, class Path, bool Need, class Loops, class Around, bool Reached = true>
  using expr = expr_walk<E, Path, Need, Loops, Around, kid_positions_t<E>, Reached>;

  // ---- statements ------------------------------------------------------------------------------
  template <class S, class Path, class Loops, class Around>
  struct stmt {
    using type = detail::type_list<>;
  };

  template <class K, class Path, class Loops, class Around, std::size_t... Is>
  static auto seq(std::index_sequence<Is...>)
      -> detail::concat_all<
          typename stmt<detail::tuple_element_t<Is, K>, typename path_append<Path, Is>::type, Loops, Around>::type...>;

  template <class... S, class Path, class Loops, class Around>
  struct stmt<node<op::block, S...>, Path, Loops, Around> {
    using type = typename decltype(seq<detail::tuple<S...>, Path, Loops, Around>(std::index_sequence_for<S...>{}))::type;
  };
  template <class Name, class K, class Path, class Loops, class Around>
  struct stmt<node<op::func_scope<Name>, K>, Path, Loops, Around> {
    using type = typename stmt<K, typename path_append<Path, 0>::type, Loops,
                               typename around_kids<op::func_scope<Name>, Path, Around>::type>::type;
  };

  // The written element of a store or atomic, seen through a component.
  template <class L, class Path>
  struct written {
    using access = L;
    using path = Path;
    using indices = detail::type_list<>;
  };
  template <class V, class... I, class Path>
  struct written<node<op::component, V, I...>, Path> {
    using access = V;
    using path = typename path_append<Path, 0>::type;
  };

  template <class L, class E, class Path, class Loops, class Around, access_kind Kind>
  struct write_events {
    using lhs_path = typename path_append<Path, 0>::type;
    using W = written<L, lhs_path>;
    using A = typename W::access;
    // The written access's indices and the rhs are evaluated first.
    template <std::size_t... Is>
    static auto index_events(std::index_sequence<Is...>)
        -> detail::concat_all<typename expr<std::remove_cvref_t<decltype(kid<Is>(std::declval<A>()))>,
                                    typename path_append<typename W::path, Is>::type, true, Loops, Around>::type...>;
    template <class LL, class = void>
    struct component_index_events {
      using type = detail::type_list<>;
    };
    template <class V, class... I>
    struct component_index_events<node<op::component, V, I...>> {
      template <std::size_t... Is>
      static auto go(std::index_sequence<Is...>)
          -> detail::concat_all<typename expr<I, typename path_append<lhs_path, Is + 1>::type, true, Loops, Around>::type...>;
      using type = typename decltype(go(std::index_sequence_for<I...>{}))::type;
    };
    using type = typename detail::concat_all<
        typename decltype(index_events(std::make_index_sequence<A::arity>{}))::type,
        typename component_index_events<L>::type,
        typename expr<E, typename path_append<Path, 1>::type, false, Loops, Around,
                      A::op_type::has_grad && A::op_type::which == buffer::primal>::type,
        detail::type_list<event<Kind, typename W::path, false, Loops, A, Around>>>::type;
  };

  template <class L, class E, class Path, class Loops, class Around>
  struct stmt<node<op::store, L, E>, Path, Loops, Around> {
    using type = typename write_events<L, E, Path, Loops, Around, access_kind::store>::type;
  };
  template <atomic_kind K, class L, class E, class Path, class Loops, class Around>
  struct stmt<node<op::atomic<K>, L, E>, Path, Loops, Around> {
    using type = typename write_events<L, E, Path, Loops, Around,
                                       (K == atomic_kind::add || K == atomic_kind::sub) ? access_kind::accumulate
                                                                                        : access_kind::extremum>::type;
  };
  template <int Site, class L, class E, class Path, class Loops, class Around>
  struct stmt<node<op::assign<Site>, L, E>, Path, Loops, Around> {
    static constexpr bool need = needed_slot(eval::assigned_local<L>::slot);
    using type = typename detail::concat_all<typename expr<L, typename path_append<Path, 0>::type, need, Loops, Around>::type,
                                     typename expr<E, typename path_append<Path, 1>::type, need, Loops, Around>::type>::type;
  };
  template <int... S, class... K, class Path, class Loops, class Around>
  struct stmt<node<op::let<S...>, K...>, Path, Loops, Around> {
    static constexpr int slots[] = {S...};
    template <std::size_t... Is>
    static auto inits(std::index_sequence<Is...>)
        -> detail::concat_all<typename expr<detail::tuple_element_t<Is, detail::tuple<K...>>, typename path_append<Path, Is>::type,
                                    needed_slot(slots[Is]), Loops, Around>::type...>;
    using body = detail::tuple_element_t<sizeof...(S), detail::tuple<K...>>;
    using type = detail::concat_t<typename decltype(inits(std::make_index_sequence<sizeof...(S)>{}))::type,
                                  typename stmt<body, typename path_append<Path, sizeof...(S)>::type, Loops, Around>::type>;
  };
  template <int Site, class C, class T, class E, class Path, class Loops, class Around>
  struct stmt<node<op::if_<Site>, C, T, E>, Path, Loops, Around> {
    using type = typename detail::concat_all<typename expr<C, typename path_append<Path, 0>::type, true, Loops, Around>::type,
                                     typename stmt<T, typename path_append<Path, 1>::type, Loops, Around>::type,
                                     typename stmt<E, typename path_append<Path, 2>::type, Loops, Around>::type>::type;
  };
  template <int Site, class C, class B, class Path, class Loops, class Around>
  struct stmt<node<op::while_<Site>, C, B>, Path, Loops, Around> {
    using inner = typename loops_append<Loops, loop_entry(Site, while_level, 0)>::type;
    using type = typename detail::concat_all<typename expr<C, typename path_append<Path, 0>::type, true, inner, Around>::type,
                                     typename stmt<B, typename path_append<Path, 1>::type, inner, Around>::type>::type;
  };
  template <loop_kind Kd, int L, int A, int Site, class... K, class Path, class Loops, class Around>
  struct stmt<node<op::loop<Kd, L, A, Site>, K...>, Path, Loops, Around> {
    using below = typename around_kids<op::loop<Kd, L, A, Site>, Path, Around>::type;
    template <std::size_t... Is>
    static auto bounds(std::index_sequence<Is...>)
        -> detail::concat_all<typename expr<detail::tuple_element_t<Is, detail::tuple<K...>>, typename path_append<Path, Is>::type,
                                    true, Loops, below>::type...>;
    using inner = typename loops_append<Loops, loop_entry(Site, L, A)>::type;
    using body = detail::tuple_element_t<2 * A, detail::tuple<K...>>;
    using type = detail::concat_t<typename decltype(bounds(std::make_index_sequence<2 * A>{}))::type,
                                  typename stmt<body, typename path_append<Path, 2 * A>::type, inner, below>::type>;
  };
};

// Whether two accesses of one body sit in different arms of one if_ (or
// select): the node where their paths part is a branch, and they leave it
// through its two arms, not its condition. One run of the branch runs one
// arm, so within one iteration of every loop around the branch (all the
// loops the two have in common sit above it) neither follows the other.
template <class Op>
inline constexpr bool is_branch_op_v = std::is_same_v<Op, op::select>;
template <int Site>
inline constexpr bool is_branch_op_v<op::if_<Site>> = true;
// The kid index at place i of a path (0 past its end).
template <std::size_t... P>
constexpr std::size_t path_at(std::size_t i) {
  constexpr std::size_t p[] = {P..., 0};
  return i < sizeof...(P) ? p[i] : 0;
}
// The length of the common prefix of two paths.
template <std::size_t... P, std::size_t... Q>
constexpr std::size_t parting(std::index_sequence<P...>, std::index_sequence<Q...>) {
  std::size_t k = 0;
  while (k < sizeof...(P) && k < sizeof...(Q) && path_at<P...>(k) == path_at<Q...>(k)) ++k;
  return k;
}
template <class Body, class P, class Prefix>
struct parts_at_branch;
template <class Body, std::size_t... P, std::size_t... Is>
struct parts_at_branch<Body, std::index_sequence<P...>, std::index_sequence<Is...>>
    : std::bool_constant<is_branch_op_v<typename node_at_t<Body, std::index_sequence<path_at<P...>(Is)...>>::op_type>> {};
template <class Body, class P, class Q>
struct exclusive_arms : std::false_type {};
template <class Body, std::size_t... P, std::size_t... Q>
  requires(parting(std::index_sequence<P...>{}, std::index_sequence<Q...>{}) < sizeof...(P) &&
           parting(std::index_sequence<P...>{}, std::index_sequence<Q...>{}) < sizeof...(Q))
struct exclusive_arms<Body, std::index_sequence<P...>, std::index_sequence<Q...>> {
  static constexpr std::size_t k = parting(std::index_sequence<P...>{}, std::index_sequence<Q...>{});
  static constexpr bool value = path_at<P...>(k) != 0 && path_at<Q...>(k) != 0 &&
                                parts_at_branch<Body, std::index_sequence<P...>, std::make_index_sequence<k>>::value;
};
template <class Body, class P, class Q>
inline constexpr bool exclusive_arms_v = exclusive_arms<Body, P, Q>::value;

// The if_ nodes whose then-arm holds both accesses (paths P and Q in Body):
// the depths along the common part of the paths at which an if_ sits and
// both go on into its kid 1. Both accesses run only where its condition
// holds (check/dependence.hpp, guard_apart).
template <class Body, class P, class Q>
struct shared_guards;
template <class Body, std::size_t... P, std::size_t... Q>
struct shared_guards<Body, std::index_sequence<P...>, std::index_sequence<Q...>> {
  static constexpr std::size_t common = parting(std::index_sequence<P...>{}, std::index_sequence<Q...>{});
  template <class Is>
  struct prefix;
  template <std::size_t... Is>
  struct prefix<std::index_sequence<Is...>> {
    using type = std::index_sequence<path_at<P...>(Is)...>;
    using condition = std::index_sequence<path_at<P...>(Is)..., 0>;
  };
  template <std::size_t N>
  using prefix_t = typename prefix<std::make_index_sequence<N>>::type;
  // The path to the condition of the if_ at depth N.
  template <std::size_t N>
  using condition_t = typename prefix<std::make_index_sequence<N>>::condition;
  static constexpr std::array<bool, common + 1> guarded = []<std::size_t... Ns>(std::index_sequence<Ns...>) {
    return std::array<bool, common + 1>{
        (is_if_op<typename node_at_t<Body, prefix_t<Ns>>::op_type> && path_at<P...>(Ns) == 1)..., false};
  }(std::make_index_sequence<common>{});
  static constexpr std::size_t count = [] {
    std::size_t n = 0;
    for (bool g : guarded) n += g ? 1 : 0;
    return n;
  }();
  static constexpr std::array<std::size_t, count + 1> depths = [] {
    std::array<std::size_t, count + 1> out{};
    std::size_t n = 0;
    for (std::size_t d = 0; d < common; ++d)
      if (guarded[d]) out[n++] = d;
    return out;
  }();
};

template <class Analysis, class Body>
using events_t =
    typename event_walk<Analysis>::template stmt<Body, std::index_sequence<>, std::integer_sequence<int>,
                                                 around<detail::type_list<>, detail::type_list<>>>::type;

}  // namespace ctg::check
