// Invariance over a kernel's loops. An expression that reads no loop index,
// no local and no field element has the same value in every iteration of
// every loop of the offload it sits in. This is the one definition: the
// adjoint reads it (stores whose indices are invariant, shifts `i + c` whose
// iterations own distinct elements), and the checks refine it to the
// integer arithmetic they can evaluate (check/verdict.hpp).
#pragma once
#include <type_traits>

#include "../ir/node.hpp"

namespace ctg::analysis {

// Ops whose value changes from one iteration to the next.
template <class Op>
inline constexpr bool varies_per_iteration_op =
    ir::is_local_op<Op> || ir::is_access_op<Op> || ir::is_loop_index_op<Op>;

// Invariant over one launch, given Stable, the field parameters whose
// elements the launch does not change (bit i: parameter i; ir::param_bit):
// an element of an integer field in Stable at invariant indices counts too
// (a step kept in a field, `x(step() + 1, i)`). Only the launcher can say
// which fields those are, and that the host can read them (eval/rows.hpp).
template <class E, unsigned long long Stable>
inline constexpr bool launch_invariant_v = false;
template <class Op, class... K, unsigned long long Stable>
inline constexpr bool launch_invariant_v<ir::node<Op, K...>, Stable> =
    !varies_per_iteration_op<Op> && (launch_invariant_v<K, Stable> && ...);
template <int I, class T, int R, bool G, bool D, class... K, unsigned long long Stable>
inline constexpr bool launch_invariant_v<ir::node<ir::op::access<I, T, R, G, D, ir::buffer::primal>, K...>, Stable> =
    std::is_integral_v<T> && (Stable & ir::param_bit(I)) != 0 && (launch_invariant_v<K, Stable> && ...);

// Invariant over every loop: no field element at all.
template <class E>
inline constexpr bool invariant_v = launch_invariant_v<E, 0>;

}  // namespace ctg::analysis
