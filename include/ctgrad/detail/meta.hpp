// Small type-level helpers shared by the IR, the checks and the evaluators.
#pragma once
#include <cstdint>
#include <type_traits>

namespace ctg::detail {

template <class...>
inline constexpr bool dependent_false = false;

template <class T>
struct type_identity {
  using type = T;
};

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

template <class List, class T>
struct push_back;
template <class... Ts, class T>
struct push_back<type_list<Ts...>, T> {
  using type = type_list<Ts..., T>;
};

template <class A, class B>
struct concat;
template <class... As, class... Bs>
struct concat<type_list<As...>, type_list<Bs...>> {
  using type = type_list<As..., Bs...>;
};
template <class A, class B>
using concat_t = typename concat<A, B>::type;

// The concatenation of any number of type lists (the walks that collect
// nodes or events join their kids' lists with it).
template <class... Ls>
struct concat_all {
  using type = type_list<>;
};
template <class... As>
struct concat_all<type_list<As...>> {
  using type = type_list<As...>;
};
template <class... As, class... Bs, class... Rest>
struct concat_all<type_list<As...>, type_list<Bs...>, Rest...> {
  using type = typename concat_all<type_list<As..., Bs...>, Rest...>::type;
};
template <class... Ls>
using concat_all_t = typename concat_all<Ls...>::type;

template <class T, class... Ts>
inline constexpr bool one_of = (std::is_same_v<T, Ts> || ...);

constexpr int max_int(int a, int b) { return a > b ? a : b; }
// The largest of its arguments, 0 for none.
template <class... I>
constexpr int max_of(I... v) {
  int m = 0;
  ((m = max_int(m, v)), ...);
  return m;
}

// The first of Ts that is not void, or void.
template <class... Ts>
struct first_non_void {
  using type = void;
};
template <class T, class... Rest>
struct first_non_void<T, Rest...> {
  using type = std::conditional_t<std::is_void_v<T>, typename first_non_void<Rest...>::type, T>;
};

}  // namespace ctg::detail
