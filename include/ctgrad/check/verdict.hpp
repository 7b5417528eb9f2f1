// Deciding whether two field accesses can touch the same element: the D2
// (cross-iteration read-after-write) and D3 (read, then overwritten) rules.
//
// The same constexpr functions run twice. At compile time they receive null
// node pointers: compile-time constants (ctg::c<N>, N_c) are known, plain
// numbers and field extents are not, and a pair that only such values decide
// comes out `unknown`. At launch they receive the lowered IR and the bound
// arguments, where every invariant value is known, and decide the rest.
#pragma once
#include <type_traits>

#include "../analysis/intervals.hpp"
#include "events.hpp"

namespace ctg::check {

enum class verdict { ok, error, unknown };

constexpr verdict either(verdict a, verdict b) {  // error if either is; else unknown if either is
  if (a == verdict::error || b == verdict::error) return verdict::error;
  if (a == verdict::unknown || b == verdict::unknown) return verdict::unknown;
  return verdict::ok;
}

// An integer that may not be known yet.
struct kint {
  long long v = 0;
  bool known = false;
};
constexpr kint known_int(long long v) { return {v, true}; }

template <std::size_t I, class N>
constexpr auto const* kid_ptr(N const* n) {
  using K = std::remove_cvref_t<decltype(detail::get<I>(std::declval<N const&>().kids))>;
  return n ? &detail::get<I>(n->kids) : static_cast<K const*>(nullptr);
}

// ---- type-level shape of index expressions --------------------------------------------------
// Does E read the index of a loop at `Level` (any axis)? A local counts as
// doing so: its value may come from the index (let(i - 1, [=](auto j) {...}))
// and the checks do not follow values through locals, so an index that reads
// one is treated as iteration-dependent and equal only to the same shape.
template <class E, int Level>
inline constexpr bool refs_level_v = false;
template <int L, int A, int Level>
inline constexpr bool refs_level_v<node<op::loop_index<L, A>>, Level> = (L == Level);
template <int S, class T, int Level>
inline constexpr bool refs_level_v<node<op::local<S, T>>, Level> = true;
template <class Op, class... K, int Level>
inline constexpr bool refs_level_v<node<Op, K...>, Level> = (refs_level_v<K, Level> || ...);

// Does E read a loop index of any level, or a local?
template <class E>
inline constexpr bool refs_any_index_v = false;
template <int L, int A>
inline constexpr bool refs_any_index_v<node<op::loop_index<L, A>>> = true;
template <int S, class T>
inline constexpr bool refs_any_index_v<node<op::local<S, T>>> = true;
template <class Op, class... K>
inline constexpr bool refs_any_index_v<node<Op, K...>> = (refs_any_index_v<K> || ...);

// Invariant integer arithmetic whose value the checks can work out:
// literals, constants, extents, + - * / % and negation, integral casts. A
// refinement of analysis::invariant_v (analysis/invariance.hpp), which says
// only that the value is the same in every iteration.
template <class E>
inline constexpr bool evaluable_invariant_v = false;
template <class T>
inline constexpr bool evaluable_invariant_v<node<op::literal<T>>> = std::is_integral_v<T>;
template <long long V>
inline constexpr bool evaluable_invariant_v<node<op::constant<V>>> = true;
template <int I, int A>
inline constexpr bool evaluable_invariant_v<node<op::extent<I, A>>> = true;
template <class Fn, class... K>
inline constexpr bool evaluable_invariant_v<node<op::math<Fn>, K...>> =
    detail::one_of<Fn, fn::add, fn::sub, fn::mul, fn::neg, fn::div, fn::mod> && (evaluable_invariant_v<K> && ...);
template <class T, class K>
inline constexpr bool evaluable_invariant_v<node<op::cast<T>, K>> = std::is_integral_v<T> && evaluable_invariant_v<K>;

// The value of an invariant expression (unknown at compile time unless it is
// made of compile-time constants only).
template <class E, class Args>
constexpr kint invariant_value(E const* e, Args const* args);

template <class T, class Args>
constexpr kint invariant_value_impl(node<op::literal<T>> const* e, Args const*) {
  return e ? known_int((long long)e->op.value) : kint{};
}
template <long long V, class Args>
constexpr kint invariant_value_impl(node<op::constant<V>> const*, Args const*) {
  return known_int(V);
}
template <int I, int A, class Args>
constexpr kint invariant_value_impl(node<op::extent<I, A>> const*, Args const* args) {
  return args ? known_int(detail::get<I>(*args).extent[A]) : kint{};
}
// The value an integer of type T holds once x is converted to it.
template <class T>
constexpr kint as_type(kint x) {
  if constexpr (!std::is_integral_v<T>) {
    return {};
  } else {
    if (!x.known) return {};
    auto const r = analysis::as_type<T>(analysis::interval::exact(x.v));
    return r.known && r.lo == r.hi ? known_int(r.lo) : kint{};
  }
}
template <class T, class K, class Args>
constexpr kint invariant_value_impl(node<op::cast<T>, K> const* e, Args const* args) {
  return as_type<T>(invariant_value(kid_ptr<0>(e), args));
}
// One operation on known operands, modulo 2^64 where it wraps (the result
// is then converted to the node's type, which wraps it as the kernel does).
template <class Fn>
constexpr kint invariant_operation(kint const* v) {
  using wide = unsigned long long;
  if constexpr (std::is_same_v<Fn, fn::neg>) return known_int((long long)(wide(0) - wide(v[0].v)));
  else if constexpr (std::is_same_v<Fn, fn::add>) return known_int((long long)(wide(v[0].v) + wide(v[1].v)));
  else if constexpr (std::is_same_v<Fn, fn::sub>) return known_int((long long)(wide(v[0].v) - wide(v[1].v)));
  else if constexpr (std::is_same_v<Fn, fn::mul>) return known_int((long long)(wide(v[0].v) * wide(v[1].v)));
  else if constexpr (std::is_same_v<Fn, fn::div>) return v[1].v ? known_int(v[0].v / v[1].v) : kint{};
  else if constexpr (std::is_same_v<Fn, fn::mod>) return v[1].v ? known_int(v[0].v % v[1].v) : kint{};
  else return {};
}
// Computed in the node's type, the operands converted to it first.
template <class Fn, class... K, class Args>
constexpr kint invariant_value_impl(node<op::math<Fn>, K...> const* e, Args const* args) {
  using value = value_t<node<op::math<Fn>, K...>>;
  kint v[sizeof...(K)];
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    ((v[Is] = as_type<value>(invariant_value(kid_ptr<Is>(e), args))), ...);
  }(std::index_sequence_for<K...>{});
  for (auto const& x : v)
    if (!x.known) return {};
  return as_type<value>(invariant_operation<Fn>(v));
}
template <class E, class Args>
constexpr kint invariant_value(E const* e, Args const* args) {
  if constexpr (evaluable_invariant_v<E>)
    return invariant_value_impl(e, args);
  else
    return {};
}

// E as `index(Level, Axis) + offset`, offset invariant.
template <class E>
struct shift {
  static constexpr bool is = false;
};
template <int L, int A>
struct shift<node<op::loop_index<L, A>>> {
  static constexpr bool is = true;
  static constexpr int level = L, axis = A;
  template <class Args>
  static constexpr kint offset(node<op::loop_index<L, A>> const*, Args const*) {
    return known_int(0);
  }
};
template <int L, int A, class C>
  requires evaluable_invariant_v<C>
struct shift<node<op::math<fn::add>, node<op::loop_index<L, A>>, C>> {
  static constexpr bool is = true;
  static constexpr int level = L, axis = A;
  template <class N, class Args>
  static constexpr kint offset(N const* e, Args const* args) {
    return invariant_value(kid_ptr<1>(e), args);
  }
};
template <int L, int A, class C>
  requires evaluable_invariant_v<C>
struct shift<node<op::math<fn::add>, C, node<op::loop_index<L, A>>>> {
  static constexpr bool is = true;
  static constexpr int level = L, axis = A;
  template <class N, class Args>
  static constexpr kint offset(N const* e, Args const* args) {
    return invariant_value(kid_ptr<0>(e), args);
  }
};
template <int L, int A, class C>
  requires evaluable_invariant_v<C>
struct shift<node<op::math<fn::sub>, node<op::loop_index<L, A>>, C>> {
  static constexpr bool is = true;
  static constexpr int level = L, axis = A;
  template <class N, class Args>
  static constexpr kint offset(N const* e, Args const* args) {
    kint c = invariant_value(kid_ptr<1>(e), args);
    return c.known ? known_int(-c.v) : kint{};
  }
};

// Structural equality of two index expressions (commutative + and *
// canonicalised): equal, different, or equal in shape with plain numbers whose
// values decide.
template <class A, class B>
struct same_shape : std::false_type {};
template <class A>
struct same_shape<A, A> : std::true_type {};
template <class X, class Y, class U, class V>
  requires(!std::is_same_v<node<op::math<fn::add>, X, Y>, node<op::math<fn::add>, U, V>>)
struct same_shape<node<op::math<fn::add>, X, Y>, node<op::math<fn::add>, U, V>>
    : std::bool_constant<(same_shape<X, U>::value && same_shape<Y, V>::value) ||
                         (same_shape<X, V>::value && same_shape<Y, U>::value)> {};
template <class X, class Y, class U, class V>
  requires(!std::is_same_v<node<op::math<fn::mul>, X, Y>, node<op::math<fn::mul>, U, V>>)
struct same_shape<node<op::math<fn::mul>, X, Y>, node<op::math<fn::mul>, U, V>>
    : std::bool_constant<(same_shape<X, U>::value && same_shape<Y, V>::value) ||
                         (same_shape<X, V>::value && same_shape<Y, U>::value)> {};

template <class E>
inline constexpr bool has_literals_v = false;
template <class T>
inline constexpr bool has_literals_v<node<op::literal<T>>> = true;
template <class Op, class... K>
inline constexpr bool has_literals_v<node<Op, K...>> = (has_literals_v<K> || ...);

// Two trees of the same type: equal when their plain numbers are (null
// pointers: not known yet).
template <class Op, class... K>
constexpr verdict same_literals(node<Op, K...> const* a, node<Op, K...> const* b) {
  if (a == nullptr || b == nullptr) return verdict::unknown;
  if constexpr (requires { a->op.value; }) {
    if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(a->op.value)>>)
      if (a->op.value != b->op.value) return verdict::error;
  }
  verdict out = verdict::ok;
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    ((out = either(out, same_literals(kid_ptr<Is>(a), kid_ptr<Is>(b)))), ...);
  }(std::index_sequence_for<K...>{});
  return out;
}

// Whether two index expressions denote the same value in the same iteration.
template <class A, class B, class Args>
constexpr verdict same_value(A const* a, B const* b, Args const* args) {
  if constexpr (evaluable_invariant_v<A> && evaluable_invariant_v<B>) {
    kint x = invariant_value(a, args), y = invariant_value(b, args);
    if (x.known && y.known) return x.v == y.v ? verdict::ok : verdict::error;
    return verdict::unknown;
  } else if constexpr (shift<A>::is && shift<B>::is) {
    if constexpr (shift<A>::level != shift<B>::level || shift<A>::axis != shift<B>::axis) {
      return verdict::error;
    } else {
      kint x = shift<A>::offset(a, args), y = shift<B>::offset(b, args);
      if (x.known && y.known) return x.v == y.v ? verdict::ok : verdict::error;
      return verdict::unknown;
    }
  } else if constexpr (same_shape<A, B>::value) {
    // Same shape: equal unless plain numbers inside differ, which only the
    // launch can tell.
    if constexpr (!has_literals_v<A>)
      return verdict::ok;
    else if constexpr (std::is_same_v<A, B>)
      return same_literals(a, b);
    else
      return verdict::unknown;
  } else {
    return verdict::error;
  }
}

// Index equality for D2, as the rule states it: structural. Two shifts of
// the same loop axis are equal when their offsets are (compile-time constants
// compare now; identical shapes with plain numbers compare at launch); any
// other difference in structure is a difference. Error = not equal.
template <class A, class B, class Args>
constexpr verdict equal_index(A const* a, B const* b, Args const* args) {
  if constexpr (shift<A>::is && shift<B>::is) {
    if constexpr (shift<A>::level != shift<B>::level || shift<A>::axis != shift<B>::axis) {
      return verdict::error;
    } else {
      kint const x = shift<A>::offset(a, args), y = shift<B>::offset(b, args);
      if (x.known && y.known) return x.v == y.v ? verdict::ok : verdict::error;
      if constexpr (same_shape<A, B>::value)
        return verdict::unknown;  // same shape, plain numbers decide
      else
        return verdict::error;
    }
  } else if constexpr (same_shape<A, B>::value) {
    if constexpr (!has_literals_v<A>)
      return verdict::ok;
    else if constexpr (std::is_same_v<A, B>)
      return same_literals(a, b);
    else
      return verdict::unknown;
  } else {
    return verdict::error;
  }
}

// ---- D2: cross-iteration read-after-write at the offload-level loop -------------------------
template <class Acc>
struct access_indices;
template <class Op, class... I>
struct access_indices<node<Op, I...>> {
  static constexpr int rank = int(sizeof...(I));
  template <std::size_t K>
  using index = detail::tuple_element_t<K, detail::tuple<I...>>;
};

template <class Acc>
constexpr bool refs_offload_index() {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return (refs_level_v<typename access_indices<Acc>::template index<Is>, 0> || ...);
  }(std::make_index_sequence<std::size_t(access_indices<Acc>::rank)>{});
}

// The seed's per-axis rule, used at compile time for pairs the exact
// reasoning (dependence.hpp) could not decide for want of values: `store`
// writes element s in iteration i, `load` reads element l. Error when the
// shapes show that another iteration's write is what some iteration reads;
// unknown when only values (the launch) can tell.
template <class S, class L, class Loop, class Args>
constexpr verdict d2_pair(S const* s, L const* l, Loop const* loop, Args const* args) {
  constexpr int rank = access_indices<S>::rank;
  if constexpr (!refs_offload_index<S>()) {
    // The store writes the same elements in every iteration: whether another
    // iteration reads them depends on the trip counts.
    return verdict::unknown;
  } else if constexpr (!refs_offload_index<L>()) {
    // The load reads an iteration-independent element: an error exactly when
    // some iteration writes that element. Decidable when every axis the store
    // indexes by the loop is a shift of one loop axis (otherwise only the
    // launch can tell).
    bool decidable = true, outside = false, unknown = false, varies = false;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto axis = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
        using SE = typename access_indices<S>::template index<K>;
        using LE = typename access_indices<L>::template index<K>;
        auto const* se = kid_ptr<K>(s);
        auto const* le = kid_ptr<K>(l);
        if constexpr (refs_level_v<SE, 0>) {
          if constexpr (refs_any_index_v<LE>) {
            varies = true;  // the load follows a nested loop or a local: it reaches other iterations' elements
          } else if constexpr (!shift<SE>::is || !evaluable_invariant_v<LE>) {
            decidable = false;
          } else {
            // The iteration that writes element `le` on this axis, and whether it runs.
            constexpr int A = shift<SE>::axis;
            constexpr int axes = Loop::op_type::axes;
            kint const off = shift<SE>::offset(se, args);
            kint const at = invariant_value(le, args);
            kint const lo = invariant_value(kid_ptr<std::size_t(A)>(loop), args);
            kint const hi = invariant_value(kid_ptr<std::size_t(A + axes)>(loop), args);
            if (!off.known || !at.known || !lo.known || !hi.known)
              unknown = true;
            else if (at.v - off.v < lo.v || at.v - off.v >= hi.v)
              outside = true;
          }
        } else {
          verdict const v = same_value(se, le, args);
          if (v == verdict::error) outside = true;  // a different sibling element
          else if (v == verdict::unknown) unknown = true;
        }
      };
      (axis(std::integral_constant<std::size_t, Is>{}), ...);
    }(std::make_index_sequence<std::size_t(rank)>{});
    if (outside) return verdict::ok;
    if (varies) return verdict::error;
    return (unknown || !decidable) ? verdict::unknown : verdict::error;
  } else {
    // Both follow the loop index: per axis, indices that follow it must be
    // equal, and an axis where only one does is an error (the seed's rule).
    // Axes where neither does are ignored by that rule; here they also clear
    // the pair when their values provably differ (u(t + 1, i) against
    // u(t, i - 1): different time slots never touch the same element).
    verdict loop_axes = verdict::ok;
    bool disjoint = false, maybe_disjoint = false;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto axis = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
        using SE = typename access_indices<S>::template index<K>;
        using LE = typename access_indices<L>::template index<K>;
        if constexpr (refs_level_v<SE, 0> && refs_level_v<LE, 0>) {
          loop_axes = either(loop_axes, equal_index(kid_ptr<K>(s), kid_ptr<K>(l), args));
        } else if constexpr (refs_level_v<SE, 0> || refs_level_v<LE, 0>) {
          loop_axes = verdict::error;
        } else {
          verdict const v = same_value(kid_ptr<K>(s), kid_ptr<K>(l), args);
          if (v == verdict::error) disjoint = true;
          else if (v == verdict::unknown) maybe_disjoint = true;
        }
      };
      (axis(std::integral_constant<std::size_t, Is>{}), ...);
    }(std::make_index_sequence<std::size_t(rank)>{});
    if (disjoint || loop_axes == verdict::ok) return verdict::ok;
    return maybe_disjoint ? verdict::unknown : loop_axes;
  }
}

// ---- D3: a needed value read, then overwritten in the same kernel ---------------------------------
// May a write at `s` hit the element read at `l`? Loop indices at levels below
// `equal_below` hold the same value for both; at `later_level` (a one-axis
// loop) the write happens in a later iteration; other levels are free. Bit
// k of `affine_axes`: both indices of axis k are affine forms of what the
// launch knows (dependence.hpp, form_eval), their values maybe unknown here.
template <class S, class L, class Args>
constexpr verdict may_hit(S const* s, L const* l, Args const* args, int equal_below, int later_level,
                          unsigned affine_axes) {
  constexpr int rank = access_indices<S>::rank;
  verdict out = verdict::error;  // error: may hit; ok: proven disjoint
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    auto axis = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
      using SE = typename access_indices<S>::template index<K>;
      using LE = typename access_indices<L>::template index<K>;
      auto const* se = kid_ptr<K>(s);
      auto const* le = kid_ptr<K>(l);
      if constexpr (evaluable_invariant_v<SE> && evaluable_invariant_v<LE>) {
        verdict const v = same_value(se, le, args);
        if (v == verdict::error) out = verdict::ok;
        else if (v == verdict::unknown && out == verdict::error) out = verdict::unknown;
      } else if constexpr (shift<SE>::is && shift<LE>::is) {
        if constexpr (shift<SE>::level == shift<LE>::level && shift<SE>::axis == shift<LE>::axis) {
          constexpr int level = shift<SE>::level;
          kint const so = shift<SE>::offset(se, args), lo = shift<LE>::offset(le, args);
          if (level < equal_below || level == later_level) {
            if (!so.known || !lo.known) {
              if (out == verdict::error) out = verdict::unknown;
            } else if (level == later_level ? !(lo.v > so.v) : so.v != lo.v) {
              out = verdict::ok;  // a later iteration writes j + lo - so only if lo > so
            }
          }
        }
      } else if constexpr (!refs_any_index_v<SE> && !refs_any_index_v<LE> &&
                           (!same_shape<SE, LE>::value || has_literals_v<SE>)) {
        // Values that no loop index reaches, affine in what the launch
        // knows but not plain arithmetic here, such as elements of integer
        // fields the kernel does not write (x(step() + 1, i) against
        // x(step(), i)): the launch's index forms read them and decide
        // (dependence.hpp). Any other such index proves nothing.
        if ((affine_axes >> K) & 1u)
          if (out == verdict::error) out = verdict::unknown;
      }
    };
    (axis(std::integral_constant<std::size_t, Is>{}), ...);
    (void)axis;  // rank-0 fields have no axis
  }(std::make_index_sequence<std::size_t(rank)>{});
  return out;
}

}  // namespace ctg::check
