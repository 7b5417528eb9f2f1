// Everything the adjoint of one offload needs at compile time, in one place:
// the analysis of its body, the gradient-accumulation policy, the frame type,
// and the evaluator. Backends instantiate this and only decide where the
// iterations run.
#pragma once
#include "../eval/slots.hpp"
#include "activity.hpp"
#include "reverse.hpp"
#include "sizing.hpp"

namespace ctg::ad {

// Whether every iteration of the parallel loop provably owns the elements it
// touches in field I: accumulation into I (its values in the forward pass, its
// gradient in the reverse pass) is then a plain add.
//
// Failing that, whether field I is banded: iterations touch a common element
// of it only when they are near each other (a stencil, u[i - 1] and u[i + 1],
// banded_slots). A host backend runs contiguous chunks of iterations on one
// thread each; an iteration further than the chunk margin from its chunk's
// edges shares no element of a banded field with any other chunk, so its
// accumulations are plain adds, and only those near an edge are atomic
// (eval::frame::near_chunk_edge).
// BodyName names the body (ir::named_t), for the names of the members, as
// body_analysis's RootName does.
template <class BodyName, int Axes, bool Parallel>
struct body_ownership {
  using Body = ir::named_t<BodyName>;
  static constexpr int axes = Axes;
  // The adjoint runs iterations, not the gather sweeps of ad/gather.hpp.
  static constexpr bool gathering = false;
  // Whether the stores into field I may write one element in two
  // iterations: I is stored, and its writes (stores and accumulations) do
  // not all hold, for each axis, one common shift `i + c` of that axis's
  // index (owns_slots), so the types cannot tell (an index read from a
  // field, a product, a nested loop's index, or two stores y[i] and
  // y[i + 1] of which the checks judge neither, one being under an if_).
  // Then the adjoint's stores and accumulations of I claim their elements
  // for their iterations (eval/store_claims.hpp, reverse::claim_written).
  template <int I>
  static constexpr bool claims = [] {
    if constexpr (!Parallel)
      return false;
    else
      return writes_of<I, Body>::stores && !owns_slots<Axes, typename writes_of<I, Body>::type>::value;
  }();
  // Whether iterations that store values without a gradient into one
  // element of such a field may share it: only where the offload never
  // reads the field, since a read of an element another iteration resets
  // sees the reset or not by their order (CTG-AD-002 lets a read and a
  // store at one index expression pass, counting on the stores' race being
  // caught).
  template <int I>
  static constexpr bool resets_share = [] {
    if constexpr (!claims<I>)
      return false;
    else
      return accesses_of<I, Body>::type::size == writes_of<I, Body>::type::size;
  }();
  template <int I>
  static constexpr bool owned = Parallel && owns_slots<Axes, typename accesses_of<I, Body>::type>::value;
  template <int I>
  using bands = banded_slots<Axes, typename accesses_of<I, Body>::type>;
  template <int I>
  static constexpr bool banded = Parallel && !owned<I> && bands<I>::value;
  template <int Params>
  static constexpr bool any_banded = []<int... Is>(std::integer_sequence<int, Is...>) {
    return (banded<Is> || ...);
  }(std::make_integer_sequence<int, Params>{});

  // Neither owned nor banded, field I may still be scattered into through
  // private copies, one per thread, summed into it after the launch
  // (cpu::run_offload): in the forward pass when the offload only adds into
  // its values (every access of I is the target of a += or -=), in the
  // reverse pass when the offload only reads them (its adjoint then only
  // adds into I's gradient).
  // (Each walk only where the cheaper tests leave the question open.)
  template <int I>
  static constexpr bool only_accumulated = [] {
    if constexpr (!Parallel || owned<I> || banded<I> || accesses_of<I, Body>::type::size == 0)
      return false;
    else
      return int(accesses_of<I, Body>::type::size) == accumulations_into<I, Body>::value;
  }();
  template <int I>
  static constexpr bool only_read = [] {
    if constexpr (!Parallel || owned<I> || banded<I> || accesses_of<I, Body>::type::size == 0)
      return false;
    else
      return writes_into<I, Body>::value == 0;
  }();

  // The chunk margin, in iterations of the row-major box [lo, hi) (Axes
  // bounds each): the largest distance between two iterations that may touch
  // a common element of a banded field, from the spread of the shifts'
  // values (invariants, evaluated once in `host`, a frame holding the
  // launch's arguments). 0 when no field is banded.
  template <int Params, class Fr>
  static long long chunk_margin(Body const& body, Fr& host, int const* lo, int const* hi) {
    if constexpr (!any_banded<Params>) {
      return 0;
    } else {
      spread<Params> s{};
      collect(body, host, s);
      long long margin = 0, stride = 1;
      for (int a = Axes - 1; a >= 0; --a) {
        long long reach = 0;
        for (int i = 0; i < Params; ++i)
          if (s.seen[i] && s.hi[i][a] - s.lo[i][a] > reach) reach = s.hi[i][a] - s.lo[i][a];
        margin += reach * stride;
        stride *= hi[a] > lo[a] ? hi[a] - lo[a] : 0;
      }
      return margin;
    }
  }

 private:
  template <int Params>
  struct spread {
    long long lo[Params][Axes > 0 ? Axes : 1];
    long long hi[Params][Axes > 0 ? Axes : 1];
    bool seen[Params] = {};
  };
  template <int Params, class Fr, class Op, class... K>
  static void collect(node<Op, K...> const& n, Fr& host, spread<Params>& s) {
    if constexpr (is_access_op<Op>) {
      constexpr int I = Op::param;
      if constexpr (banded<I>) {
        bool const first = !s.seen[I];
        s.seen[I] = true;
        for (int a = 0; a < Axes; ++a) {
          long long const c = [&]<std::size_t... Ps>(std::index_sequence<Ps...>) {
            long long v = 0;
            ((int(Ps) == bands<I>::position[std::size_t(a)] ? (v = index_shift(detail::get<Ps>(n.kids), host)) : 0), ...);
            return v;
          }(std::index_sequence_for<K...>{});
          if (first || c < s.lo[I][a]) s.lo[I][a] = c;
          if (first || c > s.hi[I][a]) s.hi[I][a] = c;
        }
      }
    }
    if constexpr (sizeof...(K) > 0)
      [&]<std::size_t... Ks>(std::index_sequence<Ks...>) { (collect(detail::get<Ks>(n.kids), host, s), ...); }(
          std::index_sequence_for<K...>{});
  }
};

// The policy under the name a plan gives the body (ir::body_name_t), which
// frames carry into every per-node function's name.
template <class BodyName, int Axes, bool Parallel>
struct slot_ownership : body_ownership<BodyName, Axes, Parallel> {};

// WithPrimal: the reverse sweep also writes what the forward pass writes
// (ad/fusion.hpp decides when that is valid), so one launch gives the values
// and the gradients.
template <class Args, class Offload, int Slots, bool WithPrimal = false>
struct reverse_plan {
  using parts = ir::offload_traits<Offload>;
  using body = typename parts::body;
  using body_name = ir::body_name_t<Offload>;
  using analysis = body_analysis<body_name, Slots, WithPrimal>;
  using policy = slot_ownership<body_name, parts::axes, parts::parallel>;
  using ownership = policy;
  static constexpr bool banded = policy::template any_banded<int(Args::size)>;
  // Fields only read: their gradients are only added into, through
  // per-thread copies when scattered (cpu::run_offload).
  template <int I>
  static constexpr bool privatizable = policy::template only_read<I>;
  static constexpr ir::buffer private_buffer = ir::buffer::grad;
  using evaluator = reverse<analysis, policy, WithPrimal>;
  using shape = eval::loop_shape<Offload>;
  using locals = typename eval::slot_storage<body, Slots>::type;
  using adjoints = typename adjoint_storage<locals>::type;
  // Fixed elements that the body only accumulates into (eval/reduction.hpp):
  // nothing in this offload's reverse pass writes their gradient, so each
  // thread reads it once into its frame instead of once per iteration (and,
  // with the primal values, sums its additions to their values privately).
  using seeds = eval::privatized_t<body>;
  template <bool Parallel>
  using frame = std::conditional_t<
      Parallel && seeds::size != 0,
      std::conditional_t<
          WithPrimal,
          eval::primal_reduction_frame<
              eval::reduction_frame<ad_frame<Args, locals, adjoints, shape::levels, shape::axes, true>, seeds>>,
          eval::reduction_frame<ad_frame<Args, locals, adjoints, shape::levels, shape::axes, true>, seeds>>,
      ad_frame<Args, locals, adjoints, shape::levels, shape::axes, Parallel>>;
  static constexpr stack_demand_info demand = stack_demand_of<evaluator, body>(parts::body_level);
  using capacity = capacity_walk<evaluator, locals, Args, shape::levels, shape::axes>;
};

}  // namespace ctg::ad
