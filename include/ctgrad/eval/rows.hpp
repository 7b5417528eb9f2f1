// The rows (indices of the first axis) of each field a launch reads and
// writes, from its lowered IR: an access whose first index is invariant
// (analysis/invariance.hpp) touches the row that index evaluates to, once,
// at the launch; any other access, every row. Stores and accumulations
// write their target's row; every other access reads.
#pragma once
#include "../analysis/invariance.hpp"
#include "../detail/rows.hpp"
#include "forward.hpp"

namespace ctg::eval {

// Whether an access with indices K touches one row, the one its first index
// evaluates to at the launch (invariant over it, reading at most the
// integer fields in Stable: analysis::launch_invariant_v), rather than every
// row.
template <unsigned long long Stable, class... K>
struct first_index_invariant : std::false_type {};
template <unsigned long long Stable, class K0, class... K>
struct first_index_invariant<Stable, K0, K...> : std::bool_constant<analysis::launch_invariant_v<K0, Stable>> {};
// Whether the rows a subtree touches follow from its type alone: it holds
// no store or accumulation and no access of one row. Then it reads every
// row of each field it accesses (ir::read_params_v).
template <class N, unsigned long long Stable>
inline constexpr bool rows_from_type_v = true;
template <class Op, class... K, unsigned long long Stable>
inline constexpr bool rows_from_type_v<node<Op, K...>, Stable> =
    !is_store_op<Op> && !is_atomic_op<Op> && !(is_access_op<Op> && first_index_invariant<Stable, K...>::value) &&
    (rows_from_type_v<K, Stable> && ...);

// Walks lowered statements with `host`, a frame whose arguments are the
// launch's (invariant expressions read nothing else, but the elements of
// the integer fields in Stable, which the launcher gives only when the host
// can read them and the launch does not write them). Kids are visited
// from visit itself, one instantiation level per level of the tree, and
// only those that touch a field. A subtree whose rows follow from its type
// is not walked: its fields' rows are all added at once (each visit is a
// function named after its subtree, one per level of a deep expression).
template <class Fr, unsigned long long Stable = 0>
struct row_walk {
  Fr& host;
  detail::row_set* reads;
  detail::row_set* writes;

  template <class Op, class... K>
  void visit(node<Op, K...> const& n) {
    if constexpr (rows_from_type_v<node<Op, K...>, Stable>) {
      read_all_rows(read_params_v<node<Op, K...>>);
    } else if constexpr (is_store_op<Op> || is_atomic_op<Op>) {
      target(kid<0>(n));
      if constexpr (kid_touches<1, K...>()) visit(kid<1>(n));
    } else {
      if constexpr (is_access_op<Op>) first_row(n, reads[Op::param]);
      if constexpr (sizeof...(K) > 3) {
        visit_kids(n);
      } else {
        if constexpr (kid_touches<0, K...>()) visit(CTG_IMPL_ELEMENT(0, n.kids));
        if constexpr (kid_touches<1, K...>()) visit(CTG_IMPL_ELEMENT(1, n.kids));
        if constexpr (kid_touches<2, K...>()) visit(CTG_IMPL_ELEMENT(2, n.kids));
      }
    }
  }

 private:
  void read_all_rows(unsigned long long params) {
    for (int p = 0; params != 0; ++p, params >>= 1)
      if (params & 1ull) reads[p].add_all();
  }
  // Whether kid I exists and touches a field element (ir::read_params_v
  // has a bit for every access below it).
  template <std::size_t I, class... K>
  static constexpr bool kid_touches() {
    if constexpr (I < sizeof...(K))
      return read_params_v<detail::tuple_element_t<I, detail::tuple<K...>>> != 0;
    else
      return false;
  }
  template <class N>
  void visit_touching(N const& n) {
    if constexpr (read_params_v<N> != 0) visit(n);
  }
  template <class Op, class... K>
  void visit_kids(node<Op, K...> const& n) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) { (visit_touching(detail::get<Is>(n.kids)), ...); }(
        std::index_sequence_for<K...>{});
  }
  template <class Op, class... K>
  void target(node<Op, K...> const& lhs) {
    if constexpr (is_access_op<Op>) {
      first_row(lhs, writes[Op::param]);
      visit_kids(lhs);
    } else {  // a component of an element: the element's row, the component's indices read
      target(kid<0>(lhs));
      [&]<std::size_t... Is>(std::index_sequence<Is...>) { (visit(detail::get<Is + 1>(lhs.kids)), ...); }(
          std::make_index_sequence<sizeof...(K) - 1>{});
    }
  }
  template <class Op, class... K>
  void first_row(node<Op, K...> const& access, detail::row_set& rows) {
    if constexpr (first_index_invariant<Stable, K...>::value)
      rows.add(int(forward::eval(kid<0>(access), host)));
    else
      rows.add_all();
  }
};

}  // namespace ctg::eval
