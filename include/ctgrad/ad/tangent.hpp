// Forward mode: every value travels with its tangent. Loads read the tangent
// from a field's dual buffer (zero for fields without one), stores write it
// there, and locals keep a tangent slot next to their value. The primal
// values are computed and written as in the forward pass.
#pragma once
#include <type_traits>

#include "../memory/atomic.hpp"
#include "../eval/slots.hpp"
#include "../eval/forward.hpp"
#include "../eval/frame.hpp"
#include "derivatives.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::ad {

CTG_IMPL_IR_VOCABULARY;

using eval::convert;
using eval::forward;

template <class T>
struct dual_value {
  T v;
  T d;
};
template <class T>
CTG_HOST_DEVICE dual_value<T> constant_dual(T v) {
  return {v, zero<T>()};
}

// A forward frame plus a tangent next to every local.
template <class Args, class Locals, int Levels, int Axes, bool Parallel>
struct tangent_frame : eval::frame<Args, Locals, Levels, Axes, Parallel> {
  Locals duals;
};

struct tangent {
  // ---- expressions -----------------------------------------------------------------------------
  template <class Fr, class Op>
    requires(!is_access_op<Op> && !is_local_op<Op>)
  CTG_HOST_DEVICE static auto eval(node<Op> const& n, Fr& f) {
    return constant_dual(forward::eval(n, f));
  }
  template <class Fr, int S, class T>
  CTG_HOST_DEVICE static dual_value<T> eval(node<op::local<S, T>> const&, Fr& f) {
    return {detail::get<S>(f.locals), detail::get<S>(f.duals)};
  }
  template <class Fr, int I, class T, int R, bool G, bool D, buffer B, class... Idx>
  CTG_HOST_DEVICE static dual_value<T> eval(node<op::access<I, T, R, G, D, B>, Idx...> const& n, Fr& f) {
    auto const& view = detail::get<I>(*f.args);
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) -> dual_value<T> {
      auto const idx = detail::make_tuple(forward::eval(detail::get<Is>(n.kids), f)...);
      T const* p = eval::element_pointer(view, B, I, f, detail::get<Is>(idx)...);
      if (eval::missing(p)) return {zero_of<T>(), zero_of<T>()};
      if constexpr (D && B == buffer::primal)
        return {load_element(p), load_element(detail::buffer_element(view, 2, detail::get<Is>(idx)...))};
      else
        return constant_dual(load_element(p));
    }(std::index_sequence_for<Idx...>{});
  }
  // Operands of up to three evaluated here, not in a lambda: one template
  // level per expression level (the compilers' instantiation depth limits
  // how deep an expression can be). Declared twice (ir::evaluated_apart_v):
  // not inlined every few levels of a tall tree, inlined elsewhere.
#define CTG_IMPL_TANGENT_MATH(APART, ATTRIBUTE)                                                                       \
  template <class Fr, class Fn, class... K>                                                                           \
    requires(ir::evaluated_apart_v<node<op::math<Fn>, K...>> == APART)                                                \
  ATTRIBUTE CTG_HOST_DEVICE static auto eval(node<op::math<Fn>, K...> const& n, Fr& f) {                              \
    if constexpr (sizeof...(K) == 1) {                                                                                \
      return apply_math<Fn>(detail::make_tuple(eval(CTG_IMPL_ELEMENT(0, n.kids), f)), std::make_index_sequence<1>{}); \
    } else if constexpr (fn::short_circuits_v<Fn>) {                                                                  \
      return constant_dual(forward::eval(n, f)); /* the second operand only where the first does not decide */       \
    } else if constexpr (sizeof...(K) == 2) {                                                                         \
      return apply_math<Fn>(                                                                                          \
          detail::make_tuple(eval(CTG_IMPL_ELEMENT(0, n.kids), f), eval(CTG_IMPL_ELEMENT(1, n.kids), f)),             \
          std::make_index_sequence<2>{});                                                                             \
    } else if constexpr (sizeof...(K) == 3) {                                                                         \
      return apply_math<Fn>(                                                                                          \
          detail::make_tuple(eval(CTG_IMPL_ELEMENT(0, n.kids), f), eval(CTG_IMPL_ELEMENT(1, n.kids), f),              \
                             eval(CTG_IMPL_ELEMENT(2, n.kids), f)),                                                   \
          std::make_index_sequence<3>{});                                                                             \
    } else {                                                                                                          \
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {                                                     \
        return apply_math<Fn>(detail::make_tuple(eval(detail::get<Is>(n.kids), f)...), std::index_sequence<Is...>{}); \
      }(std::index_sequence_for<K...>{});                                                                             \
    }                                                                                                                 \
  }
  CTG_IMPL_INLINE_AND_APART(CTG_IMPL_TANGENT_MATH)
#undef CTG_IMPL_TANGENT_MATH
  // The value and tangent of Fn from its operands' values and tangents.
  template <class Fn, class Kids, std::size_t... Is>
  CTG_HOST_DEVICE static auto apply_math(Kids const& kids, std::index_sequence<Is...>) {
    auto const v = Fn::apply(detail::get<Is>(kids).v...);
    using V = std::remove_cvref_t<decltype(v)>;
    if constexpr (Fn::kind == fn::grad_kind::none || !is_differentiable_v<V>) {
      return constant_dual(v);
    } else {
      auto const d = rule<Fn>::jvp(detail::make_tuple(detail::get<Is>(kids).v...),
                                   detail::make_tuple(detail::get<Is>(kids).d...));
      return dual_value<V>{v, convert<V>(d)};
    }
  }
  template <class Fr, class N, class F, class... K>
  CTG_HOST_DEVICE static auto eval(node<op::custom<N, F>, K...> const& n, Fr& f) {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto const kids = detail::make_tuple(eval(detail::get<Is>(n.kids), f)...);
      auto const v = n.op.fn.forward(detail::get<Is>(kids).v...);
      using V = std::remove_cvref_t<decltype(v)>;
      if constexpr (requires { n.op.fn.tangent(detail::get<Is>(kids).v..., detail::get<Is>(kids).d...); }) {
        return dual_value<V>{v, convert<V>(n.op.fn.tangent(detail::get<Is>(kids).v..., detail::get<Is>(kids).d...))};
      } else {
        return dual_value<V>{v, zero_of<V>()};  // never launched: k.fwd reports CTG-AD-010 first
      }
    }(std::index_sequence_for<K...>{});
  }

  template <class Fr, class T, class K>
  CTG_HOST_DEVICE static dual_value<T> eval(node<op::cast<T>, K> const& n, Fr& f) {
    auto const k = eval(kid<0>(n), f);
    auto const v = forward::eval(n, f);
    if constexpr (is_differentiable_v<T> && is_differentiable_v<value_t<K>>) {
      if constexpr (is_eigen_fixed_v<T>)
        return {v, k.d.template cast<typename T::Scalar>()};
      else
        return {v, static_cast<T>(k.d)};
    } else {
      return constant_dual(v);
    }
  }
  template <class Fr, class C, class A, class B>
  CTG_HOST_DEVICE static auto eval(node<op::select, C, A, B> const& n, Fr& f) {
    using V = value_t<node<op::select, C, A, B>>;
    if (forward::eval(kid<0>(n), f)) {
      auto const a = eval(kid<1>(n), f);
      return dual_value<V>{convert<V>(a.v), convert<V>(a.d)};
    }
    auto const b = eval(kid<2>(n), f);
    return dual_value<V>{convert<V>(b.v), convert<V>(b.d)};
  }
  template <class Fr, class K>
  CTG_HOST_DEVICE static auto eval(node<op::stop_grad, K> const& n, Fr& f) {
    return constant_dual(forward::eval(kid<0>(n), f));
  }
  template <class Fr, class Name, class K>
  CTG_HOST_DEVICE static auto eval(node<op::func_scope<Name>, K> const& n, Fr& f) {
    return eval(kid<0>(n), f);
  }
  template <class Fr, class V, class... I>
  CTG_HOST_DEVICE static auto eval(node<op::component, V, I...> const& n, Fr& f) {
    auto const m = eval(kid<0>(n), f);
    using S = scalar_of_t<value_t<V>>;
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto const idx = detail::make_tuple(forward::eval(detail::get<Is + 1>(n.kids), f)...);
      S const* v = eval::component_address(m.v, eval::component_param_v<V>, f, detail::get<Is>(idx)...);
      if (eval::missing(v)) return dual_value<S>{};
      return dual_value<S>{*v, m.d.coeff(detail::get<Is>(idx)...)};
    }(std::index_sequence_for<I...>{});
  }
  template <class Fr, int R, int C, class... K>
  CTG_HOST_DEVICE static auto eval(node<op::make_matrix<R, C>, K...> const& n, Fr& f) {
    using M = value_t<node<op::make_matrix<R, C>, K...>>;
    using S = typename M::Scalar;
    dual_value<M> out;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto const kids = detail::make_tuple(eval(detail::get<Is>(n.kids), f)...);
      ((out.v(int(Is) / C, int(Is) % C) = S(detail::get<Is>(kids).v)), ...);
      ((out.d(int(Is) / C, int(Is) % C) = S(detail::get<Is>(kids).d)), ...);
    }(std::index_sequence_for<K...>{});
    return out;
  }

  // ---- statements ------------------------------------------------------------------------------
  template <class Fr>
  CTG_HOST_DEVICE static void exec(node<op::nothing> const&, Fr&) {}
  template <class Fr, class... S>
  CTG_HOST_DEVICE static void exec(node<op::block, S...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (exec(detail::get<Is>(n.kids), f), ...);
    }(std::index_sequence_for<S...>{});
  }
  template <class Fr, class Name, class K>
  CTG_HOST_DEVICE static void exec(node<op::func_scope<Name>, K> const& n, Fr& f) {
    exec(kid<0>(n), f);
  }

  // Pointer to the tangent of a written element, or null when the field has none.
  template <class Fr, class L>
  CTG_HOST_DEVICE static auto* written_dual(L const& lhs, Fr& f) {
    if constexpr (std::is_same_v<typename L::op_type, op::component>) {
      auto* p = written_dual(kid<0>(lhs), f);
      using S = scalar_of_t<std::remove_pointer_t<decltype(p)>>;
      if (p == nullptr) return static_cast<S*>(nullptr);
      return forward::component_in(*p, lhs, f);
    } else {
      using T = typename L::op_type::value_type;
      if constexpr (L::op_type::has_dual && L::op_type::which == buffer::primal) {
        return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
          return eval::element_pointer(detail::get<L::op_type::param>(*f.args), buffer::dual, L::op_type::param, f,
                                       forward::eval(detail::get<Is>(lhs.kids), f)...);
        }(std::make_index_sequence<L::arity>{});
      } else {
        return static_cast<T*>(nullptr);
      }
    }
  }

  template <class Fr, class L, class E>
  CTG_HOST_DEVICE static void exec(node<op::store, L, E> const& n, Fr& f) {
    auto const r = eval(kid<1>(n), f);
    forward::write(kid<0>(n), r.v, f);
    auto* d = written_dual(kid<0>(n), f);
    if (d != nullptr) *d = convert<std::remove_pointer_t<decltype(d)>>(r.d);
  }
  template <class L>
  static constexpr bool writes_dual() {
    if constexpr (std::is_same_v<typename L::op_type, op::component>)
      return writes_dual<std::remove_cvref_t<decltype(kid<0>(std::declval<L>()))>>();
    else
      return L::op_type::has_dual && L::op_type::which == buffer::primal;
  }
  template <class Fr, atomic_kind K, class L, class E>
  CTG_HOST_DEVICE static void exec(node<op::atomic<K>, L, E> const& n, Fr& f) {
    if constexpr (writes_dual<L>() && (K == atomic_kind::add || K == atomic_kind::sub)) {
      // (min and max into a tangent field never launch: k.fwd reports CTG-AD-008 first)
      // The right-hand side's value and tangent are both taken before the
      // element changes: in a[i] += a[i] * b[i] they read a[i] as it was.
      auto const r = eval(kid<1>(n), f);
      forward::template accumulate_value<K>(kid<0>(n), r.v, f);
      auto* d = written_dual(kid<0>(n), f);
      if (d == nullptr) return;
      using P = std::remove_pointer_t<decltype(d)>;
      forward::template accumulate<K>(f, d, convert<P>(r.d));
    } else {
      forward::eval(n, f);
    }
  }
  template <class Fr, int Site, class L, class E>
  CTG_HOST_DEVICE static void exec(node<op::assign<Site>, L, E> const& n, Fr& f) {
    auto const r = eval(kid<1>(n), f);
    auto const& lhs = kid<0>(n);
    constexpr int slot = eval::assigned_local<L>::slot;
    using T = typename eval::assigned_local<L>::type;
    if constexpr (std::is_same_v<L, node<op::local<slot, T>>>) {
      detail::get<slot>(f.locals) = convert<T>(r.v);
      detail::get<slot>(f.duals) = convert<T>(r.d);
    } else {
      using S = typename T::Scalar;
      auto set = [&](auto& m, S x) {
        if (S* c = forward::component_in(m, lhs, f); !eval::missing(c)) *c = x;
      };
      set(detail::get<slot>(f.locals), convert<S>(r.v));
      set(detail::get<slot>(f.duals), convert<S>(r.d));
    }
  }
  template <class Fr, int... S, class... K>
  CTG_HOST_DEVICE static void exec(node<op::let<S...>, K...> const& n, Fr& f) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto const inits = detail::make_tuple(eval(detail::get<Is>(n.kids), f)...);
      ((detail::get<S>(f.locals) = convert<std::remove_cvref_t<decltype(detail::get<S>(f.locals))>>(
            detail::get<Is>(inits).v)),
       ...);
      ((detail::get<S>(f.duals) = convert<std::remove_cvref_t<decltype(detail::get<S>(f.duals))>>(
            detail::get<Is>(inits).d)),
       ...);
    }(std::make_index_sequence<sizeof...(S)>{});
    exec(detail::get<sizeof...(S)>(n.kids), f);
  }
  template <class Fr, int Site, class C, class T, class E>
  CTG_HOST_DEVICE static void exec(node<op::if_<Site>, C, T, E> const& n, Fr& f) {
    if (forward::eval(kid<0>(n), f))
      exec(kid<1>(n), f);
    else
      exec(kid<2>(n), f);
  }
  template <class Fr, int Site, class C, class B>
  CTG_HOST_DEVICE static void exec(node<op::while_<Site>, C, B> const& n, Fr& f) {
    while (forward::eval(kid<0>(n), f)) exec(kid<1>(n), f);
  }
  template <class Fr, loop_kind K, int L, int A, int Site, class... Kids>
  CTG_HOST_DEVICE static void exec(node<op::loop<K, L, A, Site>, Kids...> const& n, Fr& f) {
    int lo[A], hi[A];
    forward::bounds(n, f, lo, hi);
    auto const& body = detail::get<2 * A>(n.kids);
    forward::iterate<L, A>(lo, hi, f, [&] { exec(body, f); });
  }

  template <class Body, class Fr>
  CTG_HOST_DEVICE static void run_body(Body const& body, Fr& f) {
    exec(body, f);
  }
};

}  // namespace ctg::ad
