// The gradient diagnostics, run over a kernel's offloads when its reverse
// pass is instantiated: a report listing every finding with its stable ID,
// the field parameter and the func it sits in. The same walk runs at compile
// time (null pointers: only compile-time constants known) and, for pairs that
// plain numbers decide, again at launch on the real IR and arguments.
#pragma once
#include <type_traits>
#include <utility>

#include "../ad/offload.hpp"
#include "events.hpp"
#include "verdict.hpp"

namespace ctg {

// What a diagnostic found. Values are the numbers of the IDs CTG-AD-0NN.
enum class finding : int {
  nested_loop_needs_adstack = 1,    // CTG-AD-001
  cross_iteration_raw = 2,          // CTG-AD-002
  adstack_unsized = 3,              // CTG-AD-003
  overwritten_after_read = 4,       // CTG-AD-004
  atomic_extremum_on_gradient = 8,  // CTG-AD-008
  no_derivative_rule = 9,           // CTG-AD-009
  gradient_buffer_read = 11,        // CTG-AD-011
};

// The findings of the checks on one kernel and argument types (constexpr).
struct report {
  struct entry {
    finding what;
    int param;       // field parameter position, -1 when none
    int offload;     // which top-level statement of the kernel
    char func[48];   // the innermost func the culprit sits in ("" at kernel level)
  };
  static constexpr int capacity = 16;
  entry items[capacity]{};
  int count = 0;
  int undecided = 0;  // pairs only a launch can decide

  constexpr bool ok() const { return count == 0; }
  constexpr bool has(finding f) const {
    for (int k = 0; k < count; ++k)
      if (items[k].what == f) return true;
    return false;
  }
  constexpr void add(finding f, int param, int offload, char const* func = "") {
    if (count == capacity) return;
    entry e{f, param, offload, {}};
    for (int k = 0; k < 47 && func[k]; ++k) e.func[k] = func[k];
    items[count++] = e;
  }
};

namespace check {

// The innermost func along a path below a root ("" when none).
template <class Root, class Path, class Prefix = std::index_sequence<>>
struct func_on_path {
  static constexpr char const* name = "";
};
template <class Root, std::size_t P, std::size_t... Rest, std::size_t... Done>
struct func_on_path<Root, std::index_sequence<P, Rest...>, std::index_sequence<Done...>> {
  using here = node_at_t<Root, std::index_sequence<Done...>>;
  using deeper = func_on_path<Root, std::index_sequence<Rest...>, std::index_sequence<Done..., P>>;
  static constexpr char const* name = [] {
    if (deeper::name[0] != 0) return deeper::name;
    if constexpr (is_func_scope_op<typename here::op_type>)
      return here::op_type::name.c_str();
    else
      return "";
  }();
};

// The innermost func wrapping a statement from above (a func holding a
// top-level loop).
template <class S>
struct enclosing_func {
  static constexpr char const* name = "";
};
template <class N, class K>
struct enclosing_func<node<op::func_scope<N>, K>> {
  static constexpr char const* name = enclosing_func<K>::name[0] ? enclosing_func<K>::name : op::func_scope<N>::name.c_str();
};

template <class Offload>
struct offload_view;
template <class S>
struct offload_view<parallel_offload<S>> {
  static constexpr char const* func = enclosing_func<S>::name;
  using loop = typename unwrap_funcs<S>::type;
  static constexpr int axes = loop::op_type::axes;
  using body = std::remove_cvref_t<decltype(detail::get<2 * axes>(std::declval<loop const&>().kids))>;
  static constexpr bool parallel = true;
  static constexpr loop const* loop_ptr(parallel_offload<S> const* o) {
    return o ? &unwrap_funcs<S>::get(o->stmt) : nullptr;
  }
  static constexpr body const* body_ptr(parallel_offload<S> const* o) {
    return o ? &detail::get<2 * axes>(unwrap_funcs<S>::get(o->stmt).kids) : nullptr;
  }
};
template <class B>
struct offload_view<serial_offload<B>> {
  static constexpr char const* func = "";
  using body = B;
  using loop = void;
  static constexpr bool parallel = false;
  static constexpr body const* body_ptr(serial_offload<B> const* o) { return o ? &o->body : nullptr; }
};

constexpr char const* name_or(char const* a, char const* b) { return a[0] ? a : b; }

template <class Root, class Path>
constexpr auto const* node_ptr(Root const* root) {
  using N = node_at_t<Root, Path>;
  return root ? &node_at<Path>::get(*root) : static_cast<N const*>(nullptr);
}

template <class Ev, class Root>
using event_access_t = node_at_t<Root, typename Ev::path>;

template <class Acc>
constexpr bool differentiable_access() {
  using Op = typename Acc::op_type;
  return Op::has_grad && Op::which == buffer::primal;
}

template <class Seq>
struct seq_size;
template <int... E>
struct seq_size<std::integer_sequence<int, E...>> {
  static constexpr int size = int(sizeof...(E));
  static constexpr int at(int k) {
    constexpr int v[] = {E..., 0};
    return v[k];
  }
};

// Number of loops two events share (from the outermost).
template <class A, class B>
constexpr int common_loops() {
  int n = 0;
  while (n < seq_size<A>::size && n < seq_size<B>::size && seq_size<A>::at(n) == seq_size<B>::at(n)) ++n;
  return n;
}

// An active custom-gradient call whose functor has no backward.
template <class Analysis, class N>
struct missing_backward : std::false_type {};
template <class Analysis, class Op, class... K>
struct missing_backward<Analysis, node<Op, K...>> {
  template <class O>
  static constexpr bool own() {
    if constexpr (is_custom_op<O>) {
      using N = node<Op, K...>;
      if constexpr (Analysis::template is_active<N>)
        return !requires(O const& o, value_t<K> const&... k, value_t<N> const& g) { o.fn.backward(k..., g); };
      else
        return false;
    } else {
      return false;
    }
  }
  static constexpr bool value = own<Op>() || (missing_backward<Analysis, K>::value || ...);
};

template <class List>
struct to_tuple;
template <class... E>
struct to_tuple<detail::type_list<E...>> {
  using type = detail::tuple<E...>;
  static constexpr std::size_t size = sizeof...(E);
};

template <class Args, class Offloads, int Slots>
struct kernel_checks;

template <class Args, class... O, int Slots>
struct kernel_checks<Args, detail::tuple<O...>, Slots> {
  using offloads_t = detail::tuple<O...>;
  static constexpr std::size_t n_offloads = sizeof...(O);

  template <std::size_t K>
  using offload_t = detail::tuple_element_t<K, offloads_t>;
  template <std::size_t K>
  using view = offload_view<offload_t<K>>;
  template <std::size_t K>
  using analysis = ad::offload_analysis<typename view<K>::body, Slots>;
  template <std::size_t K>
  using events = events_t<analysis<K>, typename view<K>::body>;


  template <std::size_t K>
  static constexpr auto const* body_ptr(offloads_t const* offs) {
    using V = view<K>;
    return V::body_ptr(offs ? &detail::get<K>(*offs) : static_cast<offload_t<K> const*>(nullptr));
  }

  // Applies a verdict: errors become findings; undecided ones are counted (at
  // compile time) or are errors (at launch, where everything is known).
  static constexpr void record(report& r, verdict v, bool at_launch, finding f, int param, int offload,
                               char const* func) {
    if (v == verdict::error || (v == verdict::unknown && at_launch))
      r.add(f, param, offload, func);
    else if (v == verdict::unknown)
      ++r.undecided;
  }

  // ---- D2 within parallel offload K ---------------------------------------------------------------
  template <std::size_t K>
  static constexpr void d2(report& r, offloads_t const* offs, Args const* args, bool at_launch) {
    if constexpr (view<K>::parallel) {
      using E = typename to_tuple<events<K>>::type;
      using body = typename view<K>::body;
      constexpr std::size_t n = to_tuple<events<K>>::size;
      auto const* b = body_ptr<K>(offs);
      auto const* loop = view<K>::loop_ptr(offs ? &detail::get<K>(*offs) : static_cast<offload_t<K> const*>(nullptr));
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        auto over_loads = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
          using SI = detail::tuple_element_t<I, E>;
          if constexpr (SI::kind != access_kind::load && seq_size<typename SI::loops>::size == 0) {
            using SA = event_access_t<SI, body>;
            if constexpr (differentiable_access<SA>()) {
              [&]<std::size_t... Js>(std::index_sequence<Js...>) {
                auto pair = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
                  using LJ = detail::tuple_element_t<J, E>;
                  if constexpr (LJ::kind == access_kind::load && seq_size<typename LJ::loops>::size == 0) {
                    using LA = event_access_t<LJ, body>;
                    if constexpr (LA::op_type::param == SA::op_type::param && differentiable_access<LA>()) {
                      verdict v = d2_pair(node_ptr<body, typename SI::path>(b), node_ptr<body, typename LJ::path>(b),
                                          loop, args);
                      record(r, v, at_launch, finding::cross_iteration_raw, SA::op_type::param, int(K),
                             name_or(func_on_path<body, typename SI::path>::name, view<K>::func));
                    }
                  }
                };
                (pair(std::integral_constant<std::size_t, Js>{}), ...);
              }(std::make_index_sequence<n>{});
            }
          }
        };
        (over_loads(std::integral_constant<std::size_t, Is>{}), ...);
      }(std::make_index_sequence<n>{});
    }
  }

  // ---- D3: a needed load in offload A, a write in offload B (B >= A) ----------------------------------
  template <std::size_t A, std::size_t B>
  static constexpr void d3(report& r, offloads_t const* offs, Args const* args, bool at_launch) {
    using EA = typename to_tuple<events<A>>::type;
    using EB = typename to_tuple<events<B>>::type;
    using bodyA = typename view<A>::body;
    using bodyB = typename view<B>::body;
    constexpr std::size_t na = to_tuple<events<A>>::size, nb = to_tuple<events<B>>::size;
    auto const* ba = body_ptr<A>(offs);
    auto const* bb = body_ptr<B>(offs);
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto over_loads = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        using LI = detail::tuple_element_t<I, EA>;
        if constexpr (LI::kind == access_kind::load && LI::needed) {
          using LA = event_access_t<LI, bodyA>;
          if constexpr (differentiable_access<LA>()) {
            [&]<std::size_t... Js>(std::index_sequence<Js...>) {
              auto pair = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
                using SJ = detail::tuple_element_t<J, EB>;
                if constexpr (SJ::kind == access_kind::store || SJ::kind == access_kind::accumulate) {
                  using SA = event_access_t<SJ, bodyB>;
                  if constexpr (SA::op_type::param == LA::op_type::param) {
                    auto const* s = node_ptr<bodyB, typename SJ::path>(bb);
                    auto const* l = node_ptr<bodyA, typename LI::path>(ba);
                    verdict v = verdict::ok;
                    if constexpr (A != B) {
                      v = may_hit(s, l, args, 0, -1);  // different offloads: no index in common
                    } else {
                      constexpr int common = common_loops<typename LI::loops, typename SJ::loops>();
                      constexpr int base = view<A>::parallel ? 1 : 0;  // the offload loop is one iteration
                      using loopsL = seq_size<typename LI::loops>;
                      // Same iteration of every common loop, the write after the read.
                      if constexpr (J > I) {
                        int equal = base;
                        for (int k = 0; k < common; ++k)
                          if (entry_level(loopsL::at(k)) != while_level) equal = entry_level(loopsL::at(k)) + 1;
                        v = either(v, may_hit(s, l, args, equal, -1));
                      }
                      // A later iteration of a common loop.
                      for (int k = 0; k < common; ++k) {
                        int const e = loopsL::at(k);
                        int equal = base;
                        for (int q = 0; q < k; ++q)
                          if (entry_level(loopsL::at(q)) != while_level) equal = entry_level(loopsL::at(q)) + 1;
                        int const later =
                            (entry_level(e) != while_level && entry_axes(e) == 1) ? entry_level(e) : -1;
                        v = either(v, may_hit(s, l, args, equal, later));
                      }
                    }
                    record(r, v, at_launch, finding::overwritten_after_read, LA::op_type::param, int(B),
                           name_or(func_on_path<bodyB, typename SJ::path>::name, view<B>::func));
                  }
                }
              };
              (pair(std::integral_constant<std::size_t, Js>{}), ...);
            }(std::make_index_sequence<nb>{});
          }
        }
      };
      (over_loads(std::integral_constant<std::size_t, Is>{}), ...);
    }(std::make_index_sequence<na>{});
  }

  // ---- the rest: extrema, gradient buffers, missing derivative rules -----------------------------------
  template <std::size_t K>
  static constexpr void others(report& r) {
    if constexpr (missing_backward<analysis<K>, typename view<K>::body>::value)
      r.add(finding::no_derivative_rule, -1, int(K), view<K>::func);
    using E = typename to_tuple<events<K>>::type;
    using body = typename view<K>::body;
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      auto one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
        using Ev = detail::tuple_element_t<I, E>;
        using Acc = event_access_t<Ev, body>;
        char const* func = name_or(func_on_path<body, typename Ev::path>::name, view<K>::func);
        if constexpr (Ev::kind == access_kind::extremum && differentiable_access<Acc>())
          r.add(finding::atomic_extremum_on_gradient, Acc::op_type::param, int(K), func);
        if constexpr (Acc::op_type::which != buffer::primal)
          r.add(finding::gradient_buffer_read, Acc::op_type::param, int(K), func);
      };
      (one(std::integral_constant<std::size_t, Is>{}), ...);
    }(std::make_index_sequence<to_tuple<events<K>>::size>{});
  }

  static constexpr report evaluate(offloads_t const* offs, Args const* args, bool at_launch) {
    report r;
    [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      (d2<Ks>(r, offs, args, at_launch), ...);
      auto from = [&]<std::size_t A>(std::integral_constant<std::size_t, A>) {
        [&]<std::size_t... Bs>(std::index_sequence<Bs...>) {
          (d3<A, A + Bs>(r, offs, args, at_launch), ...);
        }(std::make_index_sequence<n_offloads - A>{});
      };
      (from(std::integral_constant<std::size_t, Ks>{}), ...);
      if (!at_launch) (others<Ks>(r), ...);
    }(std::make_index_sequence<n_offloads>{});
    return r;
  }
};

}  // namespace check
}  // namespace ctg
