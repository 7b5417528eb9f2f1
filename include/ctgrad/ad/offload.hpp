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
template <class Body, int Axes, bool Parallel>
struct slot_ownership {
  template <int I>
  static constexpr bool owned = Parallel && owns_slots<Axes, typename accesses_of<I, Body>::type>::value;
};

template <class Args, class Offload, int Slots>
struct reverse_plan {
  using parts = ir::offload_traits<Offload>;
  using body = typename parts::body;
  using analysis = offload_analysis<body, Slots>;
  using policy = slot_ownership<body, parts::axes, parts::parallel>;
  using evaluator = reverse<analysis, policy>;
  using shape = eval::loop_shape<Offload>;
  using locals = typename eval::slot_storage<body, Slots>::type;
  using adjoints = typename adjoint_storage<locals>::type;
  // Fixed elements that the body only accumulates into (eval/reduction.hpp):
  // nothing in this offload's reverse pass writes their gradient, so each
  // thread reads it once into its frame instead of once per iteration.
  using seeds = eval::privatized_t<body>;
  template <bool Parallel>
  using frame = std::conditional_t<
      Parallel && seeds::size != 0,
      eval::reduction_frame<ad_frame<Args, locals, adjoints, shape::levels, shape::axes, true>, seeds>,
      ad_frame<Args, locals, adjoints, shape::levels, shape::axes, Parallel>>;
  static constexpr stack_demand_info demand = stack_demand_of<evaluator, body>(parts::body_level);
  using capacity = capacity_walk<evaluator, locals, Args, shape::levels, shape::axes>;
};

}  // namespace ctg::ad
