// Reductions into a fixed element in a parallel offload (`loss() += e`,
// `hist(ctg::c<2>) += e`): every iteration adds to the same address, so atomic
// adds serialise the threads on one cache line. When nothing else in the
// offload reads or writes that field, each thread sums into a private partial
// instead and adds it to the element once, when its share of the iterations
// is done. Only the forward pass does this; the sum is the same up to the
// order of floating-point additions, which atomics leave unspecified anyway.
#pragma once
#include <type_traits>

#include "../detail/meta.hpp"
#include "../detail/tuple.hpp"
#include "../ir/node.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::eval {

CTG_IMPL_IR_VOCABULARY;


// An index whose value its type decides: a compile-time constant.
template <class E>
inline constexpr bool static_index_v = false;
template <long long N>
inline constexpr bool static_index_v<node<op::constant<N>>> = true;

// A whole field element at a compile-time index: the destinations that can be
// privatised, provided no other access touches the same field.
template <class L>
inline constexpr bool fixed_element_v = false;
template <int I, class T, int R, bool G, bool D, class... Idx>
inline constexpr bool fixed_element_v<node<op::access<I, T, R, G, D, buffer::primal>, Idx...>> =
    (static_index_v<Idx> && ...) && !std::is_same_v<T, bool>;

template <class L, class List>
struct push_unique;
template <class L, class... Ls>
struct push_unique<L, detail::type_list<Ls...>> {
  using type = std::conditional_t<detail::one_of<L, Ls...>, detail::type_list<Ls...>, detail::type_list<Ls..., L>>;
};
template <class... Lists>
struct merge_unique {
  using type = detail::type_list<>;
};
template <class List>
struct merge_unique<List> {
  using type = List;
};
template <class A, class... Bs, class... Rest>
struct merge_unique<A, detail::type_list<Bs...>, Rest...> {
  template <class Acc, class... Xs>
  struct fold {
    using type = Acc;
  };
  template <class Acc, class X, class... Xs>
  struct fold<Acc, X, Xs...> {
    using type = typename fold<typename push_unique<X, Acc>::type, Xs...>::type;
  };
  using type = typename merge_unique<typename fold<A, Bs...>::type, Rest...>::type;
};

// One bit per field parameter (ir::param_bit); parameters past the 64th
// share all bits (never privatised, never wrong).
template <class Op>
inline constexpr unsigned long long access_bit = 0;
template <int I, class T, int R, bool G, bool D, buffer B>
inline constexpr unsigned long long access_bit<op::access<I, T, R, G, D, B>> = param_bit(I);

// One walk over a subtree: `candidates`, the fixed elements that atomic adds
// and subtractions accumulate into; `touched`, a bit per field parameter
// accessed in any other way (loads, stores, min/max, indexed or component
// accumulation).
template <class N>
struct reduction_walk;
template <class Op, class... K>
struct reduction_walk<node<Op, K...>> {
  using candidates = typename merge_unique<detail::type_list<>, typename reduction_walk<K>::candidates...>::type;
  static constexpr unsigned long long touched = (access_bit<Op> | ... | reduction_walk<K>::touched);
};
template <atomic_kind K, class L, class E>
  requires((K == atomic_kind::add || K == atomic_kind::sub) && fixed_element_v<L>)
struct reduction_walk<node<op::atomic<K>, L, E>> {
  using candidates = typename push_unique<L, typename reduction_walk<E>::candidates>::type;
  static constexpr unsigned long long touched = reduction_walk<E>::touched;
};

template <class Candidates, unsigned long long Touched>
struct keep_untouched;
template <class... L, unsigned long long Touched>
struct keep_untouched<detail::type_list<L...>, Touched> {
  using type = typename merge_unique<
      detail::type_list<>,
      std::conditional_t<(Touched & param_bit(L::op_type::param)) == 0, detail::type_list<L>, detail::type_list<>>...>::type;
};

// The fixed elements whose accumulation an offload (its whole root node,
// bounds included) may privatise.
template <class Root>
using privatized_t = typename keep_untouched<typename reduction_walk<Root>::candidates,
                                             reduction_walk<Root>::touched>::type;

// A frame with a private value per privatised element: a partial sum in the
// forward pass, the element's gradient in the reverse pass. `used`: the
// forward pass added to it (only those are flushed, so an accumulation that
// never runs never touches its element); the reverse pass could read it (its
// index is in range; otherwise each iteration reads and reports as usual).
template <class Base, class Dests>
struct reduction_frame;
template <class Base, class... L>
struct reduction_frame<Base, detail::type_list<L...>> : Base {
  using reduction_dests = detail::type_list<L...>;
  detail::tuple<typename L::op_type::value_type...> partials;
  bool used[sizeof...(L)];
};

// A reverse-pass frame that also computes the values (ad::reverse_plan with
// the primal values): `partials` hold the gradients of the privatised
// elements, these the partial sums of their values.
template <class Base>
struct primal_reduction_frame : Base {
  decltype(Base::partials) primal_partials;
  bool primal_used[std::extent_v<decltype(Base::used)>];
};

// A frame that knows which fields every iteration touches only at elements
// of its own (Ownership::owned<I>, ad::slot_ownership).
template <class Base, class Ownership>
struct owning_frame : Base {
  using ownership = Ownership;
};

// Whether accumulation into parameter I may be a plain add in frame Fr
// whatever the threads.
template <class Fr, int I>
constexpr bool owned_field() {
  if constexpr (requires { typename Fr::ownership; })
    return Fr::ownership::template owned<I>;
  else
    return false;
}
// Whether only iterations near each other touch a common element of
// parameter I (ad::slot_ownership::banded).
template <class Fr, int I>
constexpr bool banded_field() {
  if constexpr (requires { typename Fr::ownership; })
    return Fr::ownership::template banded<I>;
  else
    return false;
}

template <class L, class List>
inline constexpr int position_v = -1;
template <class L, class... Ls>
inline constexpr int position_v<L, detail::type_list<Ls...>> = [] {
  int i = 0;
  bool const found = ((std::is_same_v<L, Ls> ? true : (++i, false)) || ...);
  return found ? i : -1;
}();

// The partial that accumulations into L go to in frame Fr, or -1.
template <class Fr, class L>
constexpr int partial_index() {
  if constexpr (requires { typename Fr::reduction_dests; })
    return position_v<L, typename Fr::reduction_dests>;
  else
    return -1;
}

}  // namespace ctg::eval
