// Custom gradients: a functor with a hand-written backward, callable in
// kernels like a math function.
//
//   struct soft_abs {
//     float eps;
//     template <class T> CTG_HOST_DEVICE T forward(T x) const { return sqrt(x * x + eps); }
//     template <class T> CTG_HOST_DEVICE T backward(T x, T g) const { return g * x / sqrt(x * x + eps); }
//     template <class T> CTG_HOST_DEVICE T tangent(T x, T dx) const { return dx * x / sqrt(x * x + eps); }
//   };
//   auto f = ctg::custom_gradient<"soft_abs">(soft_abs{1e-6f});
//   ... y[i] = f(x[i]) ...
//
// backward receives the operand values and the result's adjoint and returns
// the operands' adjoints (one value, or ctg::gradients(ga, gb, ...) for
// several operands); tangent, needed only for k.fwd, receives the values and
// their tangents. The functor is stored in the kernel's IR, so it must be
// trivially copyable, and its members CTG_HOST_DEVICE to run on a GPU.
#pragma once
#include <type_traits>

#include "../detail/tuple.hpp"
#include "expr.hpp"

namespace ctg {

// Several operand adjoints returned by a custom backward.
template <class... G>
CTG_HOST_DEVICE constexpr auto gradients(G const&... g) {
  return detail::make_tuple(g...);
}

namespace ir {
namespace op {
// A call of a custom-gradient functor F named N; Kids are the operands.
template <class N, class F>
struct custom {
  static constexpr N name{};
  F fn;
};
}  // namespace op

template <class Op>
inline constexpr bool is_custom_op = false;
template <class N, class F>
inline constexpr bool is_custom_op<op::custom<N, F>> = true;

template <class N, class F, class... K>
struct value_of<node<op::custom<N, F>, K...>> {
  using type = std::remove_cvref_t<decltype(std::declval<F const&>().forward(std::declval<value_t<K>>()...))>;
};

template <detail::fixed_string Name, class F>
struct custom_t {
  static_assert(std::is_trivially_copyable_v<F>,
                "CTG-EXPR-014 a custom-gradient functor is stored in the kernel's IR and must be trivially copyable");
  F fn;
  template <dsl_operand... A>
  [[nodiscard]] constexpr auto operator()(A const&... a) const {
    return node<op::custom<func_name<Name>, F>, as_expr_t<A>...>{{fn}, {{{as_expr(a)}...}}};
  }
};

}  // namespace ir

// ctg::custom_gradient<"name">(functor): see the top of this header.
template <detail::fixed_string Name, class F>
[[nodiscard]] constexpr auto custom_gradient(F fn) {
  return ir::custom_t<Name, F>{fn};
}

}  // namespace ctg
