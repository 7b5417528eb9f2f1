// Interleaved iterations in the reverse pass (eval/interleave.hpp says why):
// a 1-D parallel offload whose body carries a value through a nested loop
// runs `lanes` iterations' adjoints in step on the host, each on its own
// frame with its own adstack. The recompute pushes the lanes' snapshots
// side by side, and the sweep pops them in step, iteration j of the nested
// loop of every lane before iteration j - 1 of any: the chains of dependent
// operations of different iterations sit next to each other.
//
// The same bodies as the forward pass's, less those whose gradients meet:
// every field read with a gradient is read only at the iteration's own
// element (ad::slot_ownership::owned), so that every gradient element has
// one iteration adding into it and the sums round exactly as when the
// iterations run one after another.
#pragma once
#include "../eval/interleave.hpp"
#include "offload.hpp"

namespace ctg::ad {

// Whether the reverse pass of `Plan` (an ad::reverse_plan, with the primal
// values or without) interleaves iterations.
template <class Plan, int Params>
inline constexpr bool reverse_interleaves_v = [] {
  using body = typename Plan::body;
  if constexpr (!Plan::parts::parallel || Plan::parts::axes != 1 || Plan::banded || Plan::seeds::size != 0 ||
                !eval::interleaves_v<body>) {
    return false;
  } else {
    constexpr unsigned long long read = eval::interleave_walk<body>::value.read_grad;
    return []<int... Is>(std::integer_sequence<int, Is...>) {
      return ((Is >= 64 || !(read >> Is & 1) || Plan::policy::template owned<Is>) && ...);
    }(std::make_integer_sequence<int, Params>{});
  }
}();

// A leaf (a local, a literal, an index) or a load at such indices. In the
// adjoint computed lane by lane (lane_reverse) its record is its W values
// when a rule needs them (eval::lane_values: one value when they are the
// same on every frame), nothing otherwise, and its adjoint is pushed by R on
// each frame from a record made again there, which costs nothing (a leaf's
// record is its value, a load's its indices): kept, W records would sit in
// memory the optimiser cannot split.
template <class N>
inline constexpr bool lane_light_v = false;
template <class Op, class... K>
inline constexpr bool lane_light_v<node<Op, K...>> =
    sizeof...(K) == 0 || (is_access_op<Op> && ((K::arity == 0) && ...));

// The adjoint of an arithmetic local's assignment on W frames, lane by
// lane (eval::lane_statement_v says which): the record of each node
// computed lane by lane (eval::lane_math_v) holds its W values, and the
// adjoint reaching each operand is computed for the W lanes in one loop,
// which the compiler vectorises (the recurrence's `cos`); any other node is
// recorded and propagated on each frame by R, as when the iterations run
// alone. Each lane computes the values and adjoints its iteration alone
// would, and adds them in the same order: operand after operand, each
// operand's subtree whole, into its own frame and its own gradient elements
// (every field read with a gradient is read at the iteration's own element
// only).
template <class R, int W, class Fr>
struct lane_reverse {
  template <class E>
  static constexpr bool active = R::template active<E>;

  // A node whose value no rule needs, inactive or light: nothing is kept.
  template <class V>
  struct unrecorded {};
  // Any other node: its record on each frame, one a lane. The storage
  // constructs nothing: each lane's record is built in place from R's.
  template <class Rec>
  struct per_lane {
    union {
      Rec lane[W];
    };
    per_lane() {}
    per_lane(per_lane const& other) {
      memcpy(static_cast<void*>(this), static_cast<void const*>(&other), sizeof(per_lane));
    }
  };
  // A node computed lane by lane: its operands' records and its W values
  // (none when no rule needs them).
  template <class V>
  struct no_values {
    static constexpr V at[W] = {};
  };
  template <class Fn, class V, class... Kids>
  struct math_lanes {
    detail::tuple<Kids...> kids;
    [[no_unique_address]] std::conditional_t<is_absent_v<V>, no_values<V>, eval::lane_array<V, W>> value;
  };

  template <class V>
  static absent<V> value_at(unrecorded<V> const&, int) {
    return {};
  }
  template <class V>
  static V const& value_at(eval::lane_array<V, W> const& r, int k) {
    return r[k];
  }
  template <class V>
  static V const& value_at(eval::lane_scalar<V> const& r, int) {
    return r.value;
  }
  template <class Rec>
  static auto const& value_at(per_lane<Rec> const& r, int k) {
    return r.lane[k].value;
  }
  template <class Fn, class V, class... Kids>
  static V const& value_at(math_lanes<Fn, V, Kids...> const& r, int k) {
    return r.value.at[k];
  }

  template <bool Need, class N>
  static auto record(N const& n, Fr (&lanes)[W]) {
    if constexpr (!Need && (!active<N> || lane_light_v<N>)) {
      return unrecorded<value_t<N>>{};
    } else if constexpr (lane_light_v<N>) {
      return eval::lane_values<W, Fr>::eval(n, lanes);
    } else {
      using Rec = typename R::template record_t<Need, Fr, N>;
      per_lane<Rec> r;
      for (int k = 0; k < W; ++k) new (&r.lane[k]) Rec(R::template record<Need>(n, lanes[k]));
      return r;
    }
  }
  template <bool Need, class Fn, class... K>
    requires(eval::lane_math_v<node<op::math<Fn>, K...>> && (Need || active<node<op::math<Fn>, K...>>))
  static auto record(node<op::math<Fn>, K...> const& n, Fr (&lanes)[W]) {
    using V = typename R::template math_value_t<Need, Fn, K...>;
    constexpr bool need0 = R::template operand_kept<Need, 0, Fn, K...>();
    auto const& kids = n.kids;
    if constexpr (sizeof...(K) == 1) {
      using T0 = decltype(record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes));
      math_lanes<Fn, V, T0> r{{{{record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes)}}}, {}};
      if constexpr (Need) {
        auto const& t0 = CTG_IMPL_ELEMENT(0, r.kids);
        CTG_LANE_LOOP(int k = 0; k < W; ++k) r.value.at[k] = math_value<Fn, V>(value_at(t0, k));
      }
      return r;
    } else if constexpr (sizeof...(K) == 2) {
      constexpr bool need1 = R::template operand_kept<Need, 1, Fn, K...>();
      using T0 = decltype(record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes));
      using T1 = decltype(record<need1>(CTG_IMPL_ELEMENT(1, kids), lanes));
      math_lanes<Fn, V, T0, T1> r{
          {{{record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes)}, {record<need1>(CTG_IMPL_ELEMENT(1, kids), lanes)}}}, {}};
      if constexpr (Need) {
        auto const& t0 = CTG_IMPL_ELEMENT(0, r.kids);
        auto const& t1 = CTG_IMPL_ELEMENT(1, r.kids);
        CTG_LANE_LOOP(int k = 0; k < W; ++k) r.value.at[k] = math_value<Fn, V>(value_at(t0, k), value_at(t1, k));
      }
      return r;
    } else {
      constexpr bool need1 = R::template operand_kept<Need, 1, Fn, K...>();
      constexpr bool need2 = R::template operand_kept<Need, 2, Fn, K...>();
      using T0 = decltype(record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes));
      using T1 = decltype(record<need1>(CTG_IMPL_ELEMENT(1, kids), lanes));
      using T2 = decltype(record<need2>(CTG_IMPL_ELEMENT(2, kids), lanes));
      math_lanes<Fn, V, T0, T1, T2> r{{{{record<need0>(CTG_IMPL_ELEMENT(0, kids), lanes)},
                                        {record<need1>(CTG_IMPL_ELEMENT(1, kids), lanes)},
                                        {record<need2>(CTG_IMPL_ELEMENT(2, kids), lanes)}}},
                                      {}};
      if constexpr (Need) {
        auto const& t0 = CTG_IMPL_ELEMENT(0, r.kids);
        auto const& t1 = CTG_IMPL_ELEMENT(1, r.kids);
        auto const& t2 = CTG_IMPL_ELEMENT(2, r.kids);
        CTG_LANE_LOOP(int k = 0; k < W; ++k) {
          r.value.at[k] = math_value<Fn, V>(value_at(t0, k), value_at(t1, k), value_at(t2, k));
        }
      }
      return r;
    }
  }

  // A light node's adjoint, from its record made again on each frame (an
  // inactive node's unrecorded: nothing to push).
  template <class N, class Values, class G>
    requires(lane_light_v<N> || std::is_same_v<Values, unrecorded<value_t<N>>>)
  static void backprop(N const& n, Values const&, G const& g, Fr (&lanes)[W]) {
    if constexpr (active<N>)
      for (int k = 0; k < W; ++k)
        R::template backprop<false>(n, R::template record<false>(n, lanes[k]), g[k], lanes[k]);
  }
  template <class N, class Rec, class G>
  static void backprop(N const& n, per_lane<Rec> const& r, G const& g, Fr (&lanes)[W]) {
    if constexpr (active<N>)
      for (int k = 0; k < W; ++k)
        R::template backprop<R::template needs<decltype(Rec::value)>>(n, r.lane[k], g[k], lanes[k]);
  }
  template <class Fn, class... K, class V, class... Kids, class G>
  static void backprop(node<op::math<Fn>, K...> const& n, math_lanes<Fn, V, Kids...> const& r, G const& g,
                       Fr (&lanes)[W]) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (operand<Is, Fn, detail::tuple_element_t<Is, detail::tuple<K...>>>(detail::get<Is>(n.kids), r, g, lanes), ...);
    }(std::index_sequence_for<K...>{});
  }

 private:
  // The adjoint reaching operand I, lane by lane, then pushed down its subtree.
  template <std::size_t I, class Fn, class Kid, class V, class... Kids, class G>
  static void operand(Kid const& kid, math_lanes<Fn, V, Kids...> const& r, G const& g, Fr (&lanes)[W]) {
    if constexpr (active<Kid>) {
      using KV = value_t<Kid>;
      eval::lane_array<KV, W> gk;
      [&]<std::size_t... Js>(std::index_sequence<Js...>) {
        CTG_LANE_LOOP(int k = 0; k < W; ++k) {
          gk.at[k] = operand_adjoint<int(I), Fn, true, KV>(g[k], value_at(detail::get<Js>(r.kids), k)...);
        }
      }(std::index_sequence_for<Kids...>{});
      backprop(kid, detail::get<I>(r.kids), gk, lanes);
    }
  }
};

// One statement of W iterations' adjoints, each on its own frame (R is the
// plan's reverse evaluator). As eval::interleaved: loops with invariant
// bounds, blocks, lets and funcs step the lanes together, any other
// statement runs whole on each frame in turn.
template <class R, int W>
struct interleaved_reverse {
  using mode = typename R::mode;

  // ---- the recompute ------------------------------------------------------------------------
  template <mode M, class N, class Fr>
  static void recompute(N const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) R::template forward_stmt<M>(n, lanes[k]);
  }
  // An arithmetic local assigned an operation: lane by lane, as the forward pass.
  template <mode M, int Site, int S, class T, class E, class Fr>
  static void recompute(node<op::assign<Site>, node<op::local<S, T>>, E> const& n, Fr (&lanes)[W]) {
    if constexpr (!R::needed(S)) {
    } else if constexpr (std::is_arithmetic_v<T> && eval::lane_statement_v<E>) {
      if constexpr (M == mode::recompute)
        for (int k = 0; k < W; ++k) R::template save_assigned<Site, node<op::local<S, T>>>(lanes[k]);
      eval::interleaved<W>::eval(n, lanes);
    } else {
      for (int k = 0; k < W; ++k) R::template forward_stmt<M>(n, lanes[k]);
    }
  }
  template <mode M, class... S, class Fr>
  static void recompute(node<op::block, S...> const& n, Fr (&lanes)[W]) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (recompute<M>(detail::get<Is>(n.kids), lanes), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <mode M, class Name, class K, class Fr>
  static void recompute(node<op::func_scope<Name>, K> const& n, Fr (&lanes)[W]) {
    recompute<M>(kid<0>(n), lanes);
  }
  template <mode M, int... S, class... K, class Fr>
  static void recompute(node<op::let<S...>, K...> const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) R::init_let(n, lanes[k]);
    recompute<M>(detail::get<sizeof...(S)>(n.kids), lanes);
  }
  template <mode M, loop_kind LK, int L, int A, int Site, class... K, class Fr>
  static void recompute(node<op::loop<LK, L, A, Site>, K...> const& n, Fr (&lanes)[W]) {
    using N = node<op::loop<LK, L, A, Site>, K...>;
    if constexpr (!eval::interleave_walk<N>::invariant_bounds) {
      for (int k = 0; k < W; ++k) R::template forward_stmt<M>(n, lanes[k]);
    } else {
      using Body = std::remove_cvref_t<decltype(detail::get<2 * A>(n.kids))>;
      auto const& body = detail::get<2 * A>(n.kids);
      int lo[A], hi[A];
      eval::forward::bounds(n, lanes[0], lo, hi);  // the same on every frame
      if constexpr (M == mode::recompute)
        for (int k = 0; k < W; ++k) R::template save_bounds<Site>(lo, hi, lanes[k]);
      eval::forward::template iterate<L, A>(lo, hi, lanes[0], [&] {
        share_indices<L, A>(lanes);
        if constexpr (M == mode::recompute)
          for (int k = 0; k < W; ++k) R::template push_carried<Body, Site>(lanes[k]);
        recompute<mode::plain>(body, lanes);
      });
    }
  }

  // ---- the sweep ----------------------------------------------------------------------------
  template <class N, class Fr>
  static void sweep(N const& n, Fr (&lanes)[W]) {
    for (int k = 0; k < W; ++k) R::rev(n, lanes[k]);
  }
  // An arithmetic local assigned an operation: its adjoint lane by lane (lane_reverse).
  template <int Site, class L, class E, class Fr>
  static void sweep(node<op::assign<Site>, L, E> const& n, Fr (&lanes)[W]) {
    constexpr int slot = eval::assigned_local<L>::slot;
    using T = typename eval::assigned_local<L>::type;
    if constexpr (std::is_same_v<L, node<op::local<slot, T>>> && std::is_arithmetic_v<T> && is_differentiable_v<T> &&
                  R::active_slot(slot) && R::template active<E> && R::assignment_read(Site) &&
                  eval::lane_statement_v<E>) {
      using lane = lane_reverse<R, W, Fr>;
      using G = value_t<E>;
      // A lane whose local no read reached passes nothing on (ad_frame's
      // `reached`): such a group of lanes runs one lane at a time.
      bool all_reached = true;
      for (int k = 0; k < W; ++k) all_reached = all_reached && was_reached<slot>(lanes[k]);
      if (!all_reached) {
        for (int k = 0; k < W; ++k) R::rev(n, lanes[k]);
        return;
      }
      // As R::rev: the local's old value back, its adjoint taken.
      if constexpr (R::needed(slot))
        for (int k = 0; k < W; ++k) detail::get<slot>(lanes[k].locals) = detail::get<Site>(lanes[k].locals);
      auto const g = eval::lanes_of<G, W>([&](int k) {
        auto& a = detail::get<slot>(lanes[k].adj);
        G const taken = convert<G>(a);
        a = zero<T>();
        take_reached<slot>(lanes[k]);
        return taken;
      });
      lane::backprop(kid<1>(n), lane::template record<false>(kid<1>(n), lanes), g, lanes);
    } else {
      for (int k = 0; k < W; ++k) R::rev(n, lanes[k]);
    }
  }
  template <class... S, class Fr>
  static void sweep(node<op::block, S...> const& n, Fr (&lanes)[W]) {
    constexpr std::size_t count = sizeof...(S);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (sweep(detail::get<count - 1 - Is>(n.kids), lanes), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <class Name, class K, class Fr>
  static void sweep(node<op::func_scope<Name>, K> const& n, Fr (&lanes)[W]) {
    sweep(kid<0>(n), lanes);
  }
  template <int... S, class... K, class Fr>
  static void sweep(node<op::let<S...>, K...> const& n, Fr (&lanes)[W]) {
    sweep(detail::get<sizeof...(S)>(n.kids), lanes);
    for (int k = 0; k < W; ++k) R::rev_let_inits(n, lanes[k]);
  }
  template <loop_kind LK, int L, int A, int Site, class... K, class Fr>
  static void sweep(node<op::loop<LK, L, A, Site>, K...> const& n, Fr (&lanes)[W]) {
    using N = node<op::loop<LK, L, A, Site>, K...>;
    if constexpr (!eval::interleave_walk<N>::invariant_bounds) {
      for (int k = 0; k < W; ++k) R::rev(n, lanes[k]);
    } else {
      using Body = std::remove_cvref_t<decltype(detail::get<2 * A>(n.kids))>;
      auto const& body = detail::get<2 * A>(n.kids);
      auto const& saved = detail::get<Site>(lanes[0].locals);  // the same on every frame
      int lo[A], hi[A];
      for (int a = 0; a < A; ++a) lo[a] = saved.lo[a], hi[a] = saved.hi[a];
      R::template iterate_backwards<L, A>(lo, hi, lanes[0], [&] {
        share_indices<L, A>(lanes);
        for (int k = 0; k < W; ++k) R::template pop_carried<Body>(lanes[k]);
        recompute_iteration(body, lanes);
        sweep(body, lanes);
      });
    }
  }

  // R::recompute_iteration's steps, each on every lane.
  template <class Body, class Fr>
  static void recompute_iteration(Body const& body, Fr (&lanes)[W]) {
    R::recompute_steps(
        body, [&](auto const& s) { recompute<mode::recompute>(s, lanes); },
        [&](auto const& final_assignment) {
          for (int k = 0; k < W; ++k) R::save_final(final_assignment, lanes[k]);
        });
  }

  // One group of iterations, as R::run_body runs one.
  template <class Body, class Fr>
  static void run_body(Body const& body, Fr (&lanes)[W]) {
    recompute<mode::recompute>(body, lanes);
    for (int k = 0; k < W; ++k)
      if (lanes[k].stack.overflowed()) return;
    sweep(body, lanes);
  }

 private:
  template <int L, int A, class Fr>
  static void share_indices(Fr (&lanes)[W]) {
    for (int k = 1; k < W; ++k)
      for (int a = 0; a < A; ++a) lanes[k].idx[L][a] = lanes[0].idx[L][a];
  }
};

}  // namespace ctg::ad
