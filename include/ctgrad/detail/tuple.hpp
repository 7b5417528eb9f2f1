// A minimal tuple usable in device code: trivially copyable when its elements
// are, an aggregate (so nvcc needs no constructors marked for the device), and
// element access through overload resolution on the indexed base, which keeps
// instantiation depth flat.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "../config.hpp"

namespace ctg::detail {

template <std::size_t I, class T>
struct tuple_leaf {
  T value;
};

template <class Seq, class... Ts>
struct tuple_base;

template <std::size_t... Is, class... Ts>
struct tuple_base<std::index_sequence<Is...>, Ts...> : tuple_leaf<Is, Ts>... {};

template <class... Ts>
struct tuple : tuple_base<std::index_sequence_for<Ts...>, Ts...> {
  static constexpr std::size_t size = sizeof...(Ts);
};

// Evaluates the expressions of a pack expansion left to right, as a comma
// fold does, without being one: clang caps a fold expression at 256 operands
// (its -fbracket-depth), and a kernel's frame holds a slot per local and per
// assignment, a block a statement per line. Written
// `detail::in_order{(expr, 0)...};`.
struct in_order {
  template <class... T>
  CTG_HOST_DEVICE constexpr in_order(T const&...) noexcept {}
};
// The same for folds of values: or_all<T>({v...}), sum_all<T>({v...}),
// all_of({b...}).
template <class T>
CTG_HOST_DEVICE constexpr T or_all(std::initializer_list<T> values) {
  T r{};
  for (T const v : values) r |= v;
  return r;
}
template <class T>
CTG_HOST_DEVICE constexpr T sum_all(std::initializer_list<T> values) {
  T r{};
  for (T const v : values) r += v;
  return r;
}
CTG_HOST_DEVICE constexpr bool all_of(std::initializer_list<bool> values) {
  for (bool const v : values)
    if (!v) return false;
  return true;
}

template <std::size_t I, class T>
CTG_HOST_DEVICE constexpr T& get(tuple_leaf<I, T>& leaf) noexcept {
  return leaf.value;
}
template <std::size_t I, class T>
CTG_HOST_DEVICE constexpr T const& get(tuple_leaf<I, T> const& leaf) noexcept {
  return leaf.value;
}

template <class... Ts>
CTG_HOST_DEVICE constexpr tuple<std::decay_t<Ts>...> make_tuple(Ts&&... ts) {
  return tuple<std::decay_t<Ts>...>{{{static_cast<Ts&&>(ts)}...}};
}

template <std::size_t I, class Tuple>
struct tuple_element;
template <std::size_t I, class... Ts>
struct tuple_element<I, tuple<Ts...>> {
  using type = std::remove_cvref_t<decltype(get<I>(std::declval<tuple<Ts...>&>()))>;
};
template <std::size_t I, class Tuple>
using tuple_element_t = typename tuple_element<I, Tuple>::type;

// Element I of `tuple`, as a const lvalue, read without calling a function.
// A call of get<I> instantiates a function named after the element's type,
// and the evaluators' operands are subtrees: in a deep expression one such
// name per level, thousands of characters long, which the compiler spells
// and stores whether or not the call is inlined (docs/05, *Build time*).
#define CTG_IMPL_ELEMENT(I, tuple)                                                                                    \
  (static_cast<                                                                                                       \
       ::ctg::detail::tuple_leaf<I, ::ctg::detail::tuple_element_t<I, std::remove_cvref_t<decltype(tuple)>>> const&>( \
       tuple)                                                                                                         \
       .value)
// The same, as an lvalue that may be written (`tuple` itself is not const).
#define CTG_IMPL_ELEMENT_MUTABLE(I, tuple)                                                                            \
  (static_cast<                                                                                                       \
       ::ctg::detail::tuple_leaf<I, ::ctg::detail::tuple_element_t<I, std::remove_cvref_t<decltype(tuple)>>>&>(tuple) \
       .value)

// Calls f(get<0>(t), get<1>(t), ...). Host code applies it to host-only
// callables too (lowering), hence no host/device check on f.
CTG_EXEC_CHECK_DISABLE
template <class F, class... Ts, std::size_t... Is>
CTG_HOST_DEVICE constexpr decltype(auto) apply_impl(F&& f, tuple<Ts...> const& t,
                                                    std::index_sequence<Is...>) {
  return static_cast<F&&>(f)(get<Is>(t)...);
}
CTG_EXEC_CHECK_DISABLE
template <class F, class... Ts>
CTG_HOST_DEVICE constexpr decltype(auto) apply(F&& f, tuple<Ts...> const& t) {
  return apply_impl(static_cast<F&&>(f), t, std::index_sequence_for<Ts...>{});
}

}  // namespace ctg::detail
