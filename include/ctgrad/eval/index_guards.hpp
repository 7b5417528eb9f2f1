// Index guards: conditions that compare the index of a 1-D offload with a
// value fixed for the whole launch (`i > 0`, `i < n - 1`, `lo <= i && i < hi`),
// the way stencils keep their neighbours in range. Each is true on one
// interval of indices, so a chunk of iterations splits into edges, where the
// guards are evaluated, and an interior where all of them hold: there a
// select on a guard is its first operand and an if_ its first arm, with no
// test, and the loop has no control flow left to stop the compiler from
// vectorising it (cpu::run_chunk: the forward pass; cpu::run_gather_chunk:
// the gather adjoint, ad/gather.hpp, whose replays of iterations inside the
// guards' interval skip the tests too).
#pragma once
#include <type_traits>

#include "../analysis/invariance.hpp"
#include "../ir/math.hpp"
#include "../ir/node.hpp"

namespace ctg::eval {

// A bound a guard may compare the index with: the same in every iteration
// (analysis/invariance.hpp) and of a signed integer type (with an unsigned
// one, C++ would compare a negative index as a large number).
template <class X>
inline constexpr bool guard_bound_v = analysis::invariant_v<X> && std::is_integral_v<ir::value_t<X>> &&
                                      std::is_signed_v<ir::value_t<X>>;

using chunk_index = ir::node<ir::op::loop_index<0, 0>>;

// The order comparisons, and each one's mirror (x < i is i > x): a guard
// with the bound on the left is read as its mirror.
template <class Fn>
struct mirrored_order {};
template <>
struct mirrored_order<ir::fn::lt> {
  using type = ir::fn::gt;
};
template <>
struct mirrored_order<ir::fn::le> {
  using type = ir::fn::ge;
};
template <>
struct mirrored_order<ir::fn::gt> {
  using type = ir::fn::lt;
};
template <>
struct mirrored_order<ir::fn::ge> {
  using type = ir::fn::le;
};
template <class Fn>
inline constexpr bool is_order_v = requires { typename mirrored_order<Fn>::type; };

template <class C>
struct index_guard : std::false_type {};
template <class Fn, class X>
  requires(is_order_v<Fn>)
struct index_guard<ir::node<ir::op::math<Fn>, chunk_index, X>> : std::bool_constant<guard_bound_v<X>> {};
template <class Fn, class X>
  requires(is_order_v<Fn> && !std::is_same_v<X, chunk_index>)
struct index_guard<ir::node<ir::op::math<Fn>, X, chunk_index>> : std::bool_constant<guard_bound_v<X>> {};
template <class A, class B>
struct index_guard<ir::node<ir::op::math<ir::fn::logical_and>, A, B>>
    : std::bool_constant<index_guard<A>::value && index_guard<B>::value> {};

// The choices a guard can decide: a select (value) and an if_ (statement),
// condition first.
template <class Op>
struct is_guarded_choice : std::false_type {};
template <>
struct is_guarded_choice<ir::op::select> : std::true_type {};
template <int Site>
struct is_guarded_choice<ir::op::if_<Site>> : std::true_type {};

// Whether E holds a select or an if_ whose condition is an index guard.
template <class E>
struct has_index_guard : std::false_type {};
template <class Op, class... K>
struct has_index_guard<ir::node<Op, K...>> : std::bool_constant<(has_index_guard<K>::value || ...)> {};
template <class Op, class C, class A, class B>
  requires(is_guarded_choice<Op>::value)
struct has_index_guard<ir::node<Op, C, A, B>>
    : std::bool_constant<index_guard<C>::value || has_index_guard<C>::value || has_index_guard<A>::value ||
                         has_index_guard<B>::value> {};

// Whether a body of an offload over Axes axes splits at its index guards:
// 1-D, with a guard (no other body instantiates a second, interior copy).
template <int Axes, class Body>
inline constexpr bool splits_at_guards_v = Axes == 1 && has_index_guard<Body>::value;

// Whether a frame type is one that runs the interior of a chunk, where every
// index guard holds.
template <class Fr>
inline constexpr bool guards_hold_v = [] {
  if constexpr (requires { Fr::index_guards_hold; })
    return Fr::index_guards_hold;
  else
    return false;
}();

// Whether condition C is known true on frame type Fr without evaluating it:
// an index guard, in the interior of a chunk. The one test every evaluator
// (forward, the reverse pass's recompute and sweep) asks of a select or if_.
template <class Fr, class C>
inline constexpr bool guard_known_true_v = guards_hold_v<Fr> && index_guard<C>::value;

// A frame for the interior of a chunk: the same state, and the knowledge
// that every index guard holds.
template <class Frame>
struct interior_frame : Frame {
  static constexpr bool index_guards_hold = true;
};

}  // namespace ctg::eval
