// Mistakes in a kernel body that only the body's types show (a field indexed
// with the wrong number of indices), carried to the launch.
//
// A static_assert where the mistake is made fires deep inside the body's
// instantiation: lowering calls the lambda from the launch through a dozen
// templates, and every compiler prints each of them before the message (16
// lines on g++, 33 on clang). Instead, the builder leaves a stand-in element
// whose first index sits in a func scope named by a misuse type; every pass
// sees an ordinary func call there, and the launch finds the misuse in the
// built IR's type and raises it as one error at the launch line, naming the
// kernel and the field parameter like the gradient findings
// (check/diagnostics.hpp).
#pragma once
#include <string_view>
#include <type_traits>

#include "../detail/meta.hpp"
#include "node.hpp"

namespace ctg::ir {

enum class misuse_kind {
  index_count,     // f(i, ...) with another number of indices than the field's rank
  subscript_rank,  // f[i] on a field of rank > 1
  missing_return,  // a loop body that returns nothing (Param -1: no field)
};

// The name of the func scope that marks a misuse: Param is the kernel
// parameter, Rank the field's rank, Given the number of indices written.
template <misuse_kind Kind, int Param, int Rank, int Given>
struct misuse {
  static constexpr misuse_kind kind = Kind;
  static constexpr int param = Param;
  // A func scope's name, as the passes that print func chains read it: none.
  constexpr char const* c_str() const { return ""; }
  constexpr std::string_view view() const { return {}; }
};

// The first misuse in a type built of type-only templates (the tuple of
// offloads, their nodes), or void.
template <class T>
struct first_misuse {
  using type = void;
};
template <misuse_kind K, int P, int R, int G>
struct first_misuse<op::func_scope<misuse<K, P, R, G>>> {
  using type = misuse<K, P, R, G>;
};
template <template <class...> class C, class... Ts>
struct first_misuse<C<Ts...>> {
  using type = typename ::ctg::detail::first_non_void<typename first_misuse<Ts>::type...>::type;
};
template <class T>
using first_misuse_t = typename first_misuse<T>::type;

}  // namespace ctg::ir
