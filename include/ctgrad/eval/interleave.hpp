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

// Whether expression node N is computed lane by lane over the values of
// the iterations stepped together: an operation on arithmetic values that
// a loop over the lanes computes in vectors (lane_vector_op_v). Each lane
// computes what its iteration alone would (the same functions on the same
// operands), but the lanes' operations sit in one loop, which the compiler
// vectorises. Any other node (a load, a local, a vector or matrix value, a
// select) is evaluated on each frame in turn.
//
// Operations a lane loop computes in vectors: arithmetic, and with vector
// math (ir/vector_math.hpp) the functions that have vector versions. A
// loop of calls to a scalar function is slower than the lanes' statements
// run whole on each frame, where their values stay in registers.
template <class Fn>
inline constexpr bool lane_vector_call_v = vector_math::has_vector_version(Fn::name);
template <class Fn>
inline constexpr bool lane_vector_op_v =
    lane_vector_call_v<Fn> || std::is_same_v<Fn, ir::fn::add> || std::is_same_v<Fn, ir::fn::sub> ||
    std::is_same_v<Fn, ir::fn::mul> || std::is_same_v<Fn, ir::fn::div> || std::is_same_v<Fn, ir::fn::neg>;

template <class N>
inline constexpr bool lane_math_v = false;
template <class Fn, class... K>
inline constexpr bool lane_math_v<ir::node<ir::op::math<Fn>, K...>> =
    lane_vector_op_v<Fn> && sizeof...(K) <= 3 && std::is_arithmetic_v<ir::value_t<ir::node<ir::op::math<Fn>, K...>>> &&
    (std::is_arithmetic_v<ir::value_t<K>> && ...);

// Whether an assignment of expression E to an arithmetic local runs lane
// by lane: where the lanes' part of E calls a vector function, which pays
// for moving the lanes' values between their frames and vectors
// (measured: the recurrence's forward 1.3-2 times faster with vector math,
// and 1.1-1.7 times slower with the scalar sin).
template <class E>
inline constexpr bool lane_statement_v = false;
template <class Fn, class... K>
inline constexpr bool lane_statement_v<ir::node<ir::op::math<Fn>, K...>> =
    lane_math_v<ir::node<ir::op::math<Fn>, K...>> && (lane_vector_call_v<Fn> || (lane_statement_v<K> || ...));

// The values of an expression on W frames: lane k's is `[k]`.
// Different on each frame: W values, written before they are read (a
// value-initialised array would be zeroed first on every step).
template <class V, int W>
struct lane_array {
  V at[W];
  lane_array() {}
  V const& operator[](int k) const { return at[k]; }
};
// The same on every frame (a literal, a scalar argument, arithmetic on
// them): one value, which a lane loop broadcasts in a register. Written W
// times, its copies would be stored one by one and read back as a vector,
// which waits for the narrower stores to reach the cache (a failed store
// forward, on every step of a loop).
template <class V>
struct lane_scalar {
  V value;
  V const& operator[](int) const { return value; }
};

// The W values each(0), ..., each(W - 1), called in that order. Built in
// vectors of the target's width in registers and stored whole where the
// compiler has vector types: stored lane by lane, the next lane loop's
// vector load of them would wait for the narrower stores (as above).
template <class V, int W, class Each>
lane_array<V, W> lanes_of(Each const& each) {
  lane_array<V, W> out;
  [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
    V const values[W] = {V(each(int(Ks)))...};
#if defined(__GNUC__)
#  if defined(__AVX__)
    constexpr int bytes = 32;
#  else
    constexpr int bytes = 16;
#  endif
    constexpr int per_vector = int(bytes / sizeof(V));
    if constexpr (std::is_arithmetic_v<V> && !std::is_same_v<V, bool> && bytes % sizeof(V) == 0 && per_vector > 1 &&
                  W % per_vector == 0) {
      typedef V vector __attribute__((vector_size(bytes)));
      for (int c = 0; c < W; c += per_vector) {
        vector v;
        for (int k = 0; k < per_vector; ++k) v[k] = values[c + k];
        memcpy(static_cast<void*>(out.at + c), &v, sizeof v);
      }
      return;
    }
#endif
    for (int k = 0; k < W; ++k) out.at[k] = values[k];
  }(std::make_index_sequence<W>{});
  return out;
}

// The values of an expression on W frames, lane by lane (lane_math_v).
template <int W, class Fr>
struct lane_values {
  // Each lane's value has the type the expression's evaluation on its frame returns.
  template <class N>
  using value = std::remove_cvref_t<decltype(forward::eval(std::declval<N const&>(), std::declval<Fr&>()))>;

  // One template level per expression level, as forward::eval.
  template <class N>
  static auto eval(N const& n, Fr (&lanes)[W]) {
    if constexpr (analysis::invariant_v<N>) {
      return lane_scalar<value<N>>{forward::eval(n, lanes[0])};
    } else if constexpr (!lane_math_v<N>) {
      return lanes_of<value<N>, W>([&](int k) { return forward::eval(n, lanes[k]); });
    } else {
      using Fn = typename N::op_type::function;
      auto const& kids = n.kids;
      lane_array<value<N>, W> out;
      auto const a = eval(CTG_IMPL_ELEMENT(0, kids), lanes);
      if constexpr (N::arity == 1) {
        CTG_LANE_LOOP(int k = 0; k < W; ++k) out.at[k] = Fn::apply(a[k]);
      } else {
        auto const b = eval(CTG_IMPL_ELEMENT(1, kids), lanes);
        if constexpr (N::arity == 2) {
          CTG_LANE_LOOP(int k = 0; k < W; ++k) out.at[k] = Fn::apply(a[k], b[k]);
        } else {
          auto const c = eval(CTG_IMPL_ELEMENT(2, kids), lanes);
          CTG_LANE_LOOP(int k = 0; k < W; ++k) out.at[k] = Fn::apply(a[k], b[k], c[k]);
        }
      }
      return out;
    }
  }
};

// Runs one statement of W iterations, each on its own frame: the loops with
// invariant bounds, blocks, lets and funcs step the iterations together;
// any other statement runs whole on each frame in turn.
template <int W>
struct interleaved {
  template <class N, class Fr>
  static void eval(N const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) forward::eval(n, lanes[k]);
  }
  // An arithmetic local assigned an operation: its value lane by lane.
  template <int Site, int S, class T, class E, class Fr>
  static void eval(ir::node<ir::op::assign<Site>, ir::node<ir::op::local<S, T>>, E> const& n, Fr (&lanes)[W]) {
    if constexpr (std::is_arithmetic_v<T> && lane_statement_v<E>) {
      auto const v = lane_values<W, Fr>::eval(ir::kid<1>(n), lanes);
      for (int k = 0; k < W; ++k) detail::get<S>(lanes[k].locals) = convert<T>(v[k]);
    } else {
      for (int k = 0; k < W; ++k) forward::eval(n, lanes[k]);
    }
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
