// When one sweep can give both a kernel's values and its gradients
// (k.value_and_grad). The reverse pass already recomputes, iteration by
// iteration, every value the forward pass computes; it can also write them
// (reverse_plan with WithPrimal) provided that the result is what the forward
// launch followed by the adjoint gives:
// - no value the kernel computes reads a field the kernel writes, so every
//   recomputation sees the same inputs whether other iterations and
//   offloads have written their outputs yet or not;
// - a field written by a store is written by that one statement, outside
//   inner loops: the sweep visits statements last to first, and only sums
//   do not mind the order;
// - the forward pass would not scatter any of its sums through per-thread
//   copies (cpu::private_scatter): the sweep would add them atomically, and
//   two launches are then faster than one.
#pragma once
#include "offload.hpp"

namespace ctg::ad {

// The field parameters whose values a subtree's computations read: every
// access but the element a store or an accumulation writes (whose indices
// are read).
template <class N>
inline constexpr unsigned long long computed_from_v = 0;
template <class L>
inline constexpr unsigned long long target_index_reads_v = 0;
template <class Op, class... K>
inline constexpr unsigned long long computed_from_v<node<Op, K...>> =
    ir::access_param_bit<Op> | (computed_from_v<K> | ... | 0ull);
template <class Op, class... I>
  requires is_access_op<Op>
inline constexpr unsigned long long target_index_reads_v<node<Op, I...>> = (computed_from_v<I> | ... | 0ull);
template <class V, class... I>
inline constexpr unsigned long long target_index_reads_v<node<op::component, V, I...>> =
    target_index_reads_v<V> | (computed_from_v<I> | ... | 0ull);
template <class L, class E>
inline constexpr unsigned long long computed_from_v<node<op::store, L, E>> =
    target_index_reads_v<L> | computed_from_v<E>;
template <atomic_kind K, class L, class E>
inline constexpr unsigned long long computed_from_v<node<op::atomic<K>, L, E>> =
    target_index_reads_v<L> | computed_from_v<E>;

// The fields a subtree stores into, accumulates into, and stores into where
// the order of the statements would decide the value left (`repeated`: a
// second write statement after a store, or a store inside an inner loop).
struct primal_write_sets {
  unsigned long long stored = 0, accumulated = 0, repeated = 0;
  // This, then `next`.
  constexpr primal_write_sets then(primal_write_sets next) const {
    return {stored | next.stored, accumulated | next.accumulated,
            repeated | next.repeated | (stored & (next.stored | next.accumulated)) | (accumulated & next.stored)};
  }
  // This or `other` (the arms of an if_).
  constexpr primal_write_sets either(primal_write_sets other) const {
    return {stored | other.stored, accumulated | other.accumulated, repeated | other.repeated};
  }
};

template <class N>
struct primal_writes_of {
  static constexpr primal_write_sets get(bool) { return {}; }
};
template <class Op, class... K>
struct primal_writes_of<node<Op, K...>> {
  static constexpr primal_write_sets get(bool in_loop) {
    using kids = detail::tuple<K...>;
    if constexpr (is_store_op<Op> || is_atomic_op<Op>) {
      constexpr unsigned long long bit =
          ir::param_bit(written_access<detail::tuple_element_t<0, kids>>::type::op_type::param);
      if constexpr (is_store_op<Op>)
        return {bit, 0, in_loop ? bit : 0};
      else
        return {0, bit, 0};
    } else if constexpr (is_if_op<Op>) {
      return primal_writes_of<detail::tuple_element_t<1, kids>>::get(in_loop).either(
          primal_writes_of<detail::tuple_element_t<2, kids>>::get(in_loop));
    } else {
      bool const inner = in_loop || is_loop_op<Op> || is_while_op<Op>;
      primal_write_sets w{};
      ((w = w.then(primal_writes_of<K>::get(inner))), ...);
      return w;
    }
  }
};

// What one offload contributes to the decision. Offload: the name a launch
// gives it (ir::keyed_offload), whose policy the reverse plan shares.
template <class Args, class Offload>
struct offload_fusion {
  using parts = ir::offload_traits<Offload>;
  using body = typename parts::body;
  static constexpr unsigned long long computed_from = computed_from_v<typename parts::root>;
  static constexpr primal_write_sets writes = primal_writes_of<body>::get(false);
  using policy = slot_ownership<ir::body_name_t<Offload>, parts::axes, parts::parallel>;
  using seeds = eval::privatized_t<body>;
  template <int I>
  static constexpr bool scattered_privately() {
    if constexpr ((writes.accumulated & ir::param_bit(I)) == 0 || !policy::template only_accumulated<I>)
      return false;
    else
      return ![]<class... L>(detail::type_list<L...>*) {
        return ((L::op_type::param == I) || ...);
      }(static_cast<seeds*>(nullptr));
  }
  static constexpr bool any_scattered_privately = []<int... Is>(std::integer_sequence<int, Is...>) {
    return (scattered_privately<Is>() || ...);
  }(std::make_integer_sequence<int, int(Args::size)>{});
};

// Key names the kernel's IR as check::kernel_checks's does: Key::offloads,
// Key::offload<K>.
template <class Args, class Key, class Positions = std::make_integer_sequence<int, int(Key::offloads::size)>>
struct value_and_gradient_fusion;
template <class Args, class Key, int... Ks>
struct value_and_gradient_fusion<Args, Key, std::integer_sequence<int, Ks...>> {
  template <int K>
  using at = offload_fusion<Args, typename Key::template offload<K>>;
  static constexpr primal_write_sets writes = [] {
    primal_write_sets w{};
    ((w = w.then(at<Ks>::writes)), ...);
    return w;
  }();
  static constexpr unsigned long long computed_from = (at<Ks>::computed_from | ... | 0ull);
  static constexpr bool valid = ((writes.stored | writes.accumulated) & computed_from) == 0 && writes.repeated == 0 &&
                                !(at<Ks>::any_scattered_privately || ...);
};

}  // namespace ctg::ad
