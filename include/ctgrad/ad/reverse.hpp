// The reverse (adjoint) evaluator. For one body (an iteration of the parallel
// loop, or a serial offload) it first recomputes the forward locals without
// writing any primal field ("recompute"), saving in each statement's site
// slot what the reverse sweep will need (a local's previous value, an if_'s
// branch, loop bounds, a while_'s trip count), then sweeps the statements in
// reverse ("rev"). A nested loop runs forward once in the recompute, pushing a
// snapshot of its carried locals per iteration onto the adstack; in reverse,
// each iteration pops its snapshot, recomputes its own body and sweeps it.
//
// Expressions are first recorded into a tree of `recorded` values that
// holds exactly the values the derivative rules need (decided at compile
// time), then the adjoint is pushed down that tree (ctg::tape, by contrast,
// records whole launches). Nothing is evaluated twice, and no value the
// rules do not need is evaluated at all.
#pragma once
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "../memory/atomic.hpp"
#include "../eval/forward.hpp"
#include "../eval/store_claims.hpp"
#include "adstack.hpp"
#include "activity.hpp"
#include "derivatives.hpp"

namespace ctg::ad {

using eval::convert;
using eval::forward;

// A forward frame plus the adjoint accumulators and the thread's adstack.
// `reached` has bit S set once a read of local S has passed its adjoint on
// since the local was last assigned (in the reverse order): a value that no
// read on this path took, one only an if_ arm or a select side not taken
// reads, passes nothing to the expression that computed it, where zero
// times an infinite partial would be a NaN (docs/02, *Edge rules*). Slots
// from 64 on count as reached.
template <class Args, class Locals, class Adj, int Levels, int Axes, bool Parallel>
struct ad_frame : eval::frame<Args, Locals, Levels, Axes, Parallel> {
  Adj adj;
  adstack stack;
  std::uint64_t reached = 0;
};
// Marks local S's adjoint as passed on by a read.
template <int S, class Fr>
CTG_HOST_DEVICE void note_reached(Fr& f) {
  if constexpr (S < 64) f.reached |= std::uint64_t(1) << S;
}
// Whether a read passed local S's adjoint on since its last assignment.
template <int S, class Fr>
CTG_HOST_DEVICE bool was_reached(Fr const& f) {
  if constexpr (S < 64)
    return (f.reached >> S) & 1;
  else
    return true;
}
// The same, taken at the local's assignment: the assignment undone, the
// reads before it start again.
template <int S, class Fr>
CTG_HOST_DEVICE bool take_reached(Fr& f) {
  bool const was = was_reached<S>(f);
  if constexpr (S < 64) f.reached &= ~(std::uint64_t(1) << S);
  return was;
}

// The adjoint accumulator type of a slot: the value type for differentiable
// locals, an unused byte otherwise.
template <class T>
using adjoint_slot_t = std::conditional_t<is_differentiable_v<T>, T, char>;

template <class Tuple>
struct adjoint_storage;
template <class... T>
struct adjoint_storage<detail::tuple<T...>> {
  using type = detail::tuple<adjoint_slot_t<T>...>;
};

template <class... T>
CTG_HOST_DEVICE void zero_all(detail::tuple<T...>& t) {
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    detail::in_order{((detail::get<Is>(t) = zero<T>()), 0)...};
  }(std::index_sequence_for<T...>{});
}

// What record() returns for an inactive expression whose value is not
// needed: its value is absent, like that of a record made without it, so
// every record has a `value` and it is read without a helper function (one
// would be named after the record's type, which mirrors the subtree).
template <class V>
struct nothing_recorded {
  absent<V> value;
};

// How many levels of a chain of records kept as members of their own types
// (record_slot, below: a subtree with matrices) are built in place, each
// operand's record inside its parent's, before one level records its
// operands into locals and copies them in. In place, a deep expression's
// record is one object whose fields are reached through every level above
// them, and g++ 12's value numbering, which runs before its scalar
// replacement, spells each such reference level by level for every store it
// walks past: a 400-operation chain built wholly in place took 36 s to
// compile instead of 25. Cut every 16 levels it takes 24 s, and its adjoint
// still runs 2.6 times faster than one copying every level (docs/05,
// *Records built in place*). The cut needs a named local: a temporary
// bound to a reference is built in place all the same by g++. clang spends
// on the copies instead (a 200-operation chain: 45 s wholly in place, 66 s
// cut every 16 levels), so with clang nothing is copied. nvcc's two passes
// both follow the host compiler here, so that host and device see one record
// type. Records kept as bytes are always built in place.
#if defined(__GNUC__) && !defined(__clang__)
inline constexpr int record_levels_in_place = 16;
#else
inline constexpr int record_levels_in_place = 1 << 30;
#endif

// The value a math node's record holds: Fn's result, or absent when no rule
// needs it (its operands' values may then be absent too). A function of the
// operator and the value types, not of the node.
template <class Fn, class V, class... Kid>
CTG_HOST_DEVICE V math_value(Kid const... kid) {
  if constexpr (is_absent_v<V>)
    return V{};
  else
    return V{Fn::apply(kid...)};
}

// How a math node's or a passed value's record keeps an operand's record
// (its slot). As a member of the record's own type, the operand's fields are
// reached by a path one step longer per level of the expression: in a chain
// n deep the optimiser's address of each of n values is as long as its
// depth, and passes that take addresses apart (dead-store elimination,
// instcombine) do the square of the depth in work for each of the n
// functions inlining leaves behind (clang 14 spent most of a 200-operation
// adjoint's build there; docs/05, *Records as bytes*). As bytes, every level
// starts a fresh offset from its parent's. Only a subtree of scalars is kept
// as bytes: g++ then keeps records of Eigen values in memory (the MPM step's
// G2P adjoint ran 5.4 times slower). Either slot is built in place by
// placement new from record()'s prvalue and read through its address cast to
// the record's type (std::launder would be the letter of the standard, but
// g++ takes it for an opaque pointer and then keeps every record in memory:
// the adjoints ran from 2.8 times (the recurrence's) to 275 times (the
// wave's) slower).
template <class K>
struct record_bytes {
  using type = K;
  alignas(K) unsigned char storage[sizeof(K)];
};
template <class K>
struct record_member {
  using type = K;
  K storage;
};
// Whether every value in the subtree N is a scalar.
template <class N>
inline constexpr bool scalar_subtree_v = false;
template <class Op, class... K>
inline constexpr bool scalar_subtree_v<node<Op, K...>> = std::is_arithmetic_v<value_t<node<Op, K...>>> &&
                                                         (scalar_subtree_v<K> && ...);
// The slot of the record K of operand node N.
template <class N, class K>
using record_slot = std::conditional_t<scalar_subtree_v<N>, record_bytes<K>, record_member<K>>;
// Whether a slot keeps its record as bytes (always built in place).
template <class Slot>
inline constexpr bool kept_as_bytes_v = false;
template <class K>
inline constexpr bool kept_as_bytes_v<record_bytes<K>> = true;
// Operand I's record in a record of slots, its type, and where it is built:
// `new (CTG_IMPL_KID_STORAGE(I, t)) CTG_IMPL_KID_TYPE(I, t)(record(...))`.
#define CTG_IMPL_KID_TYPE(I, record) typename std::remove_cvref_t<decltype(CTG_IMPL_ELEMENT(I, (record).kids))>::type
#define CTG_IMPL_KID_RECORD(I, record) \
  (*reinterpret_cast<CTG_IMPL_KID_TYPE(I, record) const*>(&CTG_IMPL_ELEMENT(I, (record).kids).storage))
#define CTG_IMPL_KID_STORAGE(I, record) (&CTG_IMPL_ELEMENT_MUTABLE(I, (record).kids).storage)

// A recorded expression: its value (or absent<T>) and its operands' records.
template <class V, class... Kids>
struct recorded {
  V value;
  detail::tuple<Kids...> kids;
};

// The record of a math node: its operands' slots, then its value, which
// record() computes from theirs (so no function is named after the record).
template <class Fn, class V, class... Slots>
struct math_recorded {
  detail::tuple<Slots...> kids;
  V value;
};

// The value a node that passes its operand's on holds (a cast, stop_grad, a
// func's scope): the operand's, converted to T, or absent.
template <class T, class V>
CTG_HOST_DEVICE T passed_value(V const& v) {
  if constexpr (is_absent_v<T>)
    return T{};
  else
    return convert<T>(v);
}

// The record of such a node: its operand's slot, then the value from it.
template <class T, class Slot>
struct passed_recorded {
  detail::tuple<Slot> kids;
  T value;
};

// One side of a select's record, recorded only when that side is taken.
// Its storage constructs nothing: only the side taken is built, in place,
// by record(), and the other is never read. Which side holds a record is in
// the condition's record. When T is trivially copyable, so is this (the
// union's own copy): a user-written copy would make every record holding
// this one non-trivially copyable, which costs the optimiser (g++ 12 at -O3
// failed to build such a record in place). A specialisation rather than
// constrained copy operations, which clang 14 does not count as trivial.
template <class T, bool = std::is_trivially_copyable_v<T>>
struct side_record {
  union {
    T record;
  };
  CTG_HOST_DEVICE side_record() {}
};
// Otherwise a copy copies the bytes.
template <class T>
struct side_record<T, false> {
  union {
    T record;
  };
  CTG_HOST_DEVICE side_record() {}
  CTG_HOST_DEVICE side_record(side_record const& other) { copy_from(other); }
  CTG_HOST_DEVICE side_record& operator=(side_record const& other) {
    copy_from(other);
    return *this;
  }

 private:
  CTG_HOST_DEVICE void copy_from(side_record const& other) {
    memcpy(static_cast<void*>(this), static_cast<void const*>(&other), sizeof(side_record));
  }
};

// A coefficient of a vector or matrix at compile-time indices (u[0_c]).
template <class N>
inline constexpr bool fixed_coefficient_v = false;
template <class V, class... I>
inline constexpr bool fixed_coefficient_v<node<op::component, V, I...>> = (eval::static_index_v<I> && ...);

// The adjoint reaching operand I of a math node Fn whose operands' values (or
// absent<T>) are `values`, converted to that operand's type KidValue, or
// nothing when the operand is inactive (backprop ignores it then, and the rule
// is never instantiated). A function of the operator, the operand's activity
// and the value types, not of the node: its name stays short however deep the
// expression, and the nodes of one operator and types share it.
template <int I, class Fn, bool Active, class KidValue, class G, class... V>
CTG_HOST_DEVICE auto operand_adjoint(G const& g, V const... values) {
  if constexpr (Active)
    return convert<KidValue>(rule<Fn>::template vjp<I>(g, values...));
  else
    return nothing_recorded<KidValue>{};
}

// Paths (kid indices) from an expression to its accesses of field I.
template <int I, class E, class Path = std::index_sequence<>, class Positions = kid_positions_t<E>>
struct access_paths {
  using type = detail::type_list<>;
};
template <int I, class Op, class... K, std::size_t... P, std::size_t... Is>
struct access_paths<I, node<Op, K...>, std::index_sequence<P...>, std::index_sequence<Is...>> {
  using below = detail::concat_all_t<typename access_paths<I, K, std::index_sequence<P..., Is>>::type...>;
  static constexpr bool own() {
    if constexpr (is_access_op<Op>)
      return Op::param == I;
    else
      return false;
  }
  using type = std::conditional_t<own(), detail::concat_t<detail::type_list<std::index_sequence<P...>>, below>, below>;
};


// WithPrimal: each store and accumulation also writes its value, when the
// sweep reaches it (ad/fusion.hpp says when that equals the forward pass).
template <class Analysis, class Policy, bool WithPrimal = false>
struct reverse {
  using AN = Analysis;
  template <class E>
  static constexpr bool active = AN::template is_active<E>;
  // The gather sweeps of a stencil adjoint (ad/gather.hpp): one read
  // accumulates, the stores leave their seeds for a clearing sweep.
  static constexpr bool gathering = Policy::gathering;
  // Whether the read `n` accumulates into its gradient in this replay: the
  // reads of the iteration's own element in the replay of that element, each
  // other read in its own.
  template <class Fr, class N>
  CTG_HOST_DEVICE static bool accumulates(N const& n, Fr const& f) {
    if constexpr (!gathering)
      return true;
    else if constexpr (is_bare_tap_v<Fr::axes, N>)
      return f.gather_bare;
    else
      return static_cast<void const*>(&n) == f.gather_target;
  }
  static constexpr bool needed(int slot) { return AN::needed[slot]; }
  static constexpr bool active_slot(int slot) { return AN::active[slot]; }
  // Whether the value of the assignment at Site is read (AN::assignment_read):
  // one nothing reads passes no adjoint on.
  static constexpr bool assignment_read(int site) { return AN::assignment_read(site); }

  // ---- recording ------------------------------------------------------------------------------
  // Whether node N's operands' records kept as members of their own types
  // are built in place inside its own (record_levels_in_place says when they
  // are not); those kept as bytes always are.
  template <class N>
  static constexpr bool records_in_place = ir::height_v<N> % record_levels_in_place != 0;

  // A record is declared, then its operands' records are built into its
  // slots and its value is set. GCC, at -O1 with the sanitizers, takes the
  // returned record for one that may be uninitialised: it does not follow
  // the placement of the operands' records into the bytes.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  template <bool Need, class Fr, class Op, class... K>
  CTG_HOST_DEVICE static auto record(node<Op, K...> const& n, Fr& f) {
    using N = node<Op, K...>;
    if constexpr (!Need && !active<N>) {
      return nothing_recorded<value_t<N>>{};
    } else {
      return record_node<Need>(n, f);
    }
  }

  template <bool Need, class Fr, class N>
  CTG_HOST_DEVICE static auto value_if(N const& n, Fr& f) {
    if constexpr (Need)
      return forward::eval(n, f);
    else
      return absent<value_t<N>>{};
  }

  // Leaves: literals, constants, indices, locals, extents.
  template <bool Need, class Fr, class Op>
    requires(!is_access_op<Op>)
  CTG_HOST_DEVICE static auto record_node(node<Op> const& n, Fr& f) {
    return recorded<decltype(value_if<Need>(n, f))>{value_if<Need>(n, f), {}};
  }

  template <bool Need, class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx>
  CTG_HOST_DEVICE static auto record_node(node<op::access<I, T, R, G, D, B>, Idx...> const& n, Fr& f) {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      // Kids are built in place inside the returned record (no copies of sub-records).
      using Record =
          recorded<std::conditional_t<Need, T, absent<T>>, decltype(record<true>(detail::get<Is>(n.kids), f))...>;
      Record t{{}, {{{record<true>(detail::get<Is>(n.kids), f)}...}}};
      if constexpr (Need) {
        T const* p = eval::element_pointer(detail::get<I>(*f.args), B, I, f, detail::get<Is>(t.kids).value...);
        t.value = eval::missing(p) ? zero_of<T>() : *p;
      }
      return t;
    }(std::index_sequence_for<Idx...>{});
  }

  // Math nodes make up most of a deep expression, so they are recorded at one
  // template level per expression level (the instantiation depth limits how
  // deep an expression can be): the operands of each arity (one to three, as
  // in forward::eval) are recorded here instead of by a helper expanded over
  // their positions, a second level. An operand's record is the prvalue
  // record() returns, built in place in this node's record (math_recorded),
  // whose value is computed from it after. A record kept in a local and
  // copied into its parent's copies every record below it again: a chain of
  // records then costs its depth squared in copies, at run time and in the
  // optimiser, and in a sweep inlined into one loop (CTG_FLATTEN) a copy left
  // in memory slowed the wave's gathering adjoint 80 times (docs/05, *Depth*).
  // CTG_IMPL_RECORD_KID builds operand I's record into its slot of t: in
  // place, or, for a member slot every record_levels_in_place levels,
  // through a local.
#define CTG_IMPL_RECORD_KID(I, need)                                                                                  \
  if constexpr (records_in_place<N> || kept_as_bytes_v<std::remove_cvref_t<decltype(CTG_IMPL_ELEMENT(I, t.kids))>>) { \
    new (CTG_IMPL_KID_STORAGE(I, t)) CTG_IMPL_KID_TYPE(I, t)(record<need>(CTG_IMPL_ELEMENT(I, n.kids), f));           \
  } else {                                                                                                            \
    auto const kid_record = record<need>(CTG_IMPL_ELEMENT(I, n.kids), f);                                             \
    new (CTG_IMPL_KID_STORAGE(I, t)) CTG_IMPL_KID_TYPE(I, t)(kid_record);                                             \
  }
  // A math node's record has its type named (record_type, below) rather
  // than deduced: clang 14 builds a named local returned from a function
  // whose return type is deduced beside the caller's object and copies it
  // over, and a record's copy copies its whole subtree's (clang then spends
  // the optimiser on the copies or, where a call is not inlined, runs them).
  // It is declared twice (ir::evaluated_apart_v): not inlined every few
  // levels of a tall tree, inlined elsewhere.
  template <bool Need, class Fr, class N, bool Recorded>
  struct record_type;
  template <bool Need, class Fr, class N>
  using record_type_t = typename record_type<Need, Fr, N, Need || active<N>>::type;
  // Whether operand I of the math node Fn(K...) keeps its value in its record.
  template <bool Need, std::size_t I, class Fn, class... K>
  static constexpr bool operand_kept() {
    return Need || operand_value_needed<Fn, I, active<node<op::math<Fn>, K...>>, active<K>...>();
  }
  // The value a math node's record holds (math_value).
  template <bool Need, class Fn, class... K>
  using math_value_t =
      std::conditional_t<Need, value_t<node<op::math<Fn>, K...>>, absent<value_t<node<op::math<Fn>, K...>>>>;
#define CTG_IMPL_RECORD_MATH(APART, ATTRIBUTE)                                                                    \
  template <bool Need, class Fr, class Fn, class... K>                                                            \
    requires((Need || active<node<op::math<Fn>, K...>>) &&                                                        \
             ir::evaluated_apart_v<node<op::math<Fn>, K...>> == APART)                                            \
  ATTRIBUTE CTG_HOST_DEVICE static auto record(node<op::math<Fn>, K...> const& n, Fr& f)                          \
      ->record_type_t<Need, Fr, node<op::math<Fn>, K...>> {                                                       \
    using N = node<op::math<Fn>, K...>;                                                                           \
    static_assert(sizeof...(K) >= 1 && sizeof...(K) <= 3, "a math node has one to three operands");              \
    using V = math_value_t<Need, Fn, K...>;                                                                       \
    record_type_t<Need, Fr, N> t;                                                                                 \
    CTG_IMPL_RECORD_KID(0, (operand_kept<Need, 0, Fn, K...>()))                                                   \
    if constexpr (sizeof...(K) == 1) {                                                                            \
      t.value = math_value<Fn, V>(CTG_IMPL_KID_RECORD(0, t).value);                                               \
    } else if constexpr (fn::short_circuits_v<Fn>) {                                                              \
      /* The second operand is recorded only where the first does not decide (nothing reads its record then). */ \
      if (bool(CTG_IMPL_KID_RECORD(0, t).value) == fn::short_circuit_v<Fn>) {                                    \
        t.value = math_value<Fn, V>(CTG_IMPL_KID_RECORD(0, t).value, CTG_IMPL_KID_RECORD(0, t).value);            \
      } else {                                                                                                    \
        CTG_IMPL_RECORD_KID(1, (operand_kept<Need, 1, Fn, K...>()))                                               \
        t.value = math_value<Fn, V>(CTG_IMPL_KID_RECORD(0, t).value, CTG_IMPL_KID_RECORD(1, t).value);            \
      }                                                                                                           \
    } else if constexpr (sizeof...(K) == 2) {                                                                     \
      CTG_IMPL_RECORD_KID(1, (operand_kept<Need, 1, Fn, K...>()))                                                 \
      t.value = math_value<Fn, V>(CTG_IMPL_KID_RECORD(0, t).value, CTG_IMPL_KID_RECORD(1, t).value);              \
    } else {                                                                                                      \
      CTG_IMPL_RECORD_KID(1, (operand_kept<Need, 1, Fn, K...>()))                                                 \
      CTG_IMPL_RECORD_KID(2, (operand_kept<Need, 2, Fn, K...>()))                                                 \
      t.value = math_value<Fn, V>(CTG_IMPL_KID_RECORD(0, t).value, CTG_IMPL_KID_RECORD(1, t).value,               \
                                  CTG_IMPL_KID_RECORD(2, t).value);                                               \
    }                                                                                                             \
    return t;                                                                                                     \
  }
  CTG_IMPL_INLINE_AND_APART(CTG_IMPL_RECORD_MATH)
#undef CTG_IMPL_RECORD_MATH
  // One without a gradient whose value nobody needs records nothing (in a
  // function of its own: g++ 12 copies a named record out of a function
  // that can also return another value).
  template <bool Need, class Fr, class Fn, class... K>
    requires(!Need && !active<node<op::math<Fn>, K...>>)
  CTG_HOST_DEVICE static auto record(node<op::math<Fn>, K...> const&, Fr&) {
    return nothing_recorded<value_t<node<op::math<Fn>, K...>>>{};
  }

  // A node's record type: record()'s, deduced, for other nodes; for a math
  // node that records nothing, nothing_recorded; for one that records, one class
  // per node that names its operands' record types and completes them, so
  // that the instantiations nest one per level of the expression (completed
  // first inside their parent's, a chain's records would nest as deep again
  // through their tuples).
  template <bool Need, class Fr, class N, bool Recorded>
  struct record_type {
    using type = decltype(record<Need>(std::declval<N const&>(), std::declval<Fr&>()));
  };
  template <bool Need, class Fr, class Fn, class... K>
  struct record_type<Need, Fr, node<op::math<Fn>, K...>, false> {
    using type = nothing_recorded<value_t<node<op::math<Fn>, K...>>>;
  };
  template <bool Need, class Fr, class Fn, class... K>
  struct record_type<Need, Fr, node<op::math<Fn>, K...>, true> {
    static_assert(sizeof...(K) >= 1 && sizeof...(K) <= 3, "a math node has one to three operands");
  };
  template <bool Need, class Fr, class Fn, class K0>
  struct record_type<Need, Fr, node<op::math<Fn>, K0>, true> {
    static constexpr bool keep0 = operand_kept<Need, 0, Fn, K0>();
    using kid0 = typename record_type<keep0, Fr, K0, keep0 || active<K0>>::type;
    static_assert(sizeof(kid0) > 0);
    using type = math_recorded<Fn, math_value_t<Need, Fn, K0>, record_slot<K0, kid0>>;
  };
  template <bool Need, class Fr, class Fn, class K0, class K1>
  struct record_type<Need, Fr, node<op::math<Fn>, K0, K1>, true> {
    static constexpr bool keep0 = operand_kept<Need, 0, Fn, K0, K1>();
    using kid0 = typename record_type<keep0, Fr, K0, keep0 || active<K0>>::type;
    static constexpr bool keep1 = operand_kept<Need, 1, Fn, K0, K1>();
    using kid1 = typename record_type<keep1, Fr, K1, keep1 || active<K1>>::type;
    static_assert(sizeof(kid0) > 0 && sizeof(kid1) > 0);
    using type = math_recorded<Fn, math_value_t<Need, Fn, K0, K1>, record_slot<K0, kid0>, record_slot<K1, kid1>>;
  };
  template <bool Need, class Fr, class Fn, class K0, class K1, class K2>
  struct record_type<Need, Fr, node<op::math<Fn>, K0, K1, K2>, true> {
    static constexpr bool keep0 = operand_kept<Need, 0, Fn, K0, K1, K2>();
    using kid0 = typename record_type<keep0, Fr, K0, keep0 || active<K0>>::type;
    static constexpr bool keep1 = operand_kept<Need, 1, Fn, K0, K1, K2>();
    using kid1 = typename record_type<keep1, Fr, K1, keep1 || active<K1>>::type;
    static constexpr bool keep2 = operand_kept<Need, 2, Fn, K0, K1, K2>();
    using kid2 = typename record_type<keep2, Fr, K2, keep2 || active<K2>>::type;
    static_assert(sizeof(kid0) > 0 && sizeof(kid1) > 0 && sizeof(kid2) > 0);
    using type = math_recorded<Fn, math_value_t<Need, Fn, K0, K1, K2>, record_slot<K0, kid0>, record_slot<K1, kid1>,
                               record_slot<K2, kid2>>;
  };

  template <bool Need, class Fr, class N, class F, class... K>
  CTG_HOST_DEVICE static auto record_node(node<op::custom<N, F>, K...> const& n, Fr& f) {
    using Node = node<op::custom<N, F>, K...>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      using Record = recorded<std::conditional_t<Need, value_t<Node>, absent<value_t<Node>>>,
                        decltype(record<Need || active<Node>>(detail::get<Is>(n.kids), f))...>;
      Record t{{}, {{{record<Need || active<Node>>(detail::get<Is>(n.kids), f)}...}}};
      if constexpr (Need) t.value = n.op.fn.forward(detail::get<Is>(t.kids).value...);
      return t;
    }(std::index_sequence_for<K...>{});
  }

  // The record of a node of one operand whose value it passes on as its
  // Value (cast, stop_grad, a func's scope). Expanded in each record_node rather
  // than called, so that such a node costs the template levels any other
  // does (docs/05, *Depth*).
#define CTG_IMPL_RETURN_PASSED_RECORD()                                                                               \
  using N = std::remove_cvref_t<decltype(n)>;                                                                         \
  passed_recorded<Value, record_slot<std::remove_cvref_t<decltype(kid<0>(n))>, decltype(record<Need>(kid<0>(n), f))>> \
      t;                                                                                                              \
  CTG_IMPL_RECORD_KID(0, Need)                                                                                        \
  t.value = passed_value<Value>(CTG_IMPL_KID_RECORD(0, t).value);                                                     \
  return t;

  template <bool Need, class Fr, class T, class K>
  CTG_HOST_DEVICE static auto record_node(node<op::cast<T>, K> const& n, Fr& f) {
    using Value = std::conditional_t<Need, T, absent<T>>;
    CTG_IMPL_RETURN_PASSED_RECORD()
  }

  template <bool Need, class Fr, class C, class A, class B>
  CTG_HOST_DEVICE static auto record_node(node<op::select, C, A, B> const& n, Fr& f) {
    using V = value_t<node<op::select, C, A, B>>;
    using TA = decltype(record<Need>(kid<1>(n), f));
    using TB = decltype(record<Need>(kid<2>(n), f));
    // A guard known to hold (eval/index_guards.hpp) is recorded true
    // without evaluating it: the first side is chosen, here and in backprop.
    auto condition = [&] {
      if constexpr (eval::guard_known_true_v<Fr, C>)
        return recorded<bool>{true, {}};
      else
        return record<true>(kid<0>(n), f);
    };
    using TC = decltype(condition());
    using Record = recorded<std::conditional_t<Need, V, absent<V>>, TC, side_record<TA>, side_record<TB>>;
    Record t{{}, {{{condition()}, {}, {}}}};
    // Only the chosen side is recorded, as the forward pass evaluates it.
    TA* const first = &CTG_IMPL_ELEMENT_MUTABLE(1, t.kids).record;
    TB* const second = &CTG_IMPL_ELEMENT_MUTABLE(2, t.kids).record;
    if constexpr (records_in_place<node<op::select, C, A, B>>) {
      if (CTG_IMPL_ELEMENT(0, t.kids).value)
        new (first) TA(record<Need>(kid<1>(n), f));
      else
        new (second) TB(record<Need>(kid<2>(n), f));
    } else {
      if (CTG_IMPL_ELEMENT(0, t.kids).value) {
        auto const side = record<Need>(kid<1>(n), f);
        new (first) TA(side);
      } else {
        auto const side = record<Need>(kid<2>(n), f);
        new (second) TB(side);
      }
    }
    if constexpr (Need)
      t.value = CTG_IMPL_ELEMENT(0, t.kids).value ? convert<V>(CTG_IMPL_ELEMENT(1, t.kids).record.value)
                                                  : convert<V>(CTG_IMPL_ELEMENT(2, t.kids).record.value);
    return t;
  }

  template <bool Need, class Fr, class K>
  CTG_HOST_DEVICE static auto record_node(node<op::stop_grad, K> const& n, Fr& f) {
    using Value = decltype(std::declval<decltype(record<Need>(kid<0>(n), f))>().value);
    CTG_IMPL_RETURN_PASSED_RECORD()
  }

  template <bool Need, class Fr, class Name, class K>
  CTG_HOST_DEVICE static auto record_node(node<op::func_scope<Name>, K> const& n, Fr& f) {
    using Value = decltype(std::declval<decltype(record<Need>(kid<0>(n), f))>().value);
    CTG_IMPL_RETURN_PASSED_RECORD()
  }
#undef CTG_IMPL_RETURN_PASSED_RECORD
#undef CTG_IMPL_RECORD_KID

  template <bool Need, class Fr, class V, class... I>
  CTG_HOST_DEVICE static auto record_node(node<op::component, V, I...> const& n, Fr& f) {
    using N = node<op::component, V, I...>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto tv = record<Need>(kid<0>(n), f);
      auto ti = detail::make_tuple(record<Need || active<N>>(detail::get<Is + 1>(n.kids), f)...);
      if constexpr (Need) {
        auto const* c = eval::component_address(std::as_const(tv.value), eval::component_param_v<V>, f,
                                                detail::get<Is>(ti).value...);
        auto v = eval::missing(c) ? scalar_of_t<value_t<V>>{} : *c;
        return recorded<decltype(v), decltype(tv), std::remove_cvref_t<decltype(detail::get<Is>(ti))>...>{
            v, {{{tv}, {detail::get<Is>(ti)}...}}};
      } else {
        return recorded<absent<value_t<N>>, decltype(tv), std::remove_cvref_t<decltype(detail::get<Is>(ti))>...>{
            {}, {{{tv}, {detail::get<Is>(ti)}...}}};
      }
    }(std::index_sequence_for<I...>{});
  }

  template <bool Need, class Fr, int R, int C, class... K>
  CTG_HOST_DEVICE static auto record_node(node<op::make_matrix<R, C>, K...> const& n, Fr& f) {
    using N = node<op::make_matrix<R, C>, K...>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      using Record = recorded<std::conditional_t<Need, value_t<N>, absent<value_t<N>>>,
                              decltype(record<Need>(detail::get<Is>(n.kids), f))...>;
      Record t{{}, {{{record<Need>(detail::get<Is>(n.kids), f)}...}}};
      if constexpr (Need) t.value = forward::eval(n, f);
      return t;
    }(std::index_sequence_for<K...>{});
  }

#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic pop
#endif

  // ---- pushing adjoints down a record ---------------------------------------------------------
  // The record of node N that record<Need> makes. backprop takes its record
  // as this type, spelled by Need and the node, so that the record's own
  // type (which mirrors the whole subtree a second time) is not one of its
  // template arguments: a function's name spells those, and in a deep
  // expression the names are most of what the compiler spends (docs/05,
  // *Build time*). Callers say Need from the type of the record's value,
  // `needs<decltype(t.value)>`: a variable named after the record was a
  // symbol that spelled it (in a 400-operation chain, about 450 of them,
  // 2.4 MB of the 19 MB of names).
  template <bool Need, class Fr, class N>
  using record_t = decltype(record<Need>(std::declval<N const&>(), std::declval<Fr&>()));
  template <class Value>
  static constexpr bool needs = !is_absent_v<Value>;

  template <bool Need, class Fr, class Op, class... K, class G>
    requires(!is_math_op<Op>)  // (math nodes: below; the record's type does not order the two)
  CTG_HOST_DEVICE static void backprop(node<Op, K...> const& n, record_t<Need, Fr, node<Op, K...>> const& t,
                                       G const& g, Fr& f) {
    if constexpr (active<node<Op, K...>>) backprop_node<Need>(n, t, g, f);
  }

  template <bool Need, class Fr, int S, class V, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::local<S, V>> const&,
                                            record_t<Need, Fr, node<op::local<S, V>>> const&, G const& g, Fr& f) {
    auto& a = detail::get<S>(f.adj);
    a = a + convert<V>(g);
    note_reached<S>(f);
  }

  // Adds to a gradient element of parameter I: atomically when concurrent
  // iterations may hit the same element (Policy::owned: they provably do not;
  // Policy::banded: only iterations near a chunk's edge may).
  template <int I, class Fr, class P>
  CTG_HOST_DEVICE static void accumulate_grad(Fr const& f, P* p, P const& g) {
    if constexpr (Fr::parallel && !Policy::template owned<I>) {
      if (f.add_may_race(Policy::template banded<I>, I)) {
        backend::atomic_add(p, g);
        return;
      }
    }
    *p = *p + g;
  }

  template <bool Need, class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx, class Gv>
  CTG_HOST_DEVICE static void backprop_node(node<op::access<I, T, R, G, D, B>, Idx...> const& n,
                                            record_t<Need, Fr, node<op::access<I, T, R, G, D, B>, Idx...>> const& t,
                                            Gv const& g, Fr& f) {
    if (!accumulates(n, f)) return;
    T* p = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return eval::element_pointer(detail::get<I>(*f.args), buffer::grad, I, f, detail::get<Is>(t.kids).value...);
    }(std::index_sequence_for<Idx...>{});
    if (eval::missing(p)) return;
    accumulate_grad<I>(f, p, convert<T>(g));
  }

  // One template level per expression level (operands of up to three
  // propagated here). Declared twice (ir::evaluated_apart_v): not inlined
  // every few levels of a tall tree where it propagates anything, inlined
  // elsewhere.
#define CTG_IMPL_BACKPROP_MATH(APART, ATTRIBUTE)                                                                      \
  template <bool Need, class Fr, class Fn, class... K, class G>                                                       \
    requires((ir::evaluated_apart_v<node<op::math<Fn>, K...>> && active<node<op::math<Fn>, K...>>) == APART)        \
  ATTRIBUTE CTG_HOST_DEVICE static void backprop(node<op::math<Fn>, K...> const& n,                                   \
                                       record_t<Need, Fr, node<op::math<Fn>, K...>> const& t, G const& g, Fr& f) {    \
    static_assert(sizeof...(K) >= 1 && sizeof...(K) <= 3, "a math node has one to three operands");                   \
    using kids = detail::tuple<K...>;                                                                                 \
    using K0 = detail::tuple_element_t<0, kids>;                                                                      \
    if constexpr (!active<node<op::math<Fn>, K...>>) {                                                                \
      return;                                                                                                         \
    } else if constexpr (sizeof...(K) == 1) {                                                                         \
      auto const& t0 = CTG_IMPL_KID_RECORD(0, t);                                                                     \
      backprop<needs<decltype(t0.value)>>(CTG_IMPL_ELEMENT(0, n.kids), t0,                                            \
                                          operand_adjoint<0, Fn, active<K0>, value_t<K0>>(g, t0.value), f);           \
    } else if constexpr (sizeof...(K) == 2) {                                                                         \
      using K1 = detail::tuple_element_t<1, kids>;                                                                    \
      auto const& t0 = CTG_IMPL_KID_RECORD(0, t);                                                                     \
      auto const& t1 = CTG_IMPL_KID_RECORD(1, t);                                                                     \
      backprop<needs<decltype(t0.value)>>(CTG_IMPL_ELEMENT(0, n.kids), t0,                                            \
                                          operand_adjoint<0, Fn, active<K0>, value_t<K0>>(g, t0.value, t1.value), f); \
      backprop<needs<decltype(t1.value)>>(CTG_IMPL_ELEMENT(1, n.kids), t1,                                            \
                                          operand_adjoint<1, Fn, active<K1>, value_t<K1>>(g, t0.value, t1.value), f); \
    } else {                                                                                                          \
      using K1 = detail::tuple_element_t<1, kids>;                                                                    \
      using K2 = detail::tuple_element_t<2, kids>;                                                                    \
      auto const& t0 = CTG_IMPL_KID_RECORD(0, t);                                                                     \
      auto const& t1 = CTG_IMPL_KID_RECORD(1, t);                                                                     \
      auto const& t2 = CTG_IMPL_KID_RECORD(2, t);                                                                     \
      backprop<needs<decltype(t0.value)>>(                                                                            \
          CTG_IMPL_ELEMENT(0, n.kids), t0,                                                                            \
          operand_adjoint<0, Fn, active<K0>, value_t<K0>>(g, t0.value, t1.value, t2.value), f);                       \
      backprop<needs<decltype(t1.value)>>(                                                                            \
          CTG_IMPL_ELEMENT(1, n.kids), t1,                                                                            \
          operand_adjoint<1, Fn, active<K1>, value_t<K1>>(g, t0.value, t1.value, t2.value), f);                       \
      backprop<needs<decltype(t2.value)>>(                                                                            \
          CTG_IMPL_ELEMENT(2, n.kids), t2,                                                                            \
          operand_adjoint<2, Fn, active<K2>, value_t<K2>>(g, t0.value, t1.value, t2.value), f);                       \
    }                                                                                                                 \
  }
  CTG_IMPL_INLINE_AND_APART(CTG_IMPL_BACKPROP_MATH)
#undef CTG_IMPL_BACKPROP_MATH

  template <bool Need, class Fr, class N, class F, class... K, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::custom<N, F>, K...> const& n,
                                            record_t<Need, Fr, node<op::custom<N, F>, K...>> const& t, G const& g,
                                            Fr& f) {
    // (a functor without backward never launches: the checks report CTG-AD-009 first)
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto const gs = n.op.fn.backward(detail::get<Is>(t.kids).value..., g);
      if constexpr (sizeof...(K) == 1) {
        backprop<needs<decltype(detail::get<0>(t.kids).value)>>(detail::get<0>(n.kids), detail::get<0>(t.kids),
                                                                convert<value_t<K>...>(gs), f);
      } else {
        (backprop<needs<decltype(detail::get<Is>(t.kids).value)>>(detail::get<Is>(n.kids), detail::get<Is>(t.kids),
                                                                  convert<value_t<K>>(detail::get<Is>(gs)), f),
         ...);
      }
    }(std::index_sequence_for<K...>{});
  }

  template <bool Need, class Fr, class T, class K, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::cast<T>, K> const& n,
                                            record_t<Need, Fr, node<op::cast<T>, K>> const& t, G const& g, Fr& f) {
    auto const& t0 = CTG_IMPL_KID_RECORD(0, t);
    backprop<needs<decltype(t0.value)>>(kid<0>(n), t0, convert<value_t<K>>(g), f);
  }

  template <bool Need, class Fr, class C, class A, class B, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::select, C, A, B> const& n,
                                            record_t<Need, Fr, node<op::select, C, A, B>> const& t, G const& g, Fr& f) {
    auto const& taken_first = CTG_IMPL_ELEMENT(1, t.kids).record;
    auto const& taken_second = CTG_IMPL_ELEMENT(2, t.kids).record;
    if (CTG_IMPL_ELEMENT(0, t.kids).value)
      backprop<needs<decltype(taken_first.value)>>(kid<1>(n), taken_first, convert<value_t<A>>(g), f);
    else
      backprop<needs<decltype(taken_second.value)>>(kid<2>(n), taken_second, convert<value_t<B>>(g), f);
  }

  template <bool Need, class Fr, class Name, class K, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::func_scope<Name>, K> const& n,
                                            record_t<Need, Fr, node<op::func_scope<Name>, K>> const& t, G const& g,
                                            Fr& f) {
    auto const& t0 = CTG_IMPL_KID_RECORD(0, t);
    backprop<needs<decltype(t0.value)>>(kid<0>(n), t0, g, f);
  }

  template <bool Need, class Fr, class V, class... I, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::component, V, I...> const& n,
                                            record_t<Need, Fr, node<op::component, V, I...>> const& t, G const& g,
                                            Fr& f) {
    using M = value_t<V>;
    using S = scalar_of_t<M>;
    auto const& vt = detail::get<0>(t.kids);
    // The coefficient of m at the recorded indices (null: out of range).
    auto const coefficient = [&](M& m) {
      return [&]<std::size_t... Js>(std::index_sequence<Js...>) {
        return eval::component_address(m, eval::component_param_v<V>, f, detail::get<Js + 1>(t.kids).value...);
      }(std::index_sequence_for<I...>{});
    };
    if constexpr (is_access_node<V>::value) {
      // One coefficient of a field element: accumulate into that coefficient only.
      if (!accumulates(kid<0>(n), f)) return;
      M* p = [&]<std::size_t... Js>(std::index_sequence<Js...>) {
        return eval::element_pointer(detail::get<V::op_type::param>(*f.args), buffer::grad, V::op_type::param, f,
                                     detail::get<Js>(vt.kids).value...);
      }(std::make_index_sequence<V::arity>{});
      if (eval::missing(p)) return;
      S* c = coefficient(*p);
      if (eval::missing(c)) return;
      accumulate_grad<V::op_type::param>(f, c, convert<S>(g));
    } else if constexpr (ir::is_local_op<typename V::op_type>) {
      // One coefficient of a local's adjoint (not a zero matrix added whole:
      // x + 0 is not x in floating point, so those adds would stay).
      update_coefficient<node<op::component, V, I...>>(local_adjoint(kid<0>(n), f), [&](M& m) {
        S* c = coefficient(m);
        if (eval::missing(c)) return S{};
        return *c = *c + convert<S>(g);
      });
    } else {
      M z = M::Zero();
      S* c = coefficient(z);
      if (eval::missing(c)) return;
      *c = convert<S>(g);
      backprop<needs<decltype(vt.value)>>(kid<0>(n), vt, z, f);
    }
  }
  template <int S, class T, class Fr>
  CTG_HOST_DEVICE static auto& local_adjoint(node<op::local<S, T>> const&, Fr& f) {
    note_reached<S>(f);
    return detail::get<S>(f.adj);
  }
  // Runs `change` (which changes the coefficient C of a local and returns a
  // value) on that local's adjoint `a`. At compile-time indices on a copy
  // of the whole adjoint, written back whole: the adjoint lives in the
  // frame, in memory when the compiler cannot keep the frame in registers,
  // and a later whole read (a let's initial value takes it at once) of
  // coefficients stored one by one cannot be forwarded from those stores.
  // The stall took two thirds of a grid update's adjoint whose two
  // components pass through selects. A copy indexed at run time (wx[i] in a
  // loop) would have to sit in memory itself: there `a` changes in place.
  template <class C, class M, class Change>
  CTG_HOST_DEVICE static auto update_coefficient(M& a, Change const& change) {
    if constexpr (fixed_coefficient_v<C>) {
      M whole = a;
      auto const result = change(whole);
      a = whole;
      return result;
    } else {
      return change(a);
    }
  }
  template <class N>
  struct is_access_node : std::false_type {};
  template <int I, class T, int R, bool G, bool D, buffer B, class... Idx>
  struct is_access_node<node<op::access<I, T, R, G, D, B>, Idx...>> : std::true_type {};

  template <bool Need, class Fr, int R, int C, class... K, class G>
  CTG_HOST_DEVICE static void backprop_node(node<op::make_matrix<R, C>, K...> const& n,
                                            record_t<Need, Fr, node<op::make_matrix<R, C>, K...>> const& t, G const& g,
                                            Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (backprop<needs<decltype(detail::get<Is>(t.kids).value)>>(detail::get<Is>(n.kids), detail::get<Is>(t.kids),
                                                                convert<value_t<K>>(g(int(Is) / C, int(Is) % C)), f),
       ...);
    }(std::index_sequence_for<K...>{});
  }

  // ---- snapshots of carried locals -------------------------------------------------------------
  template <class Body>
  static constexpr auto carried = AN::template carried<Body>();

  template <class Body, int Site, class Fr>
  CTG_HOST_DEVICE static void push_carried(Fr& f) {
    constexpr auto set = carried<Body>;
    if constexpr (!set.empty()) {
      [&]<std::size_t... Ss>(std::index_sequence<Ss...>) {
        detail::in_order{((set[int(Ss)] ? f.stack.push(detail::get<Ss>(f.locals), Site) : void()), 0)...};
      }(std::make_index_sequence<std::size_t(set.size)>{});
    }
  }
  template <class Body, class Fr>
  CTG_HOST_DEVICE static void pop_carried(Fr& f) {
    constexpr auto set = carried<Body>;
    if constexpr (!set.empty()) {
      constexpr std::size_t n = std::size_t(set.size);
      [&]<std::size_t... Ss>(std::index_sequence<Ss...>) {
        // Reverse order of the pushes.
        detail::in_order{((set[int(n - 1 - Ss)] ? f.stack.pop(detail::get<n - 1 - Ss>(f.locals)) : void()), 0)...};
      }(std::make_index_sequence<n>{});
    }
  }

  // ---- statements: recompute (forward, with saves) -----------------------------------------------
  enum class mode { recompute, plain };

  template <mode M, class Fr>
  CTG_HOST_DEVICE static void forward_stmt(node<op::nothing> const&, Fr&) {}

  template <mode M, class Fr, class... S>
  CTG_HOST_DEVICE static void forward_stmt(node<op::block, S...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (forward_stmt<M>(detail::get<Is>(n.kids), f), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <mode M, class Fr, class Name, class K>
  CTG_HOST_DEVICE static void forward_stmt(node<op::func_scope<Name>, K> const& n, Fr& f) {
    forward_stmt<M>(kid<0>(n), f);
  }
  // Primal fields are never written by the adjoint.
  template <mode M, class Fr, class L, class E>
  CTG_HOST_DEVICE static void forward_stmt(node<op::store, L, E> const&, Fr&) {}
  template <mode M, class Fr, atomic_kind K, class L, class E>
  CTG_HOST_DEVICE static void forward_stmt(node<op::atomic<K>, L, E> const&, Fr&) {}

  template <mode M, class Fr, int Site, class L, class E>
  CTG_HOST_DEVICE static void forward_stmt(node<op::assign<Site>, L, E> const& n, Fr& f) {
    if constexpr (needed(eval::assigned_local<L>::slot)) {
      if constexpr (M == mode::recompute) save_assigned<Site, L>(f);
      forward::eval(n, f);
    }
  }

  template <mode M, class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void forward_stmt(node<op::let<S...>, K...> const& n, Fr& f) {
    init_let(n, f);
    forward_stmt<M>(detail::get<sizeof...(S)>(n.kids), f);
  }
  // A let's locals the sweep needs, set to their initial values.
  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void init_let(node<op::let<S...>, K...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      constexpr int slots[] = {S...};
      auto inits = detail::make_tuple(init_if_needed<slots[Is]>(detail::get<Is>(n.kids), f)...);
      ((needed(slots[Is]) ? assign_init<slots[Is]>(detail::get<Is>(inits), f) : void()), ...);
    }(std::make_index_sequence<sizeof...(S)>{});
  }
  template <int Slot, class E, class Fr>
  CTG_HOST_DEVICE static auto init_if_needed(E const& e, Fr& f) {
    if constexpr (needed(Slot))
      return forward::eval(e, f);
    else
      return absent<value_t<E>>{};
  }
  template <int Slot, class V, class Fr>
  CTG_HOST_DEVICE static void assign_init(V const& v, Fr& f) {
    auto& slot = detail::get<Slot>(f.locals);
    slot = convert<std::remove_cvref_t<decltype(slot)>>(v);
  }
  template <int Slot, class V, class Fr>
  CTG_HOST_DEVICE static void assign_init(absent<V> const&, Fr&) {}

  template <mode M, class Fr, int Site, class C, class T, class E>
  CTG_HOST_DEVICE static void forward_stmt(node<op::if_<Site>, C, T, E> const& n, Fr& f) {
    bool const c = [&] {
      if constexpr (eval::guard_known_true_v<Fr, C>)
        return true;
      else
        return bool(forward::eval(kid<0>(n), f));
    }();
    if constexpr (M == mode::recompute) detail::get<Site>(f.locals) = c;
    if (c)
      forward_stmt<M>(kid<1>(n), f);
    else
      forward_stmt<M>(kid<2>(n), f);
  }

  template <mode M, class Fr, loop_kind K, int L, int A, int Site, class... Kids>
  CTG_HOST_DEVICE static void forward_stmt(node<op::loop<K, L, A, Site>, Kids...> const& n, Fr& f) {
    int lo[A], hi[A];
    forward::bounds(n, f, lo, hi);
    using Body = std::remove_cvref_t<decltype(detail::get<2 * A>(n.kids))>;
    auto const& body = detail::get<2 * A>(n.kids);
    if constexpr (M == mode::recompute) {
      save_bounds<Site>(lo, hi, f);
      forward::iterate<L, A>(lo, hi, f, [&] {
        push_carried<Body, Site>(f);
        forward_stmt<mode::plain>(body, f);
      });
    } else {
      forward::iterate<L, A>(lo, hi, f, [&] { forward_stmt<mode::plain>(body, f); });
    }
  }

  // A loop's bounds, in its site slot for the sweep.
  template <int Site, int A, class Fr>
  CTG_HOST_DEVICE static void save_bounds(int const (&lo)[A], int const (&hi)[A], Fr& f) {
    auto& saved = detail::get<Site>(f.locals);
    for (int a = 0; a < A; ++a) saved.lo[a] = lo[a], saved.hi[a] = hi[a];
  }

  template <mode M, class Fr, int Site, class C, class B>
  CTG_HOST_DEVICE static void forward_stmt(node<op::while_<Site>, C, B> const& n, Fr& f) {
    int count = 0;
    while (forward::eval(kid<0>(n), f)) {
      if constexpr (M == mode::recompute) push_carried<B, Site>(f);
      forward_stmt<mode::plain>(kid<1>(n), f);
      ++count;
    }
    if constexpr (M == mode::recompute) detail::get<Site>(f.locals) = count;
  }

  // ---- statements: the reverse sweep ---------------------------------------------------------------
  template <class Fr>
  CTG_HOST_DEVICE static void rev(node<op::nothing> const&, Fr&) {}

  template <class Fr, class... S>
  CTG_HOST_DEVICE static void rev(node<op::block, S...> const& n, Fr& f) {
    constexpr std::size_t count = sizeof...(S);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (rev(detail::get<count - 1 - Is>(n.kids), f), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <class Fr, class Name, class K>
  CTG_HOST_DEVICE static void rev(node<op::func_scope<Name>, K> const& n, Fr& f) {
    rev(kid<0>(n), f);
  }

  // Reads the gradients of the fixed elements the offload only accumulates
  // into, once per thread (see reverse_plan::seeds).
  template <class Fr>
  CTG_HOST_DEVICE static void load_seeds(Fr& f) {
    if constexpr (requires { typename Fr::reduction_dests; }) {
      [&]<class... L>(detail::type_list<L...>*) { (load_seed<L>(f), ...); }(
          static_cast<typename Fr::reduction_dests*>(nullptr));
    }
  }
  // The gradient load_seeds read for destination L, when it could.
  template <class L, class Fr, class P>
  CTG_HOST_DEVICE static bool cached_seed(Fr const& f, P& seed) {
    constexpr int slot = eval::partial_index<Fr, L>();
    if constexpr (slot >= 0) {
      if (f.used[slot]) seed = detail::get<slot>(f.partials);
      return f.used[slot];
    } else {
      return false;
    }
  }
  template <class L, class Fr>
  CTG_HOST_DEVICE static void load_seed(Fr& f) {
    constexpr int slot = eval::partial_index<Fr, L>();
    using T = typename L::op_type::value_type;
    if constexpr (!L::op_type::has_grad) {
      // A sum into a field without gradient: no buffer to read.
      f.used[slot] = false;
      detail::get<slot>(f.partials) = zero_of<T>();
    } else {
      auto const& view = detail::get<L::op_type::param>(*f.args);
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        // The indices are compile-time constants (eval/reduction.hpp).
        bool const ok = view.in_bounds(forward::eval(detail::get<Is>(L{}.kids), f)...);
        f.used[slot] = ok;
        detail::get<slot>(f.partials) =
            ok ? load_element(detail::buffer_element(view, 1, forward::eval(detail::get<Is>(L{}.kids), f)...))
               : zero_of<T>();
      }(std::make_index_sequence<L::arity>{});
    }
  }

  // The gradient element a store or atomic writes (null when out of range).
  template <class Fr, class L>
  CTG_HOST_DEVICE static auto* written_grad(L const& lhs, Fr& f) {
    if constexpr (is_access_node<L>::value) {
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        return eval::element_pointer(detail::get<L::op_type::param>(*f.args), buffer::grad, L::op_type::param, f,
                                     forward::eval(detail::get<Is>(lhs.kids), f)...);
      }(std::make_index_sequence<L::arity>{});
    } else {  // component of an access
      auto const& acc = kid<0>(lhs);
      auto* p = written_grad(acc, f);
      using S = scalar_of_t<std::remove_pointer_t<decltype(p)>>;
      if (eval::missing(p)) return static_cast<S*>(nullptr);
      return forward::component_in(*p, lhs, f);
    }
  }

  // A write of a field whose stores may write one element in two iterations
  // (Policy::claims) claims its element's coefficients for its iteration
  // (eval/store_claims.hpp), and reports a claim that conflicts with another
  // iteration's write (CTG-AD-013).
  template <eval::write_kind Kind, class Fr, class L>
  CTG_HOST_DEVICE static void claim_written(L const& lhs, Fr& f) {
#if !CTG_DEVICE_PASS
    using A = typename written_access<L>::type;
    constexpr int param = A::op_type::param;
    if constexpr (Fr::parallel && Policy::template claims<param>) {
      static_assert(param < eval::max_claimed_params,
                    "a field whose stores the adjoint checks as it runs (CTG-AD-013) must be one of the kernel's "
                    "first 64 parameters; pass it earlier");
      constexpr int rank = A::op_type::rank;
      using T = typename A::op_type::value_type;
      constexpr int scalars = coefficients_v<T>;
      A const* acc;
      if constexpr (is_access_node<L>::value)
        acc = &lhs;
      else
        acc = &kid<0>(lhs);
      int const* extent = detail::get<param>(*f.args).extent;
      long long index[rank > 0 ? rank : 1] = {};
      std::int64_t const element = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((index[Is] = (long long)forward::eval(detail::get<Is>(acc->kids), f)), ...);
        return detail::row_major_number(extent, index[Is]...);
      }(std::make_index_sequence<std::size_t(rank)>{});
      std::int64_t const elements = detail::extents_count<rank>(extent);
      // One coefficient (v[i][k], or m[i](r, c) as its place r + c * rows in
      // the storage), or all of the element's.
      int first = 0, last = scalars;
      if constexpr (!is_access_node<L>::value) {
        first = int(forward::eval(kid<1>(lhs), f));
        if constexpr (L::arity == 3) first += int(forward::eval(kid<2>(lhs), f)) * int(T::RowsAtCompileTime);
        last = first + 1;
      }
      std::uint64_t const who = eval::iteration_mark(f.idx[0], Policy::axes);
      for (int c = first; c < last; ++c)
        if (!eval::claim_scalar(*f.status, param, elements * scalars, element * scalars + c, who, Kind)) {
          eval::report_element_at(f.status, eval::failure::store_conflict, param, rank, index);
          return;
        }
    }
#else
    (void)lhs, (void)f;
#endif
  }

  // A store of a value with a gradient keeps its element from every other
  // iteration; stores of values without one may share it where the offload
  // does not read the field (Policy::resets_share).
  template <class L, class E>
  static constexpr eval::write_kind stored_kind =
      !active<E> && Policy::template resets_share<written_access<L>::type::op_type::param> ? eval::write_kind::clears
                                                                                          : eval::write_kind::exclusive;

  template <class Fr, class L, class E>
  CTG_HOST_DEVICE static void rev(node<op::store, L, E> const& n, Fr& f) {
    using A = typename written_access<L>::type;
    if constexpr (WithPrimal) {
      // The rhs never reads the written field (ad/fusion.hpp): its value,
      // the write, then the adjoint and the clearing, in any order.
      auto const t = record<true>(kid<1>(n), f);
      forward::write(kid<0>(n), t.value, f);
      if constexpr (A::op_type::has_grad && A::op_type::which == buffer::primal) {
        auto* p = written_grad(kid<0>(n), f);
        if (eval::missing(p)) return;
        claim_written<stored_kind<L, E>>(kid<0>(n), f);
        using P = std::remove_pointer_t<decltype(p)>;
        P const g = load_element(p);
        *p = zero<P>();
        if constexpr (active<E>) backprop<needs<decltype(t.value)>>(kid<1>(n), t, convert<value_t<E>>(g), f);
      }
    } else if constexpr (A::op_type::has_grad && A::op_type::which == buffer::primal && gathering) {
      // A replay gathers from the seed; the clearing sweep clears it.
      auto* p = written_grad(kid<0>(n), f);
      if (eval::missing(p)) return;
      using P = std::remove_pointer_t<decltype(p)>;
      if (f.clearing) {
        claim_written<stored_kind<L, E>>(kid<0>(n), f);  // the sweep that runs each iteration once
        *p = zero<P>();
      } else if constexpr (active<E>) {
        backprop<false>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(load_element(p)), f);
      }
    } else if constexpr (A::op_type::has_grad && A::op_type::which == buffer::primal) {
      auto* p = written_grad(kid<0>(n), f);
      if (eval::missing(p)) return;
      claim_written<stored_kind<L, E>>(kid<0>(n), f);
      using P = std::remove_pointer_t<decltype(p)>;
      P const g = load_element(p);
      // An update in place, x[i] = x[i] + r (or - r, or more terms): the old
      // element's gradient is the new one's, so it stays where it is and
      // only r's operands receive. Without this the element would be
      // cleared and added back, a store that dirties a cache line of every
      // gradient an update leaves unchanged (measured: a third more traffic
      // in the adjoint of a particle step). The indices of the read are
      // compared at run time, since runtime literals of one type may differ
      // (x[i + a] = x[i + b] + r).
      if constexpr (active<E> && sums_onto<L, E>::value) {
        if (same_element(kid<0>(n), kid<1>(n), f)) {
          backprop_beside<L>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(g), f);
          return;
        }
      }
      // The store overwrote the element: its old value gets no gradient. The
      // clearing waits until the rhs's adjoints are accumulated whenever the
      // rhs cannot add into this element: a GPU that stores to one buffer and
      // then loads another in the same thread runs the pair about seven times
      // slower (measured on an H200). That is known at compile time when the
      // rhs never reads this field, and per launch when every read of it
      // differs from the store in an invariant index (u(t, i - 1) against
      // u(t + 1, i)); otherwise the element is cleared first.
      if (clear_after<A::op_type::param>(kid<0>(n), kid<1>(n), f)) {
        if constexpr (active<E>) backprop<false>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(g), f);
        *p = zero<P>();
      } else {
        *p = zero<P>();
        if constexpr (active<E>) backprop<false>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(g), f);
      }
    }
  }

  // Whether E is the written access L plus or minus other terms, L itself
  // with coefficient one: L, X + Y or X - Y with L so in X (or in Y for +).
  template <class L, class E>
  struct sums_onto : std::bool_constant<std::is_same_v<L, E> && active<E>> {};
  template <class L, class X, class Y>
  struct sums_onto<L, node<op::math<fn::add>, X, Y>>
      : std::bool_constant<sums_onto<L, X>::value || sums_onto<L, Y>::value> {};
  template <class L, class X, class Y>
  struct sums_onto<L, node<op::math<fn::sub>, X, Y>> : sums_onto<L, X> {};

  // The read of L that E sums onto (the first operand's first).
  template <class L, class E>
  CTG_HOST_DEVICE static L const& summed_read(E const& e) {
    if constexpr (std::is_same_v<L, E>)
      return e;
    else if constexpr (sums_onto<L, std::remove_cvref_t<decltype(kid<0>(e))>>::value)
      return summed_read<L>(kid<0>(e));
    else
      return summed_read<L>(kid<1>(e));
  }
  // Whether that read has the written element's indices.
  template <class L, class E, class Fr>
  CTG_HOST_DEVICE static bool same_element(L const& lhs, E const& rhs, Fr& f) {
    L const& read = summed_read<L>(rhs);
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return ((forward::eval(detail::get<Is>(lhs.kids), f) == forward::eval(detail::get<Is>(read.kids), f)) && ...);
    }(std::make_index_sequence<L::arity>{});
  }

  // backprop of E except into that read of L (the operand adjoints of + and
  // - are g and -g; the rules say so for every operand type).
  template <class L, class T, class G, class Fr>
  CTG_HOST_DEVICE static void backprop_beside(L const&, T const&, G const&, Fr&) {}
  template <class L, class Fn, class X, class Y, class T, class G, class Fr>
  CTG_HOST_DEVICE static void backprop_beside(node<op::math<Fn>, X, Y> const& e, T const& t, G const& g, Fr& f) {
    auto const& t0 = CTG_IMPL_KID_RECORD(0, t);
    auto const& t1 = CTG_IMPL_KID_RECORD(1, t);
    if constexpr (sums_onto<L, X>::value) {
      backprop_beside<L>(kid<0>(e), t0, operand_adjoint<0, Fn, active<X>, value_t<X>>(g, t0.value, t1.value), f);
      backprop<needs<decltype(t1.value)>>(
          kid<1>(e), t1, operand_adjoint<1, Fn, active<Y>, value_t<Y>>(g, t0.value, t1.value), f);
    } else {
      backprop<needs<decltype(t0.value)>>(
          kid<0>(e), t0, operand_adjoint<0, Fn, active<X>, value_t<X>>(g, t0.value, t1.value), f);
      backprop_beside<L>(kid<1>(e), t1, operand_adjoint<1, Fn, active<Y>, value_t<Y>>(g, t0.value, t1.value), f);
    }
  }

  // Whether the written access `w` and the read at `Path` in `rhs` have an
  // axis with invariant indices of different values (then they never meet).
  template <class W, class Path, class R, class Fr>
  CTG_HOST_DEVICE static bool differs_invariantly(W const& w, R const& rhs, Fr& f) {
    return differ_in_invariant_index(w, node_at<Path>::get(rhs), f);
  }

  template <int I, class L, class E, class Fr>
  CTG_HOST_DEVICE static bool clear_after(L const& lhs, E const& rhs, Fr& f) {
    using paths = typename access_paths<I, E>::type;
    if constexpr (std::is_same_v<paths, detail::type_list<>>) {
      return true;
    } else {
      auto const& w = written_access_of(lhs);
      return [&]<class... Ps>(detail::type_list<Ps...>) {
        return (differs_invariantly<std::remove_cvref_t<decltype(w)>, Ps>(w, rhs, f) && ...);
      }(paths{});
    }
  }


  template <class Fr, atomic_kind K, class L, class E>
  CTG_HOST_DEVICE static void rev(node<op::atomic<K>, L, E> const& n, Fr& f) {
    using A = typename written_access<L>::type;
    if constexpr (WithPrimal) {
      auto const t = record<true>(kid<1>(n), f);
      accumulate_value<K, L>(kid<0>(n), t.value, f);
      adjoint_of_accumulation<K, A>(n, t, f);
    } else if constexpr (A::op_type::has_grad && active<E>) {
      adjoint_of_accumulation<K, A>(n, record<false>(kid<1>(n), f), f);
    }
  }
  // (min and max into a gradient field never launch: the checks report CTG-AD-008 first)
  template <atomic_kind K, class A, class Fr, class L, class E, class T>
  CTG_HOST_DEVICE static void adjoint_of_accumulation(node<op::atomic<K>, L, E> const& n, T const& t, Fr& f) {
    if constexpr (A::op_type::has_grad && A::op_type::which == buffer::primal &&
                  (K == atomic_kind::add || K == atomic_kind::sub)) {
      if constexpr (active<E>) {
        using P = std::remove_pointer_t<decltype(written_grad(kid<0>(n), f))>;
        P seed;
        if (!cached_seed<L>(f, seed)) {
          auto* p = written_grad(kid<0>(n), f);  // out of range: reports
          if (eval::missing(p)) return;
          claim_written<eval::write_kind::adds>(kid<0>(n), f);
          seed = load_element(p);
        }
        P const g = K == atomic_kind::add ? seed : P(-seed);
        backprop<needs<decltype(t.value)>>(kid<1>(n), t, convert<value_t<E>>(g), f);
      }
    }
  }
  // The forward pass's accumulation, into the thread's partial sum of a
  // privatised element (eval::primal_reduction_frame) or into the field.
  template <atomic_kind K, class L, class Fr, class V>
  CTG_HOST_DEVICE static void accumulate_value(L const& lhs, V const& v, Fr& f) {
    constexpr int slot = eval::partial_index<Fr, L>();
    if constexpr (slot >= 0) {
      forward::template add_to_partial<K, L>(detail::get<slot>(f.primal_partials), f.primal_used[slot], v);
    } else {
      constexpr int param = written_access<L>::type::op_type::param;
      forward::template accumulate_at<K, Policy::template owned<param>, Policy::template banded<param>>(lhs, v, f);
    }
  }

  template <class Fr, int Site, class L, class E>
  CTG_HOST_DEVICE static void rev(node<op::assign<Site>, L, E> const& n, Fr& f) {
    constexpr int slot = eval::assigned_local<L>::slot;
    using T = typename eval::assigned_local<L>::type;
    if constexpr (needed(slot)) detail::get<slot>(f.locals) = detail::get<Site>(f.locals);
    if constexpr (active_slot(slot) && is_differentiable_v<T>) {
      auto& a = detail::get<slot>(f.adj);
      if constexpr (std::is_same_v<L, node<op::local<slot, T>>>) {
        T const g = a;
        a = zero<T>();
        bool const reached = take_reached<slot>(f);
        if constexpr (active<E> && assignment_read(Site))
          if (reached) backprop<false>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(g), f);
      } else {
        if (!was_reached<slot>(f)) return;  // no read took the local's adjoint: nothing to pass
        auto const& lhs = kid<0>(n);
        auto const g = update_coefficient<L>(a, [&](T& m) {
          auto* c = forward::component_in(m, lhs, f);
          if (eval::missing(c)) return typename T::Scalar{};
          auto const taken = *c;
          *c = 0;
          return taken;
        });
        if constexpr (active<E>) backprop<false>(kid<1>(n), record<false>(kid<1>(n), f), convert<value_t<E>>(g), f);
      }
    }
  }

  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void rev(node<op::let<S...>, K...> const& n, Fr& f) {
    rev(detail::get<sizeof...(S)>(n.kids), f);
    rev_let_inits(n, f);
  }
  // The adjoints of a let's locals, into their initial values, last first.
  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void rev_let_inits(node<op::let<S...>, K...> const& n, Fr& f) {
    constexpr std::size_t count = sizeof...(S);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      constexpr int slots[] = {S...};
      (rev_init<slots[count - 1 - Is]>(detail::get<count - 1 - Is>(n.kids), f), ...);
    }(std::make_index_sequence<count>{});
  }
  template <int Slot, class E, class Fr>
  CTG_HOST_DEVICE static void rev_init(E const& init, Fr& f) {
    if constexpr (active_slot(Slot)) {
      auto& a = detail::get<Slot>(f.adj);
      using T = std::remove_cvref_t<decltype(a)>;
      T const g = a;
      a = zero<T>();
      bool const reached = take_reached<Slot>(f);
      if constexpr (active<E> && AN::init_read(Slot))
        if (reached) backprop<false>(init, record<false>(init, f), convert<value_t<E>>(g), f);
    }
  }

  template <class Fr, int Site, class C, class T, class E>
  CTG_HOST_DEVICE static void rev(node<op::if_<Site>, C, T, E> const& n, Fr& f) {
    if (detail::get<Site>(f.locals))  // the recompute's choice (true for a guard known to hold)
      rev(kid<1>(n), f);
    else
      rev(kid<2>(n), f);
  }

  // One iteration of a nested loop in reverse: get back the carried locals,
  // recompute the body's own locals, sweep it.
  template <class Body, class Fr>
  CTG_HOST_DEVICE static void rev_iteration(Body const& body, Fr& f) {
    pop_carried<Body>(f);
    recompute_iteration(body, f);
    rev(body, f);
  }
  // The recompute of one iteration before its sweep. The value a final
  // assignment computes is never read: the sweep starts with that
  // assignment, which puts the old value back, and the next iteration pops
  // its own snapshot. So only the old value is saved (in `v = sin(v) a + b`
  // the sweep then takes cos(v) alone, not sin(v) too).
  template <class Body, class Fr>
  CTG_HOST_DEVICE static void recompute_iteration(Body const& body, Fr& f) {
    recompute_steps(
        body, [&](auto const& s) { forward_stmt<mode::recompute>(s, f); },
        [&](auto const& final_assignment) { save_final(final_assignment, f); });
  }
  // The steps of that recompute, shared with the interleaved sweep
  // (ad/interleave.hpp), which runs each on all its lanes: `forward(s)`
  // recomputes statement s, `save(a)` only saves the old value of the final
  // assignment a.
  template <class Body, class Forward, class Save>
  CTG_HOST_DEVICE static void recompute_steps(Body const& body, Forward const& forward, Save const&) {
    forward(body);
  }
  template <class... S, class Forward, class Save>
    requires(sizeof...(S) > 0)
  CTG_HOST_DEVICE static void recompute_steps(node<op::block, S...> const& n, Forward const& forward, Save const& save) {
    constexpr std::size_t last = sizeof...(S) - 1;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (forward(detail::get<Is>(n.kids)), ...);
    }(std::make_index_sequence<last>{});
    recompute_steps(detail::get<last>(n.kids), forward, save);
  }
  template <int Site, class L, class E, class Forward, class Save>
  CTG_HOST_DEVICE static void recompute_steps(node<op::assign<Site>, L, E> const& n, Forward const&, Save const& save) {
    save(n);
  }
  template <int Site, class L, class E, class Fr>
  CTG_HOST_DEVICE static void save_final(node<op::assign<Site>, L, E> const&, Fr& f) {
    save_assigned<Site, L>(f);
  }
  // What an assignment's recompute saves for its sweep: the old value.
  template <int Site, class L, class Fr>
  CTG_HOST_DEVICE static void save_assigned(Fr& f) {
    constexpr int slot = eval::assigned_local<L>::slot;
    if constexpr (needed(slot)) detail::get<Site>(f.locals) = detail::get<slot>(f.locals);
  }

  template <int L, int A, int Axis = 0, class Fr, class Visit>
  CTG_HOST_DEVICE static void iterate_backwards(int const (&lo)[A], int const (&hi)[A], Fr& f, Visit&& visit) {
    if constexpr (Axis == A) {
      visit();
    } else {
      for (int j = hi[Axis] - 1; j >= lo[Axis]; --j) {
        f.idx[L][Axis] = j;
        iterate_backwards<L, A, Axis + 1>(lo, hi, f, visit);
      }
    }
  }

  template <class Fr, loop_kind K, int L, int A, int Site, class... Kids>
  CTG_HOST_DEVICE static void rev(node<op::loop<K, L, A, Site>, Kids...> const& n, Fr& f) {
    auto const& saved = detail::get<Site>(f.locals);
    int lo[A], hi[A];
    for (int a = 0; a < A; ++a) lo[a] = saved.lo[a], hi[a] = saved.hi[a];
    auto const& body = detail::get<2 * A>(n.kids);
    iterate_backwards<L, A>(lo, hi, f, [&] { rev_iteration(body, f); });
  }

  template <class Fr, int Site, class C, class B>
  CTG_HOST_DEVICE static void rev(node<op::while_<Site>, C, B> const& n, Fr& f) {
    for (int c = detail::get<Site>(f.locals) - 1; c >= 0; --c) rev_iteration(kid<1>(n), f);
  }

  // ---- one body: an iteration of the parallel loop, or a serial offload ---------------------------
  template <class Body, class Fr>
  CTG_HOST_DEVICE static void run_body(Body const& body, Fr& f) {
    forward_stmt<mode::recompute>(body, f);
    if (!f.stack.overflowed()) rev(body, f);
  }
};

}  // namespace ctg::ad
