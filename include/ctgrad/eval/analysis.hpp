// Type-level facts about a lowered kernel that the evaluators need: the type
// of every local slot, how deep loops nest, how many axes they have.
#pragma once
#include <boost/hana/at_key.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/integral_constant.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/map.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>
#include <boost/hana/plus.hpp>
#include <boost/hana/contains.hpp>

#include "../ir/node.hpp"
#include "../lower/normalize.hpp"

namespace ctg::eval {

namespace hana = boost::hana;
using namespace ctg::ir;

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

// The (slot, type) pairs a node declares, as a hana::tuple of hana::pair.
template <class N>
struct slot_decls {
  static constexpr auto value = hana::make_tuple();
};
template <class Op, class... K>
struct slot_decls<node<Op, K...>> {
  static constexpr auto own() {
    if constexpr (is_let_op<Op> || is_let_value_op<Op>) {
      return declared(Op{});
    } else if constexpr (!std::is_void_v<typename site_type<Op, K...>::type>) {
      return hana::make_tuple(hana::make_pair(hana::int_c<Op::site>, hana::type_c<typename site_type<Op, K...>::type>));
    } else {
      return hana::make_tuple();
    }
  }
  template <template <int...> class L, int... S>
  static constexpr auto declared(L<S...>) {
    using inits = detail::tuple<K...>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return hana::make_tuple(
          hana::make_pair(hana::int_c<S>, hana::type_c<value_t<detail::tuple_element_t<Is, inits>>>)...);
    }(std::make_index_sequence<sizeof...(S)>{});
  }
  static constexpr auto kids() {
    return hana::fold_left(hana::make_tuple(slot_decls<K>::value...), hana::make_tuple(),
                           [](auto acc, auto x) { return hana::concat(acc, x); });
  }
  static constexpr auto value = hana::concat(own(), kids());
};

// detail::tuple of the slot types in slot order, for slots 0..Count-1. A slot
// no node of N declares (it belongs to another offload) holds a char.
template <class N, int Count>
struct slot_storage {
  static constexpr auto map = hana::unpack(slot_decls<N>::value, hana::make_map);
  template <int S>
  static constexpr auto type_of() {
    if constexpr (hana::contains(decltype(map){}, hana::int_c<S>))
      return map[hana::int_c<S>];
    else
      return hana::type_c<char>;
  }
  template <std::size_t... Ss>
  static auto build(std::index_sequence<Ss...>)
      -> detail::tuple<typename decltype(type_of<int(Ss)>())::type...>;
  using type = decltype(build(std::make_index_sequence<std::size_t(Count)>{}));
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
    int m = 0;
    ((m = detail::max_int(m, S + 1)), ...);
    return m;
  }
  template <class O>
  static constexpr int own_slots() {
    if constexpr (is_let_op<O> || is_let_value_op<O>) return max_slot(O{});
    else if constexpr (requires { O::site; }) return O::site + 1;
    else return 0;
  }
  static constexpr int levels = [] {
    int m = own_levels<Op>();
    ((m = detail::max_int(m, loop_shape<K>::levels)), ...);
    return m;
  }();
  static constexpr int axes = [] {
    int m = own_axes<Op>();
    ((m = detail::max_int(m, loop_shape<K>::axes)), ...);
    return m;
  }();
  static constexpr int slots = [] {
    int m = own_slots<Op>();
    ((m = detail::max_int(m, loop_shape<K>::slots)), ...);
    return m;
  }();
};
template <class S>
struct loop_shape<parallel_offload<S>> : loop_shape<S> {};
template <class B>
struct loop_shape<serial_offload<B>> : loop_shape<B> {};

}  // namespace ctg::eval
