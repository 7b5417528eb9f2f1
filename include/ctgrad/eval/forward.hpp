// The forward evaluator: runs lowered IR on a frame. Every function is
// CTG_HOST_DEVICE, so the CPU and CUDA backends share it. The overloads are
// static members of one struct so that each can call any other regardless of
// declaration order.
#pragma once
#include <type_traits>
#include <utility>

#include "../memory/atomic.hpp"
#include "../ir/custom.hpp"
#include "../ir/expr.hpp"
#include "../lower/normalize.hpp"
#include "frame.hpp"
#include "index_guards.hpp"
#include "reduction.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::eval {

CTG_IMPL_IR_VOCABULARY;


// Converts a value to a field or local's element type (C++ conversion rules;
// Eigen matrices convert coefficient-wise).
template <class T, class V>
CTG_HOST_DEVICE T convert(V const& v) {
  if constexpr (std::is_same_v<T, V>)
    return v;
  else if constexpr (is_eigen_fixed_v<T> && is_eigen_fixed_v<V>)
    return v.template cast<typename T::Scalar>();
  else if constexpr (is_eigen_fixed_v<T>) {
    static_assert(detail::dependent_false<T, V>,
                  "CTG-EXPR-013 assigning a scalar to a vector or matrix element; build the "
                  "value with ctg::vec / ctg::mat, or write one component");
    return zero_of<T>();
  } else {
    static_assert(!is_eigen_fixed_v<V>,
                  "CTG-EXPR-013 assigning a vector or matrix to a scalar element or local");
    return static_cast<T>(v);
  }
}

// Where a field access points: the element, or null when its index is out of
// range (checked builds; the failure is recorded in the launch status).
template <class View, class Fr, class... I>
CTG_HOST_DEVICE auto* element_pointer(View const& v, buffer which, int param, Fr& f, I... idx) {
#if CTG_BOUNDS_CHECK
  if (!v.in_bounds(idx...)) [[unlikely]] {
    report_index(f.status, param, idx...);
    return static_cast<typename View::value_type*>(nullptr);
  }
#else
  (void)f, (void)param;
#endif
  return detail::buffer_element(v, int(which), idx...);
}

// Whether element_pointer found its index out of range. Never in unchecked
// builds, where the test then costs nothing: the compiler cannot prove a
// field pointer non-null by itself.
template <class T>
CTG_HOST_DEVICE constexpr bool missing(T const* p) {
#if CTG_BOUNDS_CHECK
  return p == nullptr;
#else
  (void)p;
  return false;
#endif
}

// Where a component access points in the vector or matrix m: the
// coefficient, or null when an index is out of range (checked builds; the
// failure is recorded in the launch status with the field parameter whose
// element m is, or -1). Every pass reads and writes components through it.
// Constant indices are checked at compile time (CTG-EXPR-009); an index
// computed at run time (a loop index, a value read from a field) only here,
// where Eigen's coeff() would read or write past the matrix.
template <class M, class Fr, class... K>
CTG_HOST_DEVICE auto* component_address(M& m, int param, Fr const& f, K... k) {
#if CTG_BOUNDS_CHECK
  using S = std::remove_reference_t<decltype(m.coeffRef(k...))>;
  using Plain = std::remove_cv_t<M>;
  long long const index[2] = {(long long)(k)...};
  bool const inside = sizeof...(K) == 1
                          ? index[0] >= 0 && index[0] < Plain::SizeAtCompileTime
                          : index[0] >= 0 && index[0] < Plain::RowsAtCompileTime && index[sizeof...(K) - 1] >= 0 &&
                                index[sizeof...(K) - 1] < Plain::ColsAtCompileTime;
  if (!inside) [[unlikely]] {
    long long const recorded[4] = {index[0], index[1], Plain::RowsAtCompileTime, Plain::ColsAtCompileTime};
    report_element_at(f.status, failure::component_out_of_range, param, int(sizeof...(K)), recorded, 4);
    return static_cast<S*>(nullptr);
  }
#else
  (void)f, (void)param;
#endif
  return &m.coeffRef(k...);
}
// The field parameter whose element a component access's operand is (-1: a
// local or a computed value), for the message of an index out of range.
template <class V>
constexpr int component_param() {
  if constexpr (ir::is_access_op<typename V::op_type>)
    return V::op_type::param;
  else
    return -1;
}
template <class V>
inline constexpr int component_param_v = component_param<V>();

struct forward {
  // ---- leaves ---------------------------------------------------------------
  template <class Fr, class T>
  CTG_HOST_DEVICE static T eval(node<op::literal<T>> const& n, Fr&) {
    return n.op.read();
  }
  template <class Fr, long long N>
  CTG_HOST_DEVICE static int eval(node<op::constant<N>> const&, Fr&) {
    return int(N);
  }
  template <class Fr, int L, int A>
  CTG_HOST_DEVICE static int eval(node<op::loop_index<L, A>> const&, Fr& f) {
    return f.idx[L][A];
  }
  template <class Fr, int S, class T>
  CTG_HOST_DEVICE static T eval(node<op::local<S, T>> const&, Fr& f) {
    return detail::get<S>(f.locals);
  }
  template <class Fr, int I, int A>
  CTG_HOST_DEVICE static int eval(node<op::extent<I, A>> const&, Fr& f) {
    return detail::get<I>(*f.args).extent[A];
  }

  template <class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx>
  CTG_HOST_DEVICE static T* address(node<op::access<I, T, R, G, D, B>, Idx...> const& n, Fr& f) {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return element_pointer(detail::get<I>(*f.args), B, I, f, eval(detail::get<Is>(n.kids), f)...);
    }(std::index_sequence_for<Idx...>{});
  }
  template <class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx>
  CTG_HOST_DEVICE static T eval(node<op::access<I, T, R, G, D, B>, Idx...> const& n, Fr& f) {
    T const* p = address(n, f);
    if (missing(p)) return zero_of<T>();
    return load_element(p);
  }

  // ---- expressions ----------------------------------------------------------
  // Operands of up to three evaluated here, not in a lambda: one template
  // level per expression level, so that deep expressions stay within the
  // compilers' default instantiation depth.
  // Declared twice (ir::evaluated_apart_v): not inlined every few levels
  // of a tall tree, inlined elsewhere.
#define CTG_IMPL_EVAL_MATH(APART, ATTRIBUTE)                                                          \
  template <class Fr, class Fn, class... K>                                                         \
    requires(ir::evaluated_apart_v<node<op::math<Fn>, K...>> == APART)                              \
  ATTRIBUTE CTG_HOST_DEVICE static auto eval(node<op::math<Fn>, K...> const& n, Fr& f) {            \
    if constexpr (sizeof...(K) == 1) {                                                              \
      return Fn::apply(eval(CTG_IMPL_ELEMENT(0, n.kids), f));                                       \
    } else if constexpr (fn::short_circuits_v<Fn>) {                                                \
      bool const first = bool(eval(CTG_IMPL_ELEMENT(0, n.kids), f));                                \
      return first == fn::short_circuit_v<Fn> ? first : bool(eval(CTG_IMPL_ELEMENT(1, n.kids), f)); \
    } else if constexpr (sizeof...(K) == 2) {                                                       \
      return Fn::apply(eval(CTG_IMPL_ELEMENT(0, n.kids), f), eval(CTG_IMPL_ELEMENT(1, n.kids), f)); \
    } else if constexpr (sizeof...(K) == 3) {                                                       \
      return Fn::apply(eval(CTG_IMPL_ELEMENT(0, n.kids), f), eval(CTG_IMPL_ELEMENT(1, n.kids), f),  \
                       eval(CTG_IMPL_ELEMENT(2, n.kids), f));                                       \
    } else {                                                                                        \
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {                                   \
        return Fn::apply(eval(detail::get<Is>(n.kids), f)...);                                      \
      }(std::index_sequence_for<K...>{});                                                           \
    }                                                                                               \
  }
  CTG_IMPL_INLINE_AND_APART(CTG_IMPL_EVAL_MATH)
#undef CTG_IMPL_EVAL_MATH
  template <class Fr, class N, class F, class... K>
  CTG_HOST_DEVICE static auto eval(node<op::custom<N, F>, K...> const& n, Fr& f) {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return n.op.fn.forward(eval(detail::get<Is>(n.kids), f)...);
    }(std::index_sequence_for<K...>{});
  }
  template <class Fr, class T, class K>
  CTG_HOST_DEVICE static T eval(node<op::cast<T>, K> const& n, Fr& f) {
    auto v = eval(kid<0>(n), f);
    if constexpr (is_eigen_fixed_v<T>)
      return v.template cast<typename T::Scalar>();
    else
      return static_cast<T>(v);
  }
  template <class Fr, class C, class A, class B>
  CTG_HOST_DEVICE static auto eval(node<op::select, C, A, B> const& n, Fr& f) {
    using V = value_t<node<op::select, C, A, B>>;
    if constexpr (guard_known_true_v<Fr, C>)
      return convert<V>(eval(kid<1>(n), f));
    else
      return eval(kid<0>(n), f) ? convert<V>(eval(kid<1>(n), f)) : convert<V>(eval(kid<2>(n), f));
  }
  template <class Fr, class K>
  CTG_HOST_DEVICE static auto eval(node<op::stop_grad, K> const& n, Fr& f) {
    return eval(kid<0>(n), f);
  }
  template <class Fr, class V, class... I>
  CTG_HOST_DEVICE static auto eval(node<op::component, V, I...> const& n, Fr& f) {
    auto v = eval(kid<0>(n), f);
    auto const* c = component_in(std::as_const(v), n, f);
    if (missing(c)) return scalar_of_t<decltype(v)>{};
    return *c;
  }
  template <class Fr, int R, int C, class... K>
  CTG_HOST_DEVICE static auto eval(node<op::make_matrix<R, C>, K...> const& n, Fr& f) {
    using M = value_t<node<op::make_matrix<R, C>, K...>>;
    using S = typename M::Scalar;
    M m;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      // Arguments come row by row.
      ((m(int(Is) / C, int(Is) % C) = S(eval(detail::get<Is>(n.kids), f))), ...);
    }(std::index_sequence_for<K...>{});
    return m;
  }
  template <class Fr, class Name, class K>
  CTG_HOST_DEVICE static auto eval(node<op::func_scope<Name>, K> const& n, Fr& f) {
    return eval(kid<0>(n), f);
  }

  // ---- statements -----------------------------------------------------------
  template <class Fr>
  CTG_HOST_DEVICE static void eval(node<op::nothing> const&, Fr&) {}

  template <class Fr, class... S>
  CTG_HOST_DEVICE static void eval(node<op::block, S...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (eval(detail::get<Is>(n.kids), f), ...);
    }(std::index_sequence_for<S...>{});
  }

  // The element a store or an atomic writes: a field element or one component.
  template <class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx, class V>
  CTG_HOST_DEVICE static void write(node<op::access<I, T, R, G, D, B>, Idx...> const& lhs, V const& v, Fr& f) {
    T* p = address(lhs, f);
    if (missing(p)) return;
    *p = convert<T>(v);
  }
  template <class Fr, class A, class... I, class V>
  CTG_HOST_DEVICE static void write(node<op::component, A, I...> const& lhs, V const& v, Fr& f) {
    auto* p = address(kid<0>(lhs), f);
    if (missing(p)) return;
    using S = scalar_of_t<std::remove_pointer_t<decltype(p)>>;
    S* c = component_in(*p, lhs, f);
    if (missing(c)) return;
    *c = convert<S>(v);
  }
  // The coefficient of m that the component access n names (null: out of
  // range, in checked builds), its indices evaluated here; a constant index
  // past the end is CTG-EXPR-009.
  template <class Fr, class M, class A, class... I>
  CTG_HOST_DEVICE static auto* component_in(M& m, node<op::component, A, I...> const& n, Fr& f) {
    static_assert(ir::component_indices_within<std::remove_cv_t<M>, I...>(), CTG_IMPL_MSG_COMPONENT_RANGE);
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return component_address(m, component_param_v<A>, f, eval(kid<Is + 1>(n), f)...);
    }(std::index_sequence_for<I...>{});
  }
  template <class Fr, class L, class E>
  CTG_HOST_DEVICE static void eval(node<op::store, L, E> const& n, Fr& f) {
    write(kid<0>(n), eval(kid<1>(n), f), f);
  }

  template <atomic_kind K, bool Owned = false, bool Banded = false, int Param = -1, class Fr, class T, class V>
  CTG_HOST_DEVICE static void accumulate(Fr const& f, T* p, V const& v) {
    T const x = convert<T>(v);
    if constexpr (Fr::parallel && !Owned) {
      if (f.add_may_race(Banded, Param)) {
        if constexpr (K == atomic_kind::add) backend::atomic_add(p, x);
        else if constexpr (K == atomic_kind::sub) backend::atomic_add(p, T(-x));
        else if constexpr (K == atomic_kind::min) backend::atomic_min(p, x);
        else backend::atomic_max(p, x);
        return;
      }
    }
    if constexpr (K == atomic_kind::add) *p = T(*p + x);
    else if constexpr (K == atomic_kind::sub) *p = T(*p - x);
    else if constexpr (K == atomic_kind::min) *p = x < *p ? x : *p;
    else *p = *p < x ? x : *p;
  }
  // Adds a thread's privatised partial sums to their elements, once.
  template <class Fr>
  CTG_HOST_DEVICE static void flush_partials(Fr& f) {
    if constexpr (requires { typename Fr::reduction_dests; }) flush_sums(f, f.partials, f.used);
  }
  // The same for sums kept apart from `partials` (ad::reverse_plan with the
  // primal values: its partials hold the gradients it reads).
  template <class Fr, class Sums>
  CTG_HOST_DEVICE static void flush_sums(Fr& f, Sums const& sums, bool const* used) {
    [&]<class... L>(detail::type_list<L...>*) {
      ((used[partial_index<Fr, L>()] ? flush_partial(f, address(L{}, f), detail::get<partial_index<Fr, L>()>(sums))
                                     : void()),
       ...);
    }(static_cast<typename Fr::reduction_dests*>(nullptr));
  }
  template <class Fr, class T>
  CTG_HOST_DEVICE static void flush_partial(Fr const& f, T* p, T const& partial) {
    if (missing(p)) return;
    accumulate<atomic_kind::add>(f, p, partial);
  }

  // Accumulates v into the element (or component) `lhs` writes.
  template <atomic_kind K, bool Owned, bool Banded, class Fr, class L, class V>
  CTG_HOST_DEVICE static void accumulate_at(L const& lhs, V const& v, Fr& f) {
    constexpr int param = written_access<L>::type::op_type::param;
    if constexpr (std::is_same_v<typename L::op_type, op::component>) {
      auto* p = address(kid<0>(lhs), f);
      if (missing(p)) return;
      auto* c = component_in(*p, lhs, f);
      if (missing(c)) return;
      accumulate<K, Owned, Banded, param>(f, c, v);
    } else {
      auto* p = address(lhs, f);
      if (missing(p)) return;
      accumulate<K, Owned, Banded, param>(f, p, v);
    }
  }

  template <class Fr, atomic_kind K, class L, class E>
  CTG_HOST_DEVICE static void eval(node<op::atomic<K>, L, E> const& n, Fr& f) {
    accumulate_value<K>(kid<0>(n), eval(kid<1>(n), f), f);
  }
  // Accumulates v, already computed, into the element lhs names (the
  // tangent pass computes the right-hand side's value and tangent first,
  // before the accumulation changes an element they may read).
  template <atomic_kind K, class Fr, class L, class V>
  CTG_HOST_DEVICE static void accumulate_value(L const& lhs, V const& v, Fr& f) {
    if constexpr (constexpr int slot = partial_index<Fr, L>(); slot >= 0) {
      // A privatised reduction (reduction.hpp): the thread's own partial sum.
      add_to_partial<K, L>(detail::get<slot>(f.partials), f.used[slot], v);
    } else {
      constexpr int param = written_access<L>::type::op_type::param;
      accumulate_at<K, owned_field<Fr, param>(), banded_field<Fr, param>()>(lhs, v, f);
    }
  }
  template <atomic_kind K, class L, class T, class V>
  CTG_HOST_DEVICE static void add_to_partial(T& partial, bool& used, V const& v) {
    used = true;
    if constexpr (K == atomic_kind::add)
      partial = T(partial + convert<T>(v));
    else
      partial = T(partial - convert<T>(v));
  }

  template <class Fr, int Site, int S, class T, class E>
  CTG_HOST_DEVICE static void eval(node<op::assign<Site>, node<op::local<S, T>>, E> const& n, Fr& f) {
    detail::get<S>(f.locals) = convert<T>(eval(kid<1>(n), f));
  }
  template <class Fr, int Site, int S, class T, class... I, class E>
  CTG_HOST_DEVICE static void eval(node<op::assign<Site>, node<op::component, node<op::local<S, T>>, I...>, E> const& n,
                                   Fr& f) {
    auto const v = convert<typename T::Scalar>(eval(kid<1>(n), f));
    auto* c = component_in(detail::get<S>(f.locals), kid<0>(n), f);
    if (missing(c)) return;
    *c = v;
  }

  template <class Fr, int Site, class C, class T, class E>
  CTG_HOST_DEVICE static void eval(node<op::if_<Site>, C, T, E> const& n, Fr& f) {
    if constexpr (guard_known_true_v<Fr, C>)
      eval(kid<1>(n), f);
    else if (eval(kid<0>(n), f))
      eval(kid<1>(n), f);
    else
      eval(kid<2>(n), f);
  }
  template <class Fr, int Site, class C, class B>
  CTG_HOST_DEVICE static void eval(node<op::while_<Site>, C, B> const& n, Fr& f) {
    while (eval(kid<0>(n), f)) eval(kid<1>(n), f);
  }

  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void eval(node<op::let<S...>, K...> const& n, Fr& f) {
    init_let(n, f);
    eval(detail::get<sizeof...(S)>(n.kids), f);
  }
  // A let's locals, set to their initial values.
  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void init_let(node<op::let<S...>, K...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      // Initial values are computed before any slot is written: they may read
      // locals of the enclosing scope only.
      auto inits = detail::make_tuple(eval(detail::get<Is>(n.kids), f)...);
      ((detail::get<S>(f.locals) = detail::get<Is>(inits)), ...);
    }(std::make_index_sequence<sizeof...(S)>{});
  }

  // Iterates the index box of a loop node at level L, innermost axis fastest,
  // calling visit() with the frame's indices set.
  template <int L, int A, int Axis = 0, class Fr, class Visit>
  CTG_HOST_DEVICE static void iterate(int const (&lo)[A], int const (&hi)[A], Fr& f, Visit&& visit) {
    if constexpr (Axis == A) {
      visit();
    } else {
      for (int j = lo[Axis]; j < hi[Axis]; ++j) {
        f.idx[L][Axis] = j;
        iterate<L, A, Axis + 1>(lo, hi, f, visit);
      }
    }
  }
  template <class Fr, loop_kind K, int L, int A, int Site, class... Kids>
  CTG_HOST_DEVICE static void bounds(node<op::loop<K, L, A, Site>, Kids...> const& n, Fr& f, int (&lo)[A],
                                     int (&hi)[A]) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      ((lo[Is] = eval(detail::get<Is>(n.kids), f)), ...);
      ((hi[Is] = eval(detail::get<A + Is>(n.kids), f)), ...);
    }(std::make_index_sequence<A>{});
  }
  template <class Fr, loop_kind K, int L, int A, int Site, class... Kids>
  CTG_HOST_DEVICE static void eval(node<op::loop<K, L, A, Site>, Kids...> const& n, Fr& f) {
    int lo[A], hi[A];
    bounds(n, f, lo, hi);
    auto const& body = detail::get<2 * A>(n.kids);
    iterate<L, A>(lo, hi, f, [&] { eval(body, f); });
  }
};

// The interval of the chunked index where one guard holds, intersected
// with [lo, hi).
template <class Fr, class Fn, class A, class B>
CTG_HOST_DEVICE void narrow_to_guard(node<op::math<Fn>, A, B> const& c, Fr& f, long long& lo, long long& hi) {
  if constexpr (std::is_same_v<Fn, fn::logical_and>) {
    narrow_to_guard(kid<0>(c), f, lo, hi);
    narrow_to_guard(kid<1>(c), f, lo, hi);
  } else {
    // i Order x, the bound on the left read as its mirror (x < i is i > x).
    constexpr bool index_left = std::is_same_v<A, chunk_index>;
    using Order = std::conditional_t<index_left, Fn, typename mirrored_order<Fn>::type>;
    long long const x = forward::eval(kid<index_left ? 1 : 0>(c), f);
    long long const from = std::is_same_v<Order, fn::gt> ? x + 1 : std::is_same_v<Order, fn::ge> ? x : lo;
    long long const to = std::is_same_v<Order, fn::lt> ? x : std::is_same_v<Order, fn::le> ? x + 1 : hi;
    lo = from > lo ? from : lo;
    hi = to < hi ? to : hi;
  }
}

// Narrows [lo, hi) to the indices of the chunked axis where every index
// guard in `e` holds (eval/index_guards.hpp); the bounds are evaluated on
// the frame, once per chunk.
template <class Fr, class Op, class... K>
CTG_HOST_DEVICE void narrow_to_index_guards(node<Op, K...> const& e, Fr& f, long long& lo, long long& hi) {
  using N = node<Op, K...>;
  if constexpr (has_index_guard<N>::value) {
    if constexpr (is_guarded_choice<Op>::value && index_guard<std::remove_cvref_t<decltype(kid<0>(e))>>::value)
      narrow_to_guard(kid<0>(e), f, lo, hi);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (narrow_to_index_guards(detail::get<Is>(e.kids), f, lo, hi), ...);
    }(std::index_sequence_for<K...>{});
  }
}

}  // namespace ctg::eval
