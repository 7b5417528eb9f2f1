// Invariance over a kernel's loops. An expression that reads no loop index,
// no local and no field element has the same value in every iteration of
// every loop of the offload it sits in. This is the one definition: the
// adjoint reads it (stores whose indices are invariant, shifts `i + c` whose
// iterations own distinct elements), and the checks refine it to the
// integer arithmetic they can evaluate (check/verdict.hpp).
#pragma once
#include "../ir/node.hpp"

namespace ctg::analysis {

// Ops whose value changes from one iteration to the next.
template <class Op>
inline constexpr bool varies_per_iteration_op =
    ir::is_local_op<Op> || ir::is_access_op<Op> || ir::is_loop_index_op<Op>;

template <class E>
inline constexpr bool invariant_v = false;
template <class Op, class... K>
inline constexpr bool invariant_v<ir::node<Op, K...>> = !varies_per_iteration_op<Op> && (invariant_v<K> && ...);

}  // namespace ctg::analysis
