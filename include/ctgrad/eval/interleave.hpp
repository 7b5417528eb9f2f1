// Interleaved iterations: the forward pass of a 1-D parallel offload whose
// body carries a value through a nested loop (`v = sin(v) a + x[i] b`, 64
// times) runs several iterations in step, statement by statement
// (cpu::run_chunk). Such a loop is a chain of dependent operations, as long
// as the loop: one iteration leaves most of the core idle waiting for the
// latency of each link, and the out-of-order window is far too short to
// reach the next iteration's independent chain. Stepping `lanes`
// iterations together puts that many independent links side by side
// (measured: the recurrence of bench/cpu_workloads.cpp 3.3x faster with 8,
// 4.9x with 16, in a hand-written loop).
//
// A parallel offload's iterations run in no particular order, and
// concurrently on several threads, so any interleaving of their statements
// is one the semantics allow. Only bodies where it is also bit-for-bit the
// order of one thread running the iterations one after another interleave:
// no accumulation (its sum would round in another order), no field both
// read and written (an iteration could read what another wrote), and no
// store inside a nested loop (a row written element by element, which the
// compiler vectorises when one iteration runs alone).
#pragma once
#include <type_traits>

#include "../analysis/invariance.hpp"
#include "forward.hpp"
#include "slots.hpp"

namespace ctg::eval {

// How many iterations step together.
inline constexpr int interleaved_lanes = 8;

// What decides whether a body interleaves, gathered in one walk.
struct interleave_facts {
  unsigned long long assigned = 0;  // locals assigned (slots past the 64th set every bit)
  unsigned long long declared = 0;  // locals a let introduces
  unsigned long long read = 0;      // field parameters read (not the element a store writes)
  unsigned long long read_grad = 0; // those of them read with a gradient
  unsigned long long written = 0;   // field parameters stored to
  bool accumulates = false;         // an atomic accumulation
  bool stores_in_loop = false;      // a store inside a nested loop
  bool carried_loop = false;        // a nested loop with invariant bounds that assigns a local declared outside it

  constexpr interleave_facts operator|(interleave_facts const& o) const {
    return {assigned | o.assigned,          declared | o.declared,
            read | o.read,                  read_grad | o.read_grad,
            written | o.written,            accumulates || o.accumulates,
            stores_in_loop || o.stores_in_loop, carried_loop || o.carried_loop};
  }
};

template <class N>
struct interleave_walk {
  static constexpr interleave_facts value{};
};
template <class Op, class... K>
struct interleave_walk<ir::node<Op, K...>> {
  static constexpr interleave_facts value = [] {
    interleave_facts f = (interleave_walk<K>::value | ... | interleave_facts{});
    f.read |= ir::access_param_bit<Op>;
    if constexpr (ir::is_access_op<Op>)
      if constexpr (Op::has_grad) f.read_grad |= ir::access_param_bit<Op>;
    return f;
  }();
};
// A store: the written element's indices are read, the element is not.
template <class L, class E>
struct interleave_walk<ir::node<ir::op::store, L, E>> {
  template <class A>
  struct indices;
  template <class Op, class... I>
  struct indices<ir::node<Op, I...>> {
    static constexpr interleave_facts value = (interleave_walk<I>::value | ... | interleave_facts{});
  };
  static constexpr interleave_facts value = [] {
    interleave_facts f = interleave_walk<E>::value | indices<typename ir::written_access<L>::type>::value;
    if constexpr (!std::is_same_v<typename ir::written_access<L>::type, L>)  // a component's own indices
      f = f | []<class V, class... I>(ir::node<ir::op::component, V, I...>*) {
        return (interleave_walk<I>::value | ... | interleave_facts{});
      }(static_cast<L*>(nullptr));
    f.written |= ir::param_bit(ir::written_access<L>::type::op_type::param);
    return f;
  }();
};
template <ir::atomic_kind K, class L, class E>
struct interleave_walk<ir::node<ir::op::atomic<K>, L, E>> {
  static constexpr interleave_facts value{.accumulates = true};
};
template <int Site, class L, class E>
struct interleave_walk<ir::node<ir::op::assign<Site>, L, E>> {
  static constexpr interleave_facts value = [] {
    interleave_facts f = interleave_walk<L>::value | interleave_walk<E>::value;
    f.assigned |= ir::param_bit(assigned_local<L>::slot);
    return f;
  }();
};
template <int... S, class... K>
struct interleave_walk<ir::node<ir::op::let<S...>, K...>> {
  static constexpr interleave_facts value = [] {
    interleave_facts f = (interleave_walk<K>::value | ... | interleave_facts{});
    f.declared |= (ir::param_bit(S) | ... | 0ull);
    return f;
  }();
};
template <ir::loop_kind LK, int L, int A, int Site, class... K>
struct interleave_walk<ir::node<ir::op::loop<LK, L, A, Site>, K...>> {
  using body = detail::tuple_element_t<2 * A, detail::tuple<K...>>;
  static constexpr bool invariant_bounds = []<std::size_t... Is>(std::index_sequence<Is...>) {
    return (analysis::invariant_v<detail::tuple_element_t<Is, detail::tuple<K...>>> && ...);
  }(std::make_index_sequence<2 * A>{});
  static constexpr interleave_facts value = [] {
    interleave_facts f = (interleave_walk<K>::value | ... | interleave_facts{});
    interleave_facts const inner = interleave_walk<body>::value;
    f.stores_in_loop = f.stores_in_loop || inner.written != 0 || inner.accumulates;
    f.carried_loop = f.carried_loop || (invariant_bounds && (inner.assigned & ~inner.declared) != 0);
    return f;
  }();
};

// Whether the forward pass interleaves iterations of the offload body Body.
template <class Body>
inline constexpr bool interleaves_v = [] {
  constexpr interleave_facts f = interleave_walk<Body>::value;
  return f.carried_loop && !f.accumulates && !f.stores_in_loop && (f.read & f.written) == 0;
}();

// Runs one statement of W iterations, each on its own frame: the loops with
// invariant bounds, blocks, lets and funcs step the iterations together;
// any other statement runs whole on each frame in turn.
template <int W>
struct interleaved {
  template <class N, class Fr>
  static void eval(N const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) forward::eval(n, lanes[k]);
  }
  template <class... S, class Fr>
  static void eval(ir::node<ir::op::block, S...> const& n, Fr (&lanes)[W]) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (eval(detail::get<Is>(n.kids), lanes), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <class Name, class K, class Fr>
  static void eval(ir::node<ir::op::func_scope<Name>, K> const& n, Fr (&lanes)[W]) {
    eval(ir::kid<0>(n), lanes);
  }
  template <int... S, class... K, class Fr>
  static void eval(ir::node<ir::op::let<S...>, K...> const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) forward::init_let(n, lanes[k]);
    eval(detail::get<sizeof...(S)>(n.kids), lanes);
  }
  template <ir::loop_kind LK, int L, int A, int Site, class... K, class Fr>
  static void eval(ir::node<ir::op::loop<LK, L, A, Site>, K...> const& n, Fr (&lanes)[W]) {
    if constexpr (!interleave_walk<ir::node<ir::op::loop<LK, L, A, Site>, K...>>::invariant_bounds) {
      for (int k = 0; k < W; ++k) forward::eval(n, lanes[k]);
    } else {
      // The bounds are the same on every frame: taken from the first.
      int lo[A], hi[A];
      forward::bounds(n, lanes[0], lo, hi);
      auto const& body = detail::get<2 * A>(n.kids);
      forward::template iterate<L, A>(lo, hi, lanes[0], [&] {
        for (int k = 1; k < W; ++k)
          for (int a = 0; a < A; ++a) lanes[k].idx[L][a] = lanes[0].idx[L][a];
        eval(body, lanes);
      });
    }
  }
};

}  // namespace ctg::eval
