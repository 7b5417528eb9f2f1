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
