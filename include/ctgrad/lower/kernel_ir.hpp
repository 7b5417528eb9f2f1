// From a kernel lambda and its argument types to the offloads a backend runs.
#pragma once
#include <type_traits>

#include "../field.hpp"
#include "normalize.hpp"

namespace ctg::ir {

// How a kernel argument appears inside the kernel (handle) and what the
// launcher passes to the evaluators for it (bound).
template <int I, class A>
struct arg_traits {
  static_assert(detail::dependent_false<A>,
                "CTG-LAUNCH-001 unsupported kernel argument: pass ctg::field objects, "
                "arithmetic scalars (int, float, double, ...) and fixed-size Eigen matrices");
};
template <int I, class T, int R, flags F>
struct arg_traits<I, field<T, R, F>> {
  using handle_type = field_handle<I, T, R, has_flag(F, flags::grad), has_flag(F, flags::dual)>;
  static handle_type handle(field<T, R, F> const&) { return {}; }
  using bound = typename field<T, R, F>::view_type;
  static bound bind(field<T, R, F> const& f) { return f.view(); }
};
// Scalars reach the kernel lambda as their values: the lambda may declare the
// parameter `int n` or `auto n`, and the value becomes part of the IR built for
// this launch (a plain number in expressions, a known bound for loops).
template <int I, class T>
  requires(std::is_arithmetic_v<T> || is_eigen_fixed_v<T>)
struct arg_traits<I, T> {
  static T handle(T v) { return v; }
  using bound = T;
  static bound bind(T v) { return v; }
};

template <class Offloads, int Slots>
struct kernel_ir {
  Offloads offloads;
  static constexpr int slots = Slots;
};

// Calls the kernel lambda with symbolic handles and lowers what it returns.
template <class F, class... H>
constexpr auto build_kernel_ir(F const& body, H const&... handles) {
  if constexpr (std::is_void_v<decltype(body(handles...))>) {
    static_assert(detail::dependent_false<F>,
                  "CTG-EXPR-010 a kernel lambda returns nothing (a missing return?): it must return a statement, "
                  "a loop, a store, a block(...), a let(...), ...");
    // An empty kernel in its place, so that no second error follows.
    return build_kernel_ir([](auto const&...) { return node<op::block>{}; }, handles...);
  } else {
    auto top = body(handles...);
    static_assert(dsl_statement<decltype(top)>,
                  "CTG-EXPR-010 a kernel lambda must return a statement: a loop, a store, a "
                  "block(...), a let(...), ...");
    note_taken(top);
    auto l = lower(lower_ctx<0, 0>{}, top);
    auto offloads = split_offloads(hoist(l.ir));
    return kernel_ir<decltype(offloads), decltype(l)::next_slot>{offloads};
  }
}

}  // namespace ctg::ir
