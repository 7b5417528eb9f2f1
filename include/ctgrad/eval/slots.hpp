// Type-level facts about a lowered kernel that the evaluators need: the type
// of every local slot, how deep loops nest, how many axes they have.
#pragma once
#include <type_traits>
#include <utility>

#include "../ir/node.hpp"
#include "../lower/normalize.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::eval {

CTG_IMPL_IR_VOCABULARY;


// ---- slots -----------------------------------------------------------------------------
// What a statement's own site slot holds (see op::assign and friends).
template <int A>
struct loop_bounds {
  int lo[A];
  int hi[A];
};

template <class Lhs>
struct assigned_local;
template <int S, class T>
struct assigned_local<node<op::local<S, T>>> {
  using type = T;
  static constexpr int slot = S;
};
template <class V, class... I>
struct assigned_local<node<op::component, V, I...>> : assigned_local<V> {};

template <class Op, class... K>
struct site_type {
  using type = void;
};
template <int Site, class L, class E>
struct site_type<op::assign<Site>, L, E> {
  using type = typename assigned_local<L>::type;
};
template <int Site, class... K>
struct site_type<op::if_<Site>, K...> {
  using type = bool;
};
template <int Site, class... K>
struct site_type<op::while_<Site>, K...> {
  using type = int;
};
template <loop_kind Kd, int L, int A, int Site, class... K>
struct site_type<op::loop<Kd, L, A, Site>, K...> {
  using type = loop_bounds<A>;
};

// A frame slot and the type it holds.
template <int S, class T>
struct slot_decl {
  static constexpr int slot = S;
  using type = T;
};

template <class... L>
struct flat_join {
  using type = detail::type_list<>;
};
template <class... A>
struct flat_join<detail::type_list<A...>> {
  using type = detail::type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct flat_join<detail::type_list<A...>, detail::type_list<B...>, Rest...> {
  using type = typename flat_join<detail::type_list<A..., B...>, Rest...>::type;
};

// The slots a node declares (lets) or owns (statement sites), as a type list
// of slot_decl. Plain type lists: this walk runs over every node of every
// kernel, and keeping it to one join per node keeps large kernels cheap to
// compile (a Boost.Hana map here dominated the build of 100-statement bodies).
template <class N>
struct slot_decls {
  using type = detail::type_list<>;
};
template <class Op, class... K>
struct slot_decls<node<Op, K...>> {
  template <class O>
  static auto own(O const*) {
    if constexpr (is_let_op<O> || is_let_value_op<O>) {
      return own_let(static_cast<O const*>(nullptr));
    } else if constexpr (!std::is_void_v<typename site_type<Op, K...>::type>) {
      return detail::type_list<slot_decl<Op::site, typename site_type<Op, K...>::type>>{};
    } else {
      return detail::type_list<>{};
    }
  }
  template <template <int...> class L, int... S>
  static auto own_let(L<S...> const*) {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return detail::type_list<slot_decl<S, value_t<detail::tuple_element_t<Is, detail::tuple<K...>>>>...>{};
    }(std::make_index_sequence<sizeof...(S)>{});
  }
  using type = typename flat_join<decltype(own(static_cast<Op const*>(nullptr))), typename slot_decls<K>::type...>::type;
};

// detail::tuple of the slot types in slot order, for slots 0..Count-1. A slot
// no node of N declares (it belongs to another offload) holds a char.
template <class N, int Count>
struct slot_storage {
  // Index of `slot` in the declarations (their count when not declared).
  template <class... D>
  static constexpr std::size_t find(int slot) {
    constexpr int keys[] = {D::slot..., -1};
    std::size_t k = 0;
    while (keys[k] != -1 && keys[k] != slot) ++k;
    return k;
  }
  template <class... D, std::size_t... Ss>
  static auto build(detail::type_list<D...>, std::index_sequence<Ss...>)
      -> detail::tuple<detail::tuple_element_t<find<D...>(int(Ss)), detail::tuple<typename D::type..., char>>...>;
  using type = decltype(build(typename slot_decls<N>::type{}, std::make_index_sequence<std::size_t(Count)>{}));
};

// ---- loop shape ---------------------------------------------------------------------
template <class N>
struct loop_shape {
  static constexpr int levels = 0;  // 1 + the deepest loop level
  static constexpr int axes = 0;    // the most axes of any loop
  static constexpr int slots = 0;   // 1 + the highest slot declared
};
template <class Op, class... K>
struct loop_shape<node<Op, K...>> {
  template <class O>
  static constexpr int own_levels() {
    if constexpr (requires { O::level; O::axes; }) return O::level + 1;
    else return 0;
  }
  template <class O>
  static constexpr int own_axes() {
    if constexpr (requires { O::level; O::axes; }) return O::axes;
    else return 0;
  }
  template <template <int...> class L, int... S>
  static constexpr int max_slot(L<S...>) {
    return detail::max_of((S + 1)...);
  }
  template <class O>
  static constexpr int own_slots() {
    if constexpr (is_let_op<O> || is_let_value_op<O>) return max_slot(O{});
    else if constexpr (requires { O::site; }) return O::site + 1;
    else return 0;
  }
  static constexpr int levels = detail::max_of(own_levels<Op>(), loop_shape<K>::levels...);
  static constexpr int axes = detail::max_of(own_axes<Op>(), loop_shape<K>::axes...);
  static constexpr int slots = detail::max_of(own_slots<Op>(), loop_shape<K>::slots...);
};
template <class S>
struct loop_shape<parallel_offload<S>> : loop_shape<S> {};
template <class B>
struct loop_shape<serial_offload<B>> : loop_shape<B> {};
template <class Key>
struct loop_shape<ir::keyed_offload<Key>> : loop_shape<typename Key::offload> {};

}  // namespace ctg::eval
