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
#include "statement_trace.hpp"

namespace ctg::ir {

enum class misuse_kind {
  index_count,     // f(i, ...) with another number of indices than the field's rank
  subscript_rank,  // f[i] on a field of rank > 1
  missing_return,  // a loop body that returns nothing (Param -1: no field)
  value_body,      // a loop body that returns a value, not a statement (Param -1)
  assigned_value,  // =, +=, ... on a value: a func's argument, a loop index (Param -1)
  statement_value,  // a statement where a value belongs: an operand, a condition, a stored value (Param -1)
  select_shapes,    // ctg::select between values of two shapes (Param -1)
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

// An assignment to a value (node's assignment operators, node.hpp): raised
// by the launch from the type of the kernel when the statement is kept
// (check/diagnostics.hpp), and from the statement trace when it is written
// on a line of its own and dropped (launch_errors.hpp).
#define CTG_IMPL_MSG_EXPR_017 \
  "CTG-EXPR-017 assignment to a value: only a let-local or a field element can be assigned (=, +=, -=, *=, /=); "\
  "a func's arguments, loop indices and expressions are values, not references to the caller's. Fix: a func "\
  "that updates an element takes the field and the index (f(y, i, v) returning y[i] = ...) or returns the new "\
  "value for the caller to store (y[i] = f(y[i], v)); to change an argument inside a func, copy it into a "\
  "ctg::let local"

// The statement such an assignment builds: empty, marked as the mistake, so
// that the kernel still builds around it and one error prints.
using assigned_value_statement = node<op::func_scope<misuse<misuse_kind::assigned_value, -1, 0, 0>>, node<op::block>>;

template <>
struct traced_statement<assigned_value_statement> {
  static constexpr statement_info info{statement_kind::assigned_value};
};

constexpr assigned_value_statement assignment_to_value() {
  note_built({statement_kind::assigned_value});
  return {};
}

// A statement where a value belongs: an operand, the right-hand side of a
// store (a chained assignment), a let's initial value, a cast's operand, a
// condition. Raised by the launch (check/diagnostics.hpp).
#define CTG_IMPL_MSG_EXPR_020                                                                                     \
  "CTG-EXPR-020 a statement (a store x[i] = ..., an accumulation +=, a loop, a block) used as a value: kernel " \
  "assignments do not chain and have no value. Fix: write each store as a statement of its own in "         \
  "ctg::block(...), and use a stored value by reading the element again or through a ctg::let local"

#define CTG_IMPL_MSG_EXPR_002_SELECT                                                                           \
  "CTG-EXPR-002 ctg::select(c, a, b) chooses between values of one shape: two scalars, or two vectors or "    \
  "matrices of the same size and scalar type. Fix: write the scalar side in the other's shape (ctg::vec(s, s, " \
  "s)), or select a factor: ctg::select(c, 1.0, 0.0) * v"

// What lowering puts where a value cannot be computed (a statement in a
// value's place, CTG-EXPR-020; a select of two shapes, CTG-EXPR-002): a
// zero of the value's type, marked as the mistake, so that every pass sees
// a value there and the launch prints one error.
template <misuse_kind Kind, class T>
using value_stand_in = node<op::func_scope<misuse<Kind, -1, 0, 0>>, node<op::literal<T>>>;
template <class T>
using statement_value_stand_in = value_stand_in<misuse_kind::statement_value, T>;

// Every assignment operator of a node builds that statement.
#define CTG_IMPL_ASSIGNMENT_TO_VALUE(OP)                                      \
  template <class Op, class... Kids>                                          \
  template <class E>                                                          \
  constexpr auto node<Op, Kids...>::operator OP(E const&) const {             \
    return assignment_to_value();                                             \
  }
CTG_IMPL_ASSIGNMENT_TO_VALUE(=)
CTG_IMPL_ASSIGNMENT_TO_VALUE(+=)
CTG_IMPL_ASSIGNMENT_TO_VALUE(-=)
CTG_IMPL_ASSIGNMENT_TO_VALUE(*=)
CTG_IMPL_ASSIGNMENT_TO_VALUE(/=)
#undef CTG_IMPL_ASSIGNMENT_TO_VALUE

}  // namespace ctg::ir
