// Sizing the adstack at launch: for every nested loop that snapshots carried
// locals, the most iterations it can run (its bounds evaluated over the
// ranges of the enclosing indices, reading the fields they load) times the
// snapshot's size. Loops whose trip count no launch can bound (while_, bounds
// computed from locals) take their iteration count from
// ctg::adstack_capacity<N>.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "../analysis/intervals.hpp"
#include "../errors.hpp"
#include "../eval/forward.hpp"
#include "adstack.hpp"
#include "activity.hpp"

namespace ctg::ad {

using analysis::interval;

// Whether an integer expression can be bounded at launch from its type alone.
template <class E>
inline constexpr bool boundable_v = false;
template <class T>
inline constexpr bool boundable_v<node<op::literal<T>>> = std::is_integral_v<T>;
template <long long V>
inline constexpr bool boundable_v<node<op::constant<V>>> = true;
template <int I, int A>
inline constexpr bool boundable_v<node<op::extent<I, A>>> = true;
template <int L, int A>
inline constexpr bool boundable_v<node<op::loop_index<L, A>>> = true;
template <int I, class T, int R, bool G, bool D, class... Idx>
inline constexpr bool boundable_v<node<op::access<I, T, R, G, D, buffer::primal>, Idx...>> =
    std::is_integral_v<T> && (boundable_v<Idx> && ...);
template <class Fn, class... K>
inline constexpr bool boundable_v<node<op::math<Fn>, K...>> = analysis::bounded_fn_v<Fn> && (boundable_v<K> && ...);
template <class T, class K>
inline constexpr bool boundable_v<node<op::cast<T>, K>> = std::is_integral_v<T> && boundable_v<K>;
template <class N, class K>
inline constexpr bool boundable_v<node<op::func_scope<N>, K>> = boundable_v<K>;

template <int Levels, int Axes>
using bound_env = analysis::index_ranges<Levels, Axes>;

// Walks one offload body and adds up, per nested loop with carried locals,
// its largest trip count times its snapshot size.
template <class Reverse, class Locals, class Args, int Levels, int Axes>
struct capacity_walk {
  analysis::interval_eval<Args> ev;
  long long unbounded_iterations;  // from adstack_capacity<N>, or -1
  long long bytes = 0;
  int unsized_site = -1;  // a loop no launch could bound, without a capacity
  // More snapshot bytes per thread than this is a range of trip counts no
  // launch can afford (a bound's range taken over the hull of the values a
  // field holds, or through a cast that wraps): the loop is sized as one
  // without bounds (by adstack_capacity<N>, or CTG-AD-003 at the launch).
  static constexpr long long affordable_bytes = 1LL << 32;

  using env_t = bound_env<Levels, Axes>;

  template <class Op, class... K>
  void visit(node<Op, K...> const& n, env_t const& env) {
    using kids = detail::tuple<K...>;
    if constexpr (is_loop_op<Op>) {
      constexpr int A = Op::axes;
      using Body = std::remove_cvref_t<decltype(detail::get<2 * A>(n.kids))>;
      env_t inner = env;
      long long trips = 1;
      bool known = true;
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((visit_axis<Op::level, int(Is)>(ev(&detail::get<Is>(n.kids), env), ev(&detail::get<A + Is>(n.kids), env),
                                          inner, trips, known)),
         ...);
      }(std::make_index_sequence<A>{});
      add_site<Body>(Op::site, known, trips);
      visit(detail::get<2 * A>(n.kids), inner);
    } else if constexpr (is_while_op<Op>) {
      add_site<detail::tuple_element_t<1, kids>>(Op::site, false, 0);
      visit(kid<1>(n), env);
    } else if constexpr (std::is_same_v<Op, op::block> || is_if_op<Op> || is_func_scope_op<Op> || is_let_op<Op>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (visit(detail::get<Is>(n.kids), env), ...);
      }(std::index_sequence_for<K...>{});
    }
  }
  template <int L, int A>
  static void visit_axis(interval lo, interval hi, env_t& inner, long long& trips, bool& known) {
    if (!lo.known || !hi.known) {
      known = false;
      inner.idx[L][A] = interval::unknown();
      return;
    }
    inner.idx[L][A] = {lo.lo, hi.hi - 1, true};
    long long const axis_trips = std::max<long long>(0, hi.hi - lo.lo);
    trips = axis_trips != 0 && trips > affordable_bytes / axis_trips ? affordable_bytes + 1 : trips * axis_trips;
  }
  template <class Body>
  void add_site(int site, bool known, long long trips) {
    constexpr auto carried = Reverse::template carried<Body>;
    if constexpr (!carried.empty()) {
      long long const per = snapshot_bytes<Body>();
      if (known && trips <= affordable_bytes / per) {
        bytes += trips * per;
      } else if (unbounded_iterations >= 0) {
        bytes += unbounded_iterations * per;
      } else if (unsized_site < 0) {
        unsized_site = site;
      }
    }
  }
  template <class Body>
  static constexpr long long snapshot_bytes() {
    constexpr auto carried = Reverse::template carried<Body>;
    using locals = Locals;
    return [&]<std::size_t... Ss>(std::index_sequence<Ss...>) {
      return detail::sum_all<long long>(
          {(carried[int(Ss)] ? 4 * stack_words<detail::tuple_element_t<Ss, locals>> : 0LL)...});
    }(std::make_index_sequence<std::size_t(carried.size)>{});
  }
  template <class E>
  void visit(E const&, env_t const&) {}
};

template <class Op>
constexpr int level_step() {
  return (is_loop_op<Op> || is_while_op<Op>) ? 1 : 0;
}
template <class E>
void describe_site(E const*, int, int, std::string const&, std::string&) {}

// Whether a subtree holds a loop: describe_site visits only those, so that
// it is not instantiated for every node of every expression.
template <class N>
inline constexpr bool holds_loop_v = false;
template <class Op, class... K>
inline constexpr bool holds_loop_v<node<Op, K...>> = level_step<Op>() != 0 || (holds_loop_v<K> || ...);
template <class... K>
using kids_holding_loops =
    detail::concat_all_t<std::conditional_t<holds_loop_v<K>, detail::type_list<K>, detail::type_list<>>...>;

// "range loop at level 1 in func 'inner'": the loop with frame site `site`.
template <class Op, class... K>
void describe_site(node<Op, K...> const*, int site, int level, std::string const& funcs, std::string& out) {
  using kids = detail::tuple<K...>;
  auto where = [&] { return funcs.empty() ? std::string() : " in func '" + funcs + "'"; };
  if constexpr (is_loop_op<Op> || is_while_op<Op>) {
    if (Op::site == site && out.empty()) {
      if constexpr (is_while_op<Op>)
        out = "while_ loop at level " + std::to_string(level) + where();
      else
        out = std::string(Op::kind == loop_kind::serial ? "serial_range" : "range") + " loop at level " +
              std::to_string(Op::level) + where();
    }
  }
  if constexpr (kids_holding_loops<K...>::size == 0) {
    return;
  } else if constexpr (is_func_scope_op<Op>) {
    std::string const name(Op::name.view());
    describe_site(static_cast<detail::tuple_element_t<0, kids> const*>(nullptr), site, level,
                  funcs.empty() ? name : funcs + "' -> '" + name, out);
  } else {
    constexpr int inner = level_step<Op>();
    [&]<class... L>(detail::type_list<L...>*) {
      (describe_site(static_cast<L const*>(nullptr), site, level + inner, funcs, out), ...);
    }(static_cast<kids_holding_loops<K...>*>(nullptr));
  }
}
// The same from the root statement of an offload (a loop below is at the
// level of the loops around it), as a function a launch's error can call.
template <class Root>
void describe_site_in(int site, std::string& out) {
  describe_site(static_cast<Root const*>(nullptr), site, 0, "", out);
}
}  // namespace ctg::ad

namespace ctg::ad {

// What an offload body asks of the adstack, known at compile time: whether any
// nested loop snapshots carried locals, and whether one of those has a trip
// count no launch can bound.
struct stack_demand_info {
  bool uses_stack = false;
  bool unbounded = false;
  int level = -1;  // loop level of the first loop that uses the stack
};

template <class Reverse, class Op, class... K>
constexpr void stack_demand(node<Op, K...> const*, int level, stack_demand_info& out) {
  using kids = detail::tuple<K...>;
  if constexpr (is_loop_op<Op> || is_while_op<Op>) {
    using Body = detail::tuple_element_t<sizeof...(K) - 1, kids>;
    if constexpr (!Reverse::template carried<Body>.empty()) {
      if (!out.uses_stack) out.level = level;
      out.uses_stack = true;
      if constexpr (is_while_op<Op>) {
        out.unbounded = true;
      } else {
        bool ok = true;
        [&]<std::size_t... Is>(std::index_sequence<Is...>) {
          ok = (boundable_v<detail::tuple_element_t<Is, kids>> && ...);
        }(std::make_index_sequence<2 * Op::axes>{});
        if (!ok) out.unbounded = true;
      }
    }
    stack_demand<Reverse>(static_cast<Body const*>(nullptr), level + 1, out);
  } else {
    (stack_demand<Reverse>(static_cast<K const*>(nullptr), level, out), ...);
  }
}
template <class Reverse, class E>
constexpr void stack_demand(E const*, int, stack_demand_info&) {}

template <class Reverse, class Root>
constexpr stack_demand_info stack_demand_of(int root_level) {
  stack_demand_info info;
  stack_demand<Reverse>(static_cast<Root const*>(nullptr), root_level, info);
  return info;
}

}  // namespace ctg::ad
