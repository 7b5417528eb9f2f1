// The IR: one node template, node<Op, Kids...>, where Op says what the node is
// (and holds what is the same for every thread: a literal's value, nothing
// else) and Kids are its operands. After lowering, a kernel is a tree of these
// and of nothing else: no closure type, no host pointer. Loop indices are
// tagged by loop level, locals by slot, fields by parameter position.
#pragma once
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include "../config.hpp"
#include "../detail/fixed_string.hpp"
#include "../detail/meta.hpp"
#include "../detail/tuple.hpp"
#include "../element.hpp"

namespace ctg::ir {

// The message of a C++ branch on a kernel value (node's and lvalue's
// operator bool).
#define CTG_IMPL_MSG_EXPR_016                                                                                \
  "CTG-EXPR-016 C++'s if or ?: on a kernel value: while the kernel is built, a value is an expression, not a " \
  "number. Fix: ctg::select(c, a, b) for a value, ctg::if_(c, then, otherwise) for statements, and "          \
  "ctg::min, ctg::max, ctg::sin, ... instead of std:: functions"

template <class Op, class... Kids>
struct node {
  using op_type = Op;
  static constexpr std::size_t arity = sizeof...(Kids);

  Op op;
  detail::tuple<Kids...> kids;

  // Component access on vector- and matrix-valued expressions: v[k], m(r, c).
  // Defined in expr.hpp.
  template <class I>
  constexpr auto operator[](I k) const;
  template <class R, class C>
  constexpr auto operator()(R r, C c) const;

  // While the lambda builds the kernel a value is a tree, not a number, so
  // C++'s if and ?: cannot branch on it. Defined (and failing) only when
  // such a branch uses it, with the way to write it instead. (&& and || are
  // the kernel's own operators: they build a condition.)
  constexpr explicit operator bool() const {
    static_assert(detail::dependent_false<Op>, CTG_IMPL_MSG_EXPR_016);
    return false;
  }

  // Only let-locals and field elements (ctg::ir::lvalue, expr.hpp) are
  // assigned; a node is a value: a func's argument, a loop index, an
  // expression. Assigning one builds an empty statement marked as the mistake,
  // which the launch reports (CTG-EXPR-017, ir/misuse.hpp), where an
  // overload error would name none of it. Copying a node of the same type is
  // the implicit copy assignment, which a template never replaces.
  template <class E>
  constexpr auto operator=(E const&) const;
  template <class E>
  constexpr auto operator+=(E const&) const;
  template <class E>
  constexpr auto operator-=(E const&) const;
  template <class E>
  constexpr auto operator*=(E const&) const;
  template <class E>
  constexpr auto operator/=(E const&) const;
};

template <class T>
struct is_node : std::false_type {};
template <class Op, class... Kids>
struct is_node<node<Op, Kids...>> : std::true_type {};
template <class T>
inline constexpr bool is_node_v = is_node<std::remove_cvref_t<T>>::value;

template <std::size_t I, class Op, class... Kids>
CTG_HOST_DEVICE constexpr auto const& kid(node<Op, Kids...> const& n) {
  return detail::get<I>(n.kids);
}

// The positions of a node's kids, 0 .. arity - 1 (none for anything else).
// Type-level walks take them as a parameter and expand the kids in place:
// one instantiation level per level of the tree, so that an expression a
// few hundred operations deep stays within the compilers' default depth.
template <class N>
struct kid_positions {
  using type = std::index_sequence<>;
};
template <class Op, class... Kids>
struct kid_positions<node<Op, Kids...>> {
  using type = std::index_sequence_for<Kids...>;
};
template <class N>
using kid_positions_t = typename kid_positions<N>::type;

// The height of a tree: 1 for a leaf, one more than its tallest kid's.
template <class N>
inline constexpr int height_v = 0;
template <class Op, class... Kids>
inline constexpr int height_v<node<Op, Kids...>> = 1 + detail::max_of(height_v<Kids>...);

// The node at a path of kid indices below a root (used by the checks and the
// adjoint to reach an access found by a type-level walk).
template <class Path>
struct node_at;
template <>
struct node_at<std::index_sequence<>> {
  template <class N>
  CTG_HOST_DEVICE static constexpr N const& get(N const& n) {
    return n;
  }
};
template <std::size_t P, std::size_t... Rest>
struct node_at<std::index_sequence<P, Rest...>> {
  template <class N>
  CTG_HOST_DEVICE static constexpr auto const& get(N const& n) {
    return node_at<std::index_sequence<Rest...>>::get(detail::get<P>(n.kids));
  }
};
template <class Root, class Path>
using node_at_t = std::remove_cvref_t<decltype(node_at<Path>::get(std::declval<Root const&>()))>;

template <class Op, class... Kids>
constexpr node<Op, std::decay_t<Kids>...> make_node(Op op, Kids&&... kids) {
  return {op, detail::make_tuple(static_cast<Kids&&>(kids)...)};
}

// Which buffer of a field an access reads or writes.
enum class buffer { primal, grad, dual };

// What kind of loop a loop node is. A top-level `range`, `ndrange` or `each`
// is a parallel offload; nested ones run serially inside their iteration.
// `serial` never runs in parallel; `while_` has no index.
enum class loop_kind { range, serial };

// Atomic read-modify-write kinds on a field element.
enum class atomic_kind { add, sub, min, max };

// A name as a character pack: compilers print it as text in diagnostics, and
// nvcc can spell it in the __global__ template arguments of a launch (it
// cannot spell class-type template arguments such as fixed_string there).
template <char... C>
struct name_chars {
  static constexpr char chars[sizeof...(C) + 1] = {C..., '\0'};
  static constexpr char const* c_str() { return chars; }
  static constexpr std::string_view view() { return {chars, sizeof...(C)}; }
};
template <detail::fixed_string Name>
struct name_of {
  template <std::size_t... Is>
  static auto spell(std::index_sequence<Is...>) -> name_chars<Name.chars[Is]...>;
  using type = decltype(spell(std::make_index_sequence<Name.view().size()>{}));
};
template <detail::fixed_string Name>
using func_name = typename name_of<Name>::type;

namespace op {

// ---- leaves -------------------------------------------------------------
template <class T>
struct literal {
  T value;
  CTG_HOST_DEVICE constexpr T const& read() const { return value; }
  static constexpr literal of(T const& v) { return {v}; }
};
// A fixed-size matrix is kept as its coefficients. Eigen's matrices have copy
// constructors of their own, so holding one would make this node, every node
// above it and every tuple of them not trivially copyable: each would get
// copy and move constructors named after its whole subtree, which a build
// without optimisation compiles, names and emits.
template <class T>
  requires is_eigen_fixed_v<T>
struct literal<T> {
  scalar_of_t<T> coefficients[T::SizeAtCompileTime];
  CTG_HOST_DEVICE T read() const {
    T out;
    for (int c = 0; c < int(T::SizeAtCompileTime); ++c) out.coeffRef(c) = coefficients[c];
    return out;
  }
  static literal of(T const& v) {
    literal out;
    for (int c = 0; c < int(T::SizeAtCompileTime); ++c) out.coefficients[c] = v.coeff(c);
    return out;
  }
};
// A plain C++ number written in a kernel before its type is settled: it takes
// the scalar type of the expression it meets (so `x[i] * 0.5` stays float when
// x is float). Exists only before lowering ends.
template <class T>
struct weak_literal {
  T value;
};
// A compile-time index constant (ctg::c<N>, N_c): compared exactly by the checks.
template <long long N>
struct constant {
  static constexpr long long value = N;
};
// Index of the loop at nesting level `Level` (0 = an offload-level loop), axis `Axis`.
template <int Level, int Axis>
struct loop_index {};
// A mutable local introduced by ctg::let, stored in frame slot `Slot`.
template <int Slot, class T>
struct local {};
// Element access of the field parameter at position I; Kids are the indices.
template <int I, class T, int Rank, bool HasGrad, bool HasDual, buffer Buf = buffer::primal>
struct access {
  using value_type = T;
  static constexpr int param = I;
  static constexpr int rank = Rank;
  static constexpr bool has_grad = HasGrad;
  static constexpr bool has_dual = HasDual;
  static constexpr buffer which = Buf;
};
// Extent of axis `Axis` of the field parameter at position I.
template <int I, int Axis>
struct extent {};

// ---- expressions ---------------------------------------------------------
// A math operation from the table in math.hpp; Kids are its operands.
template <class Fn>
struct math {
  using function = Fn;
};
template <class T>
struct cast {};
struct select {};
struct stop_grad {};
// v[k] or m(r, c): Kids = (value, indices...).
struct component {};
// An Eigen matrix built from R*C scalar expressions, column-major order.
template <int R, int C>
struct make_matrix {};
// The body of a ctg::func call, kept as a node so checks see through it and
// messages can name the func. N is a func_name<"...">: a type, so that
// deducing it needs no class-type template parameter (nvcc cannot deduce those).
template <class N>
struct func_scope {
  static constexpr N name{};
};

// ---- statements ------------------------------------------------------------
// Statements that the reverse pass must undo or replay carry a Site: a frame
// slot of their own, numbered by lowering like the locals, where the adjoint
// keeps what it saved (a local's previous value, an if_'s branch, a loop's
// bounds, a while_'s trip count). Builders create them with Site = -1.

// lhs = rhs on a field element (lhs: access or component of an access).
struct store {};
// lhs op= rhs on a field element, atomic in parallel offloads.
template <atomic_kind K>
struct atomic {
  static constexpr atomic_kind kind = K;
};
// local = rhs (lhs: local or component of a local).
template <int Site = -1>
struct assign {
  static constexpr int site = Site;
};
struct block {};
template <int Site = -1>
struct if_ {
  static constexpr int site = Site;
};
template <int Site = -1>
struct while_ {
  static constexpr int site = Site;
};
// Kids = (begin_0.., end_0.., body); Axes > 1 for ndrange/each.
template <loop_kind K, int Level, int Axes, int Site = -1>
struct loop {
  static constexpr loop_kind kind = K;
  static constexpr int level = Level;
  static constexpr int axes = Axes;
  static constexpr int site = Site;
};
// Kids = (init_0.., body): introduces locals in Slots, initialised in order.
template <int... Slots>
struct let {};
// As let, but yields a value: Kids = (init_0.., body, value). Removed by hoisting.
template <int... Slots>
struct let_value {};
// ctg::result(e): the value a let-block yields. Removed by lowering.
struct result {};
// A statement that does nothing (the missing arm of a one-armed if_).
struct nothing {};

}  // namespace op

// Whether a tree holds a matrix literal anywhere (backend/cpu/launch.hpp
// passes such a body to the chunk function by reference).
template <class N>
inline constexpr bool holds_matrix_literal_v = false;
template <class T, class... Kids>
inline constexpr bool holds_matrix_literal_v<node<op::literal<T>, Kids...>> = is_eigen_fixed_v<T>;
template <class Op, class... Kids>
inline constexpr bool holds_matrix_literal_v<node<Op, Kids...>> = (holds_matrix_literal_v<Kids> || ...);

template <class Op>
inline constexpr bool is_access_op = false;
template <int I, class T, int R, bool G, bool D, buffer B>
inline constexpr bool is_access_op<op::access<I, T, R, G, D, B>> = true;
template <class Op>
inline constexpr bool is_local_op = false;
template <int S, class T>
inline constexpr bool is_local_op<op::local<S, T>> = true;
template <class Op>
inline constexpr bool is_loop_index_op = false;
template <int L, int A>
inline constexpr bool is_loop_index_op<op::loop_index<L, A>> = true;
// The field access a store or atomic writes (seen through a component).
template <class L>
struct written_access {
  using type = L;
};
template <class V, class... I>
struct written_access<node<op::component, V, I...>> {
  using type = V;
};
// The same as a node: the access itself, or the access under a component.
template <class L>
CTG_HOST_DEVICE constexpr auto const& written_access_of(L const& lhs) {
  if constexpr (std::is_same_v<typename L::op_type, op::component>)
    return kid<0>(lhs);
  else
    return lhs;
}

// The field parameters a subtree writes (stores and atomics on their own
// buffer), one bit per parameter; parameters past the 64th share all bits.
constexpr unsigned long long param_bit(int i) { return i < 64 ? 1ull << i : ~0ull; }
template <class N>
inline constexpr unsigned long long written_params_v = 0;
template <class Op, class... K>
inline constexpr unsigned long long written_params_v<node<Op, K...>> = (written_params_v<K> | ... | 0ull);
template <class L, class E>
inline constexpr unsigned long long written_params_v<node<op::store, L, E>> =
    param_bit(written_access<L>::type::op_type::param) | written_params_v<L> | written_params_v<E>;
template <atomic_kind K, class L, class E>
inline constexpr unsigned long long written_params_v<node<op::atomic<K>, L, E>> =
    param_bit(written_access<L>::type::op_type::param) | written_params_v<L> | written_params_v<E>;

// The field parameters an expression reads.
template <class Op>
inline constexpr unsigned long long access_param_bit = 0;
template <int I, class T, int R, bool G, bool D, buffer B>
inline constexpr unsigned long long access_param_bit<op::access<I, T, R, G, D, B>> = param_bit(I);
template <class N>
inline constexpr unsigned long long read_params_v = 0;
template <class Op, class... K>
inline constexpr unsigned long long read_params_v<node<Op, K...>> =
    access_param_bit<Op> | (read_params_v<K> | ... | 0ull);

template <class Op>
inline constexpr bool is_store_op = std::is_same_v<Op, op::store>;
template <class Op>
inline constexpr bool is_math_op = false;
template <class Fn>
inline constexpr bool is_math_op<op::math<Fn>> = true;
template <class Op>
inline constexpr bool is_atomic_op = false;
template <atomic_kind K>
inline constexpr bool is_atomic_op<op::atomic<K>> = true;
template <class Op>
inline constexpr bool is_assign_op = false;
template <int S>
inline constexpr bool is_assign_op<op::assign<S>> = true;
template <class Op>
inline constexpr bool is_if_op = false;
template <int S>
inline constexpr bool is_if_op<op::if_<S>> = true;
template <class Op>
inline constexpr bool is_while_op = false;
template <int S>
inline constexpr bool is_while_op<op::while_<S>> = true;
template <class Op>
inline constexpr bool is_loop_op = false;
template <loop_kind K, int L, int A, int S>
inline constexpr bool is_loop_op<op::loop<K, L, A, S>> = true;
template <class Op>
inline constexpr bool is_let_op = false;
template <int... S>
inline constexpr bool is_let_op<op::let<S...>> = true;
template <class Op>
inline constexpr bool is_let_value_op = false;
template <int... S>
inline constexpr bool is_let_value_op<op::let_value<S...>> = true;
template <class Op>
inline constexpr bool is_func_scope_op = false;
template <class N>
inline constexpr bool is_func_scope_op<op::func_scope<N>> = true;

// ---- value types ---------------------------------------------------------
// value_of<N>::type is the type an expression evaluates to, void for statements.
template <class N>
struct value_of {
  using type = void;
};
template <class N>
using value_t = typename value_of<std::remove_cvref_t<N>>::type;

template <class T>
struct value_of<node<op::literal<T>>> {
  using type = T;
};
template <class T>
struct value_of<node<op::weak_literal<T>>> {
  using type = T;
};
template <long long N>
struct value_of<node<op::constant<N>>> {
  using type = int;
};
template <int L, int A>
struct value_of<node<op::loop_index<L, A>>> {
  using type = int;
};
template <int S, class T>
struct value_of<node<op::local<S, T>>> {
  using type = T;
};
template <int I, class T, int R, bool G, bool D, buffer B, class... Idx>
struct value_of<node<op::access<I, T, R, G, D, B>, Idx...>> {
  using type = T;
};
template <int I, int A>
struct value_of<node<op::extent<I, A>>> {
  using type = int;
};
template <class T, class K>
struct value_of<node<op::cast<T>, K>> {
  using type = T;
};
template <class K>
struct value_of<node<op::stop_grad, K>> {
  using type = value_t<K>;
};
// The two values a select chooses from: two scalars, or two vectors or
// matrices of one size and scalar type (else CTG-EXPR-002, raised at the
// launch: lower/lower.hpp, unselectable_v).
template <class A, class B>
concept selectable_values = requires { typename std::common_type<A, B>::type; };
template <class C, class A, class B>
struct value_of<node<op::select, C, A, B>> {
  using type = typename std::conditional_t<selectable_values<value_t<A>, value_t<B>>,
                                           std::common_type<value_t<A>, value_t<B>>, std::type_identity<value_t<A>>>::type;
};
template <class Name, class K>
struct value_of<node<op::func_scope<Name>, K>> {
  using type = value_t<K>;
};
template <int... S, class... Kids>
struct value_of<node<op::let_value<S...>, Kids...>> {
  using type = value_t<detail::tuple_element_t<sizeof...(Kids) - 1, detail::tuple<Kids...>>>;
};
template <class K>
struct value_of<node<op::result, K>> {
  using type = value_t<K>;
};

template <class N>
inline constexpr bool is_statement_v = std::is_void_v<value_t<N>>;

// A placeholder: used by lowering to mark nodes that are not yet lowered.
struct pending_tag {};
template <class T>
inline constexpr bool is_pending_v = std::is_base_of_v<pending_tag, std::remove_cvref_t<T>>;

}  // namespace ctg::ir
