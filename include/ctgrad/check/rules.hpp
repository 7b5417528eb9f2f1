// The gradient diagnostics, run over a kernel's offloads when its reverse
// pass is instantiated: a report listing every finding with its stable ID,
// the field parameter and the func it sits in. The same walk runs at compile
// time (null pointers: only compile-time constants known) and, for pairs that
// plain numbers decide, again at launch on the real IR and arguments.
#pragma once
#include <array>
#include <type_traits>
#include <utility>

#include "../ad/offload.hpp"
#include "../eval/reduction.hpp"
#include "dependence.hpp"
#include "events.hpp"
#include "findings.hpp"
#include "verdict.hpp"

namespace ctg {

// The findings of the checks on one kernel and argument types (constexpr).
struct report {
  struct entry {
    finding what;
    int param;       // field parameter position, -1 when none
    int offload;     // which top-level statement of the kernel
    char func[96];   // the funcs the culprit sits in, "outer -> inner" ("" at kernel level)
  };
  static constexpr int capacity = 16;
  entry items[capacity]{};
  int count = 0;
  int undecided = 0;  // pairs only a launch can decide
  // Some pair was left to the launch for want of plain numbers' values (an IR
  // built in a constant expression may decide it at compile time).
  bool wants_values = false;
  // For a ctg::tape: the field parameters whose adjoint needs the values they
  // held when the launch began (the kernel reads them, then overwrites
  // them), which the tape saves; pairs only a launch can decide for that.
  unsigned long long pre_params = 0;
  int tape_undecided = 0;
  // Read and write sets: fields whose values the adjoint reads, fields the
  // kernel writes (bit i: parameter i; parameters past the 64th share all).
  unsigned long long needed_params = 0;
  unsigned long long written_params = 0;

  // The findings that stay when the launch is recorded on a tape: the
  // overwrites of fields the tape saves are no longer errors.
  constexpr report for_tape() const {
    report t = *this;
    t.count = 0;
    for (int k = 0; k < count; ++k) {
      entry const& e = items[k];
      bool const saved = e.what == finding::overwritten_after_read && e.param >= 0 && e.param < 64 &&
                         (pre_params & (1ull << e.param)) != 0;
      if (!saved) t.items[t.count++] = e;
    }
    t.undecided += tape_undecided;
    return t;
  }

  constexpr bool ok() const { return count == 0; }
  constexpr bool has(finding f) const {
    for (int k = 0; k < count; ++k)
      if (items[k].what == f) return true;
    return false;
  }
  constexpr void add(finding f, int param, int offload, char const* func = "") {
    if (count == capacity) return;
    entry e{f, param, offload, {}};
    for (int k = 0; k < 95 && func[k]; ++k) e.func[k] = func[k];
    items[count++] = e;
  }
};

namespace check {

// The chain of funcs a culprit sits in, "outer -> inner".
struct func_chain {
  char s[96]{};
  int n = 0;
  constexpr void append(char const* name) {
    if (!name[0]) return;
    if (n > 0)
      for (char const* sep = " -> "; *sep && n < 95; ++sep) s[n++] = *sep;
    for (; *name && n < 95; ++name) s[n++] = *name;
  }
};
// The funcs an event sits in (its funcs list, outermost first).
template <class Funcs>
struct funcs_into;
template <class... F>
struct funcs_into<detail::type_list<F...>> {
  static constexpr void into(func_chain& c) { (c.append(F::name.c_str()), ...); }
};
// The funcs wrapping a top-level statement (a func holding the offload loop).
template <class S>
struct wrapping_funcs {
  static constexpr void into(func_chain&) {}
};
template <class N, class K>
struct wrapping_funcs<node<op::func_scope<N>, K>> {
  static constexpr void into(func_chain& c) {
    c.append(op::func_scope<N>::name.c_str());
    wrapping_funcs<K>::into(c);
  }
};

// The checks read offloads through pointers that are null at compile time
// (only the types are known then).
template <class Offload>
struct offload_view;
template <class S>
struct offload_view<parallel_offload<S>> : ir::offload_traits<parallel_offload<S>> {
  using traits = ir::offload_traits<parallel_offload<S>>;
  static constexpr void wrapping(func_chain& c) { wrapping_funcs<S>::into(c); }
  static constexpr typename traits::loop const* loop_ptr(parallel_offload<S> const* o) {
    return o ? &traits::loop_of(*o) : nullptr;
  }
  static constexpr typename traits::body const* body_ptr(parallel_offload<S> const* o) {
    return o ? &traits::body_of(*o) : nullptr;
  }
};
template <class B>
struct offload_view<serial_offload<B>> : ir::offload_traits<serial_offload<B>> {
  static constexpr void wrapping(func_chain&) {}
  static constexpr B const* body_ptr(serial_offload<B> const* o) { return o ? &o->body : nullptr; }
};


template <class Root, class Path>
constexpr auto const* node_ptr(Root const* root) {
  using N = node_at_t<Root, Path>;
  return root ? &node_at<Path>::get(*root) : static_cast<N const*>(nullptr);
}

// What an access touches of its element: the whole element, or one
// coefficient through a component (v[i][0_c], m[i](1_c, 0_c)), whose
// indices are compile-time constants (known) or values of the launch. A
// known coefficient is kept as its place in the element's storage, which is
// what one index means (Eigen's coeff(k)), so that m[i][2_c] and
// m[i](0_c, 1_c) of a column-major 2x2 matrix are the same coefficient.
struct coefficient {
  bool whole = true;
  bool known = false;
  long long linear = 0;
};
// The access at Path of Root: Parent is the node above it, P its place there.
template <class Parent, std::size_t P>
constexpr coefficient coefficient_below() {
  if constexpr (std::is_same_v<typename Parent::op_type, op::component> && P == 0) {
    coefficient c;
    c.whole = false;
    [&]<class V, class... I>(node<op::component, V, I...> const*) {
      c.known = (eval::static_index_v<I> && ...);
      if constexpr (!(eval::static_index_v<I> && ...)) {
        return;
      } else if constexpr (sizeof...(I) == 1) {
        c.linear = (I::op_type::value + ...);
      } else {
        using M = value_t<V>;
        long long const at[] = {I::op_type::value...};
        c.linear = M::IsRowMajor ? at[0] * M::ColsAtCompileTime + at[1] : at[1] * M::RowsAtCompileTime + at[0];
      }
    }(static_cast<Parent const*>(nullptr));
    return c;
  } else {
    return coefficient{};
  }
}
template <class Root, class Path>
struct coefficient_at {
  static constexpr coefficient value{};
};
template <class Root, std::size_t P>
struct coefficient_at<Root, std::index_sequence<P>> {
  static constexpr coefficient value = coefficient_below<Root, P>();
};
template <class Root, std::size_t P, std::size_t Q, std::size_t... Rest>
struct coefficient_at<Root, std::index_sequence<P, Q, Rest...>>
    : coefficient_at<node_at_t<Root, std::index_sequence<P>>, std::index_sequence<Q, Rest...>> {};
// Whether two accesses touch different coefficients of whatever element they
// share: both through components whose constant indices differ.
constexpr bool coefficients_apart(coefficient a, coefficient b) {
  return !a.whole && !b.whole && a.known && b.known && a.linear != b.linear;
}
template <class RootA, class PathA, class RootB, class PathB>
inline constexpr bool coefficients_apart_v =
    coefficients_apart(coefficient_at<RootA, PathA>::value, coefficient_at<RootB, PathB>::value);

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

// ---- forward mode (k.fwd): its own check pass ------------------------------------------------------
// A custom-gradient functor without tangent() (outside ctg::stop_grad), an
// atomic_min/atomic_max into a field with a tangent buffer, an access of a
// gradient or tangent buffer: the findings of the tangent evaluator.
template <class N>
struct tangent_walk {
  static constexpr void into(report&, int, func_chain const&) {}
};
template <class Op, class... K>
struct tangent_walk<node<Op, K...>> {
  static constexpr void into(report& r, int offload, func_chain const& funcs) {
    using N = node<Op, K...>;
    if constexpr (std::is_same_v<Op, op::stop_grad>) {
      return;  // evaluated without tangents
    } else {
      func_chain inner = funcs;
      if constexpr (is_func_scope_op<Op>) inner.append(Op::name.c_str());
      if constexpr (is_custom_op<Op>) {
        if constexpr (!requires(Op const& o, value_t<K> const&... k) { o.fn.tangent(k..., k...); })
          r.add(finding::no_tangent_rule, -1, offload, inner.s);
      }
      if constexpr (is_atomic_op<Op>) {
        if constexpr (Op::kind == atomic_kind::min || Op::kind == atomic_kind::max) {
          using A = typename written_access<detail::tuple_element_t<0, detail::tuple<K...>>>::type;
          if constexpr (A::op_type::has_dual && A::op_type::which == buffer::primal)
            r.add(finding::atomic_extremum_on_gradient, A::op_type::param, offload, inner.s);
        }
      }
      if constexpr (is_access_op<Op>) {
        if constexpr (Op::which != buffer::primal) r.add(finding::gradient_buffer_read, Op::param, offload, inner.s);
      }
      (tangent_walk<K>::into(r, offload, inner), ...);
      (void)sizeof(N);
    }
  }
};
template <class Offloads>
struct tangent_checks;
template <class... O>
struct tangent_checks<detail::tuple<O...>> {
  template <class Off>
  static constexpr void one(report& r, int k) {
    if constexpr (requires { &Off::stmt; })
      tangent_walk<decltype(Off::stmt)>::into(r, k, func_chain{});
    else
      tangent_walk<decltype(Off::body)>::into(r, k, func_chain{});
  }
  static constexpr report evaluate() {
    report r;
    int k = 0;
    ((one<O>(r, k++)), ...);
    return r;
  }
};

// ---- D1 and CTG-AD-003: what the adstack must keep ------------------------------------------------
// The funcs around the first nested loop that snapshots carried locals for
// the reverse pass (and, with Unbounded, whose trip count no launch can
// bound: a while_, or bounds computed from locals).
template <class Reverse, bool Unbounded>
struct stack_loop_walk {
  template <class Op, class... K>
  static constexpr bool find(node<Op, K...> const*, func_chain c, func_chain& out) {
    if constexpr (is_func_scope_op<Op>) c.append(Op::name.c_str());
    if constexpr (is_loop_op<Op> || is_while_op<Op>) {
      using Body = detail::tuple_element_t<sizeof...(K) - 1, detail::tuple<K...>>;
      if constexpr (!Reverse::template carried<Body>.empty()) {
        bool hit = !Unbounded;
        if constexpr (is_while_op<Op>) {
          hit = true;
        } else {
          bool const bounded = [&]<std::size_t... Is>(std::index_sequence<Is...>) {
            return (ad::boundable_v<detail::tuple_element_t<Is, detail::tuple<K...>>> && ...);
          }(std::make_index_sequence<2 * Op::axes>{});
          hit = hit || !bounded;
        }
        if (hit) {
          out = c;
          return true;
        }
      }
    }
    return (find(static_cast<K const*>(nullptr), c, out) || ...);
  }
  template <class E>
  static constexpr bool find(E const*, func_chain, func_chain&) {
    return false;
  }
};

template <class List>
struct to_tuple;
template <class... E>
struct to_tuple<detail::type_list<E...>> {
  using type = detail::tuple<E...>;
  static constexpr std::size_t size = sizeof...(E);
};

// Key names the kernel's IR for these arguments: Key::offloads is the tuple
// of its offloads, Key::offload<K> the name a launch gives offload K
// (ir::keyed_offload). The checks name the offloads' bodies as the launch
// does, so the analyses they read are the ones the adjoint is built from
// (one instantiation for both), and the members instantiated per event or
// per node do not spell the IR in their names (docs/05, *Names nobody
// emits*).
template <class Args, class Key, int Slots>
struct kernel_checks {
  using offloads_t = typename Key::offloads;
  static constexpr std::size_t n_offloads = offloads_t::size;

  template <std::size_t K>
  using offload_t = detail::tuple_element_t<K, offloads_t>;
  template <std::size_t K>
  using named_offload_t = typename Key::template offload<int(K)>;
  template <std::size_t K>
  using view = offload_view<offload_t<K>>;
  template <std::size_t K>
  using analysis = ad::body_analysis<ir::body_name_t<named_offload_t<K>>, Slots>;
  template <std::size_t K>
  using events = events_t<analysis<K>, typename view<K>::body>;


  template <std::size_t K>
  static constexpr auto const* body_ptr(offloads_t const* offs) {
    using V = view<K>;
    return V::body_ptr(offs ? &detail::get<K>(*offs) : static_cast<offload_t<K> const*>(nullptr));
  }

  // The funcs event Ev of offload K sits in, outermost first.
  template <std::size_t K, class Ev>
  static constexpr func_chain chain_of() {
    func_chain c;
    view<K>::wrapping(c);
    if constexpr (!std::is_void_v<Ev>) funcs_into<typename Ev::funcs>::into(c);
    return c;
  }
  static constexpr func_chain deeper(func_chain const& a, func_chain const& b) { return b.n > a.n ? b : a; }

  // Applies a verdict: errors become findings; undecided ones are counted (at
  // compile time) or are errors (at launch, where everything is known).
  static constexpr void record(report& r, verdict v, bool at_launch, finding f, int param, int offload,
                               char const* func) {
    if (v == verdict::error || (v == verdict::unknown && at_launch))
      r.add(f, param, offload, func);
    else if (v == verdict::unknown)
      ++r.undecided;
  }
  // A pair's verdict, and whether values not known here (plain numbers,
  // extents, loop bounds) could change it.
  struct pair_verdict {
    verdict v;
    bool unknowns;
  };
  static constexpr void record(report& r, pair_verdict p, bool at_launch, finding f, int param, int offload,
                               char const* func) {
    record(r, p.v, at_launch, f, param, offload, func);
    if (p.unknowns && !at_launch) r.wants_values = true;
  }

  // Field parameters some statement of the kernel writes: what they hold may
  // change while it runs, so their contents are never read as constants.
  template <class List>
  struct written_in;
  template <class... E>
  struct written_in<detail::type_list<E...>> {
    static constexpr unsigned long long mask = detail::or_all<unsigned long long>(
        {(E::kind != access_kind::load ? param_bit(E::access::op_type::param) : 0ull)...});
  };
  static constexpr unsigned long long written_params = [] {
    return [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      return (written_in<events<Ks>>::mask | ... | 0ull);
    }(std::make_index_sequence<n_offloads>{});
  }();

  template <std::size_t K>
  static constexpr offload_t<K> const* offload_ptr(offloads_t const* offs) {
    return offs ? &detail::get<K>(*offs) : static_cast<offload_t<K> const*>(nullptr);
  }

  // The loop indices around event E of offload K, with their ranges.
  template <std::size_t K, class E>
  static constexpr access_space event_space(offloads_t const* offs, Args const* args) {
    ctg::analysis::interval_eval<Args> const ev{args, written_params};
    access_space space{};
    if constexpr (view<K>::parallel) enter_loop(view<K>::loop_ptr(offload_ptr<K>(offs)), ev, space);
    loops_around<typename view<K>::body, typename E::loop_paths>::enter(body_ptr<K>(offs), ev, space);
    return space;
  }

  // The affine forms of the indices of an access.
  template <class Acc>
  static constexpr void index_forms(Acc const* a, Args const* args, affine_form* out) {
    form_eval<Args> const fe{args, written_params};
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      ((out[Is] = fe(kid_ptr<Is>(a))), ...);
    }(std::make_index_sequence<Acc::arity>{});
  }

  // Whether events SI and SJ of parallel offload K, whose indices have the
  // forms fi and fj, can touch one element in two different iterations of
  // the offload loop (the first axis where the iterations differ, in either
  // direction).
  template <std::size_t K, class SI, class SJ>
  static constexpr meeting in_two_iterations(affine_form const* fi, affine_form const* fj, int rank,
                                             offloads_t const* offs, Args const* args) {
    constexpr int axes = view<K>::axes;
    relations cases[2 * axes];
    for (int a = 0; a < axes; ++a)
      for (int dir = 0; dir < 2; ++dir) {
        relations& c = cases[2 * a + dir];
        for (int q = 0; q < a; ++q) c.r[0][q] = relation::same;
        c.r[0][a] = dir == 0 ? relation::before : relation::after;
      }
    return may_meet(fi, fj, rank, event_space<K, SI>(offs, args), event_space<K, SJ>(offs, args), cases, 2 * axes);
  }

  // Whether an if_ whose then-arm holds both accesses (paths PA and PB of
  // Body, index forms fa and fb) keeps them apart: 1 proven, 0 not, -1 not
  // known before launch (check/dependence.hpp, guard_apart).
  template <class Body, class PA, class PB>
  static constexpr int guards_apart(Body const* b, affine_form const* fa, affine_form const* fb, int rank,
                                    Args const* args) {
    using guards = shared_guards<Body, PA, PB>;
    if constexpr (guards::count == 0)
      return 0;
    else
      return guards_apart_in<Body, guards>(std::make_index_sequence<guards::count>{}, b, fa, fb, rank, args);
  }
  template <class Body, class Guards, std::size_t... Gs>
  static constexpr int guards_apart_in(std::index_sequence<Gs...>, Body const* b, affine_form const* fa,
                                       affine_form const* fb, int rank, Args const* args) {
    int const each[] = {guard_apart_at<Body, Guards, Gs>(b, fa, fb, rank, args)...};
    int apart = 0;
    for (int r : each) apart = r > 0 || apart > 0 ? 1 : (r < 0 ? -1 : apart);
    return apart;
  }
  template <class Body, class Guards, std::size_t G>
  static constexpr int guard_apart_at(Body const* b, affine_form const* fa, affine_form const* fb, int rank,
                                      Args const* args) {
    using path = typename Guards::template condition_t<Guards::depths[G]>;
    guard_eval<Args> const conditions{{args, written_params}};
    return guard_apart(conditions(node_ptr<Body, path>(b)), fa, fb, rank);
  }

  // ---- D2: cross-iteration read-after-write in parallel offload K --------------------------------
  // Event SI writes, event LJ reads the same differentiable field, anywhere in
  // the body (nested loops and funcs included): an error when some iteration
  // can read an element another iteration writes.
  template <std::size_t K, class SI, class LJ>
  static constexpr pair_verdict d2_verdict(offloads_t const* offs, Args const* args, bool at_launch) {
    using body = typename view<K>::body;
    using SA = typename SI::access;
    using LA = typename LJ::access;
    if constexpr (coefficients_apart_v<body, typename SI::path, body, typename LJ::path>) return {verdict::ok, false};
    auto const* b = body_ptr<K>(offs);
    auto const* s = node_ptr<body, typename SI::path>(b);
    auto const* l = node_ptr<body, typename LJ::path>(b);
    constexpr int rank = SA::arity;
    affine_form fs[rank > 0 ? rank : 1], fl[rank > 0 ? rank : 1];
    index_forms(s, args, fs);
    index_forms(l, args, fl);
    // The same index expressions in a store and a load name the iteration's
    // own element (a store that other iterations hit would race already in
    // the forward pass): the seed's in-place rule, needed where an index is
    // not affine (a local, a value read from a field).
    if constexpr (SI::kind == access_kind::store && std::is_same_v<SA, LA>) {
      bool opaque = false;
      for (int k = 0; k < rank; ++k) opaque = opaque || !fs[k].linear;
      if (opaque) {
        verdict const same = same_literals(s, l);
        if (same == verdict::ok) return {verdict::ok, false};
        if (same == verdict::unknown && !at_launch) return {verdict::unknown, true};
      }
    }
    meeting const m = in_two_iterations<K, SI, LJ>(fs, fl, rank, offs, args);
    if (m.disjoint) return {verdict::ok, false};
    int const guarded = guards_apart<body, typename SI::path, typename LJ::path>(b, fs, fl, rank, args);
    if (guarded > 0) return {verdict::ok, false};
    if (guarded < 0 && !at_launch) return {verdict::unknown, true};
    if (at_launch || !m.unknowns) return {verdict::error, false};
    auto const* loop = view<K>::loop_ptr(offload_ptr<K>(offs));
    verdict const v = d2_pair(s, l, loop, args);
    return {v == verdict::ok ? verdict::unknown : v, true};
  }

  // The pairwise checks below visit only the pairs of events that can
  // matter (a write and a read of the same field): which pairs those are is
  // worked out from one table per offload, a row per event, by loops in a
  // constant expression, and only those pairs are instantiated. Nesting one
  // lambda per event inside one per event instead instantiated every pair,
  // the square of the number of accesses, most of them for nothing.
  struct event_row {
    access_kind kind = access_kind::load;
    bool needed = false;
    int param = -1;
    bool primal = false;
    bool differentiable = false;
  };
  template <class List>
  struct event_rows;
  template <class... E>
  struct event_rows<detail::type_list<E...>> {
    static constexpr std::size_t size = sizeof...(E);
    static constexpr event_row rows[size > 0 ? size : 1] = {
        event_row{E::kind, E::needed, E::access::op_type::param, E::access::op_type::which == buffer::primal,
                  differentiable_access<typename E::access>()}...};
  };
  // The indices k < N for which match(k) holds, in order, the count first.
  template <std::size_t N, class Match>
  static constexpr std::size_t count_matching(Match match) {
    std::size_t n = 0;
    for (std::size_t k = 0; k < N; ++k) n += match(k) ? 1 : 0;
    return n;
  }
  template <std::size_t N, std::size_t Count, class Match>
  static constexpr std::array<std::size_t, Count> indices_matching(Match match) {
    std::array<std::size_t, Count> out{};
    std::size_t n = 0;
    for (std::size_t k = 0; k < N; ++k)
      if (match(k)) out[n++] = k;
    return out;
  }
  // The pairs of events (i, j), i < NA of the first offload and j < NB of the
  // second, for which first(i) and match(i, j) hold, as the indices i * NB + j
  // in order, the count first. `first` tests the pair's rare side (a write, or
  // a read of a field the other side writes) so that a body of n accesses
  // costs about n constant evaluations plus its pairs, not n * n: a block of
  // 260 statements that each read x[i] has 68,000 pairs of accesses and no
  // pair to judge.
  template <std::size_t NA, std::size_t NB, class First, class Match>
  static constexpr std::size_t count_pairs(First first, Match match) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < NA; ++i)
      if (first(i))
        for (std::size_t j = 0; j < NB; ++j) n += match(i, j) ? 1 : 0;
    return n;
  }
  template <std::size_t NA, std::size_t NB, std::size_t Count, class First, class Match>
  static constexpr std::array<std::size_t, Count> pairs_matching(First first, Match match) {
    std::array<std::size_t, Count> out{};
    std::size_t n = 0;
    for (std::size_t i = 0; i < NA; ++i)
      if (first(i))
        for (std::size_t j = 0; j < NB; ++j)
          if (match(i, j)) out[n++] = i * NB + j;
    return out;
  }
  template <std::size_t NA, std::size_t NB, class First, class Match>
  static constexpr auto event_pairs(First first, Match match) {
    return pairs_matching<NA, NB, count_pairs<NA, NB>(first, match)>(first, match);
  }

  // D2 pairs: a write (i) and a read (j) of one differentiable field, both
  // in offload K.
  static constexpr bool is_differentiable_write(event_row const& w) {
    return (w.kind == access_kind::store || w.kind == access_kind::accumulate) && w.differentiable;
  }
  static constexpr bool d2_match(event_row const& w, event_row const& l) {
    return is_differentiable_write(w) && l.kind == access_kind::load && l.param == w.param && l.differentiable;
  }
  template <std::size_t K>
  static constexpr auto d2_pairs = [] {
    using rows = event_rows<events<K>>;
    constexpr auto write = [](std::size_t i) { return is_differentiable_write(rows::rows[i]); };
    constexpr auto match = [](std::size_t i, std::size_t j) { return d2_match(rows::rows[i], rows::rows[j]); };
    return event_pairs<rows::size, rows::size>(write, match);
  }();

  // A pair's verdict on these offloads and arguments, given the verdict the
  // types alone gave it (typed: null offloads and arguments). For the rules
  // whose `ok` is a proof over exact index forms (D2 and the order rules:
  // compile-time constants and loop indices, over ranges the numbers only
  // narrow), a pair the types prove apart is apart for every value of the
  // numbers, so a launch judges again only the pairs the types left open:
  // its cost is theirs. D5's `ok` also covers indices the types cannot
  // follow (i * n), which numbers may make plain, so D5 is judged again.
  template <bool TypedOkHolds, class Judge>
  static constexpr pair_verdict with_numbers(pair_verdict typed, offloads_t const* offs, Args const* args,
                                             Judge const& judge) {
    if ((TypedOkHolds && typed.v == verdict::ok) || (offs == nullptr && args == nullptr)) return typed;
    return judge();
  }

  // A pair's verdict from the types alone: a constant of its own, so that
  // the compiler evaluates each pair apart (clang bounds the steps of one
  // constant evaluation, and a kernel's checks may judge thousands of pairs).
  template <class Judge, class SI, class SJ>
  static constexpr pair_verdict typed_pair =
      Judge{}(static_cast<SI*>(nullptr), static_cast<SJ*>(nullptr), nullptr, nullptr, false);

  // The pairs of events of parallel offload K that Pairs lists (event i and
  // event j as i * events + j), each judged by Judge (a lambda without
  // captures: (SI*, SJ*, offloads, arguments, at_launch) -> pair_verdict)
  // and recorded as finding f, named after the first event's field.
  template <std::size_t K, auto const& Pairs, bool TypedOkHolds, class Judge>
  static constexpr void pairs_in_offload(report& r, offloads_t const* offs, Args const* args, bool at_launch,
                                         finding f, Judge) {
    if constexpr (view<K>::parallel) {
      using E = typename to_tuple<events<K>>::type;
      // 1 where there are no events, nor pairs: clang warns of a division by 0.
      constexpr std::size_t n = to_tuple<events<K>>::size > 0 ? to_tuple<events<K>>::size : 1;
      [&]<std::size_t... Ps>(std::index_sequence<Ps...>) {
        auto pair = [&]<std::size_t P>(std::integral_constant<std::size_t, P>) {
          using SI = detail::tuple_element_t<Pairs[P] / n, E>;
          using SJ = detail::tuple_element_t<Pairs[P] % n, E>;
          pair_verdict const v = with_numbers<TypedOkHolds>(typed_pair<Judge, SI, SJ>, offs, args, [&] {
            return Judge{}(static_cast<SI*>(nullptr), static_cast<SJ*>(nullptr), offs, args, at_launch);
          });
          func_chain const where = deeper(chain_of<K, SI>(), chain_of<K, SJ>());
          record(r, v, at_launch, f, SI::access::op_type::param, int(K), where.s);
        };
        (void)pair;  // no pairs: nothing to check
        detail::in_order{(pair(std::integral_constant<std::size_t, Ps>{}), 0)...};
      }(std::make_index_sequence<Pairs.size()>{});
    }
  }

  template <std::size_t K>
  static constexpr void d2(report& r, offloads_t const* offs, Args const* args, bool at_launch) {
    pairs_in_offload<K, d2_pairs<K>, true>(r, offs, args, at_launch, finding::cross_iteration_raw,
                                     []<class SI, class LJ>(SI*, LJ*, offloads_t const* o, Args const* a, bool l) {
                                       return d2_verdict<K, SI, LJ>(o, a, l);
                                     });
  }

  // ---- D5: iterations of parallel offload K that write one element ------------------------------
  // Event SI stores into a differentiable field and event WJ (SI itself, a
  // later store, or any accumulation) writes the same field: an error when
  // two different iterations can write the same element. The forward pass
  // then keeps whichever store lands last (with two threads, whichever
  // thread is slower), and the adjoint, which hands the element's gradient
  // to one of the stores and clears it, cannot know which one that was.
  // Only stores in the body of the parallel loop itself are judged, where
  // every iteration runs them and their indices are functions of the
  // iteration alone: one inside a nested loop (whose range may depend on the
  // iteration: CSR segments, range(2 * i, 2 * i + 2)) or under an if_ or a
  // while_ (`if_(i == 0, loss() = ...)`) is not, nor is an index that is not
  // affine (a value read from a field, a division). The opt-in
  // ctg::race_check sees those at launch.
  template <class Root, class Path>
  struct conditional_path : std::false_type {};
  template <class Root, std::size_t P, std::size_t... Rest>
  struct conditional_path<Root, std::index_sequence<P, Rest...>>
      : std::bool_constant<is_if_op<typename Root::op_type> || is_while_op<typename Root::op_type> ||
                           conditional_path<node_at_t<Root, std::index_sequence<P>>,
                                            std::index_sequence<Rest...>>::value> {};
  template <std::size_t K, class SI, class WJ>
  static constexpr pair_verdict d5_verdict(offloads_t const* offs, Args const* args, bool at_launch) {
    using body = typename view<K>::body;
    // Writes of different coefficients never meet; a coefficient only the
    // launch knows (v[i][k]) stands for any, so such a write is compared as
    // a write of the whole element.
    constexpr bool nested = seq_size<typename SI::loops>::size > 0 || seq_size<typename WJ::loops>::size > 0;
    if constexpr (nested || conditional_path<body, typename SI::path>::value ||
                  conditional_path<body, typename WJ::path>::value ||
                  coefficients_apart_v<body, typename SI::path, body, typename WJ::path>) {
      return {verdict::ok, false};
    } else {
      auto const* b = body_ptr<K>(offs);
      auto const* s = node_ptr<body, typename SI::path>(b);
      auto const* w = node_ptr<body, typename WJ::path>(b);
      constexpr int rank = SI::access::arity;
      affine_form fs[rank > 0 ? rank : 1], fw[rank > 0 ? rank : 1];
      index_forms(s, args, fs);
      index_forms(w, args, fw);
      for (int k = 0; k < rank; ++k)
        if (!fs[k].linear || !fw[k].linear) return {verdict::ok, false};
      meeting const m = in_two_iterations<K, SI, WJ>(fs, fw, rank, offs, args);
      if (m.disjoint) return {verdict::ok, false};
      if (at_launch || !m.unknowns) return {verdict::error, false};
      return {verdict::unknown, true};
    }
  }

  // D5 pairs: a store (i) into a differentiable field, and a store (j >= i:
  // each pair once, a store with itself included) or an accumulation of it.
  static constexpr bool is_differentiable_store(event_row const& s) {
    return s.kind == access_kind::store && s.differentiable;
  }
  static constexpr bool d5_match(event_row const& s, event_row const& w, bool later) {
    return is_differentiable_store(s) && w.param == s.param && w.differentiable &&
           (w.kind == access_kind::accumulate || (w.kind == access_kind::store && later));
  }
  template <std::size_t K>
  static constexpr auto d5_pairs = [] {
    using rows = event_rows<events<K>>;
    constexpr auto store = [](std::size_t i) { return is_differentiable_store(rows::rows[i]); };
    constexpr auto match = [](std::size_t i, std::size_t j) { return d5_match(rows::rows[i], rows::rows[j], j >= i); };
    return event_pairs<rows::size, rows::size>(store, match);
  }();

  template <std::size_t K>
  static constexpr void d5(report& r, offloads_t const* offs, Args const* args, bool at_launch) {
    pairs_in_offload<K, d5_pairs<K>, false>(r, offs, args, at_launch, finding::parallel_store_conflict,
                                     []<class SI, class WJ>(SI*, WJ*, offloads_t const* o, Args const* a, bool l) {
                                       return d5_verdict<K, SI, WJ>(o, a, l);
                                     });
  }

  // ---- D3 and its mirror: a needed load in offload A, a write in offload B ---------------------------
  // Later = true (D3): can the write overwrite the element the load read,
  // after it read it (in a later offload, later in the same iteration, in a
  // later iteration of a loop both sit in)? Then the adjoint, which reads
  // fields as the kernel left them, would see the new value.
  // Later = false: can the write come before the read (an earlier offload,
  // earlier in the same iteration, an earlier iteration of a shared loop)?
  // Then the value read is not the one the field held when the launch began,
  // which is what a tape restores for the adjoint.
  template <bool Later, std::size_t A, std::size_t B, std::size_t I, std::size_t J>
  static constexpr pair_verdict order_verdict(offloads_t const* offs, Args const* args, bool at_launch) {
    using LI = detail::tuple_element_t<I, typename to_tuple<events<A>>::type>;
    using SJ = detail::tuple_element_t<J, typename to_tuple<events<B>>::type>;
    using bodyA = typename view<A>::body;
    using bodyB = typename view<B>::body;
    if constexpr (coefficients_apart_v<bodyB, typename SJ::path, bodyA, typename LI::path>) return {verdict::ok, false};
    auto const* s = node_ptr<bodyB, typename SJ::path>(body_ptr<B>(offs));
    auto const* l = node_ptr<bodyA, typename LI::path>(body_ptr<A>(offs));
    constexpr int rank = std::remove_pointer_t<decltype(s)>::arity;
    affine_form fs[rank > 0 ? rank : 1], fl[rank > 0 ? rank : 1];
    index_forms(s, args, fs);
    index_forms(l, args, fl);
    access_space const ss = event_space<B, SJ>(offs, args);
    access_space const sl = event_space<A, LI>(offs, args);
    // may_hit(w, r, ...) asks whether w in a later iteration hits r: for the
    // mirror the read is the later one.
    // The axes on which both indices are affine (their values possibly
    // unknown here, but no field the kernel writes, no cast of a float).
    unsigned affine_axes = 0;
    for (int k = 0; k < rank; ++k)
      if (fs[k].linear && fl[k].linear) affine_axes |= 1u << k;
    auto hit = [&](int eq, int later) {
      return Later ? may_hit(s, l, args, eq, later, affine_axes) : may_hit(l, s, args, eq, later, affine_axes);
    };

    relations cases[1 + max_levels * max_axes];
    int count = 0;
    verdict fallback = verdict::ok;
    if constexpr (A != B) {
      cases[count++] = relations{};  // different offloads: no index in common
      fallback = hit(0, -1);
    } else {
      using loops = seq_size<typename LI::loops>;
      constexpr int common = common_loops<typename LI::loops, typename SJ::loops>();
      relations base{};
      if constexpr (view<A>::parallel)
        for (int a = 0; a < view<A>::axes; ++a) base.r[0][a] = relation::same;  // one iteration of the offload
      int const equal = view<A>::parallel ? 1 : 0;  // levels below share their index values
      auto hold = [&](relations& c, int e) {  // the same iteration of loop entry e
        if (entry_level(e) == while_level || entry_level(e) >= max_levels) return;
        for (int a = 0; a < entry_axes(e) && a < max_axes; ++a) c.r[entry_level(e)][a] = relation::same;
      };
      // In the same iteration of every common loop, in program order (never
      // for two arms of one branch: one of them runs).
      if constexpr ((Later ? J > I : J < I) && !exclusive_arms_v<bodyA, typename LI::path, typename SJ::path>) {
        relations c = base;
        int eq = equal;
        for (int k = 0; k < common; ++k) {
          hold(c, loops::at(k));
          if (entry_level(loops::at(k)) != while_level) eq = entry_level(loops::at(k)) + 1;
        }
        cases[count++] = c;
        fallback = either(fallback, hit(eq, -1));
      }
      // Another iteration of common loop k, the same one of the loops around it.
      for (int k = 0; k < common; ++k) {
        relations c = base;
        int eq = equal;
        for (int q = 0; q < k; ++q) {
          hold(c, loops::at(q));
          if (entry_level(loops::at(q)) != while_level) eq = entry_level(loops::at(q)) + 1;
        }
        int const e = loops::at(k);
        int const level = entry_level(e);
        if (level == while_level || level >= max_levels) {
          cases[count++] = c;
        } else {
          for (int b = 0; b < entry_axes(e) && b < max_axes; ++b) {
            relations d = c;
            for (int q = 0; q < b; ++q) d.r[level][q] = relation::same;
            d.r[level][b] = Later ? relation::after : relation::before;  // the write's iteration
            cases[count++] = d;
          }
        }
        int const later = (level != while_level && entry_axes(e) == 1) ? level : -1;
        fallback = either(fallback, hit(eq, later));
      }
    }
    meeting const m = may_meet(fs, fl, rank, ss, sl, cases, count);
    if (m.disjoint) return {verdict::ok, false};
    if (at_launch || !m.unknowns) return {verdict::error, false};
    return {fallback == verdict::ok ? verdict::unknown : fallback, true};
  }

  // order_verdict from the types alone, a constant of its own (typed_pair),
  // and judged with these numbers only when the types left it open.
  template <bool Later, std::size_t A, std::size_t B, std::size_t I, std::size_t J>
  static constexpr pair_verdict typed_order = order_verdict<Later, A, B, I, J>(nullptr, nullptr, false);
  template <bool Later, std::size_t A, std::size_t B, std::size_t I, std::size_t J>
  static constexpr pair_verdict order_judged(offloads_t const* offs, Args const* args, bool at_launch) {
    return with_numbers<true>(typed_order<Later, A, B, I, J>, offs, args,
                              [&] { return order_verdict<Later, A, B, I, J>(offs, args, at_launch); });
  }

  // Per field parameter: the D3 verdict (can the adjoint read it as the
  // kernel left it?) and the mirror's (does every needed read see the value
  // the field held when the launch began?).
  struct param_order {
    verdict overwritten = verdict::ok;
    verdict preceded = verdict::ok;
    int offload = -1;
    func_chain func{};
  };
  static constexpr int tracked_params = Args::size < 64 ? int(Args::size) : 64;

  // D3 pairs: a needed read of a field's values in offload A (i) and a
  // write of them in offload B (j).
  static constexpr bool order_match(event_row const& l, event_row const& w) {
    return l.kind == access_kind::load && l.needed && l.primal &&
           (w.kind == access_kind::store || w.kind == access_kind::accumulate) && w.param == l.param && w.primal;
  }
  template <std::size_t A, std::size_t B>
  static constexpr auto order_pair_list = [] {
    using rows_a = event_rows<events<A>>;
    using rows_b = event_rows<events<B>>;
    constexpr auto read = [](std::size_t i) {
      return (param_bit(rows_a::rows[i].param) & written_in<events<B>>::mask) != 0;
    };
    constexpr auto match = [](std::size_t i, std::size_t j) { return order_match(rows_a::rows[i], rows_b::rows[j]); };
    return event_pairs<rows_a::size, rows_b::size>(read, match);
  }();

  template <std::size_t A, std::size_t B>
  static constexpr void order_pairs(report& r, param_order* po, offloads_t const* offs, Args const* args,
                                    bool at_launch) {
    using EA = typename to_tuple<events<A>>::type;
    using EB = typename to_tuple<events<B>>::type;
    [&]<std::size_t... Ps>(std::index_sequence<Ps...>) {
      auto pair = [&]<std::size_t P>(std::integral_constant<std::size_t, P>) {
        // 1 where there are no events, nor pairs: clang warns of a division by 0.
        constexpr std::size_t nb = to_tuple<events<B>>::size > 0 ? to_tuple<events<B>>::size : 1;
        constexpr std::size_t I = order_pair_list<A, B>[P] / nb, J = order_pair_list<A, B>[P] % nb;
        using SJ = detail::tuple_element_t<J, EB>;
        constexpr int p = detail::tuple_element_t<I, EA>::access::op_type::param;
        if constexpr (B >= A) {
          pair_verdict const v = order_judged<true, A, B, I, J>(offs, args, at_launch);
          if (v.unknowns && !at_launch) r.wants_values = true;
          if constexpr (p < tracked_params) {
            if (po[p].overwritten != verdict::error && v.v != verdict::ok) {
              po[p].offload = int(B);
              po[p].func = chain_of<B, SJ>();
            }
            po[p].overwritten = either(po[p].overwritten, v.v);
          } else {
            record(r, v, at_launch, finding::overwritten_after_read, p, int(B), chain_of<B, SJ>().s);
          }
        }
        if constexpr (B <= A && p < tracked_params) {
          pair_verdict const v = order_judged<false, A, B, I, J>(offs, args, at_launch);
          if (v.unknowns && !at_launch) r.wants_values = true;
          po[p].preceded = either(po[p].preceded, v.v);
        }
      };
      (void)pair;  // no pairs: nothing to check
      detail::in_order{(pair(std::integral_constant<std::size_t, Ps>{}), 0)...};
    }(std::make_index_sequence<order_pair_list<A, B>.size()>{});
  }

  // Fields whose values the adjoint reads (any needed load, differentiable or
  // not: indices and loop bounds count), and fields the kernel writes.
  template <class List>
  struct needed_in;
  template <class... E>
  struct needed_in<detail::type_list<E...>> {
    static constexpr unsigned long long mask = detail::or_all<unsigned long long>(
        {((E::kind == access_kind::load && E::needed && E::access::op_type::which == buffer::primal)
              ? param_bit(E::access::op_type::param)
              : 0ull)...});
  };
  // The bounds of a parallel offload's loop are evaluated again by its adjoint.
  template <std::size_t K>
  static constexpr unsigned long long bound_reads() {
    if constexpr (view<K>::parallel) {
      using loop = typename view<K>::loop;
      return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        return (read_params_v<detail::tuple_element_t<Is, decltype(loop::kids)>> | ... | 0ull);
      }(std::make_index_sequence<2 * view<K>::axes>{});
    } else {
      return 0;
    }
  }
  // The bounds of a parallel offload are read once, before its body, and
  // read again by its adjoint: a write to a bound's field by that offload or
  // a later one changes what the adjoint reads (and so which iterations it
  // runs); one by an earlier offload means the read did not see the value
  // the launch began with. Written elements are not compared: any write to
  // the field counts.
  template <std::size_t A>
  static constexpr void bound_order(report& r, param_order* po, bool at_launch) {
    constexpr unsigned long long reads = bound_reads<A>();
    if constexpr (reads != 0) {
      [&]<std::size_t... Bs>(std::index_sequence<Bs...>) {
        auto one = [&]<std::size_t B>(std::integral_constant<std::size_t, B>) {
          constexpr unsigned long long both = reads & written_in<events<B>>::mask;
          for (int p = 0; p < int(Args::size) && both != 0; ++p) {
            if ((both & param_bit(p)) == 0) continue;
            if (B >= A) {
              if (p < tracked_params) {
                if (po[p].overwritten != verdict::error) po[p].offload = int(B);
                po[p].overwritten = verdict::error;
              } else {
                record(r, verdict::error, at_launch, finding::overwritten_after_read, p, int(B), "");
              }
            } else if (p < tracked_params) {
              po[p].preceded = verdict::error;
            }
          }
        };
        (one(std::integral_constant<std::size_t, Bs>{}), ...);
      }(std::make_index_sequence<n_offloads>{});
    }
  }

  static constexpr unsigned long long needed_params = [] {
    return [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      return ((needed_in<events<Ks>>::mask | bound_reads<Ks>()) | ... | 0ull);
    }(std::make_index_sequence<n_offloads>{});
  }();

  // ---- the rest: extrema, gradient buffers, missing derivative rules -----------------------------------
  // The events that are findings by themselves: a min or max into a field
  // with a gradient, a read or write of a gradient or tangent buffer.
  static constexpr bool flagged(event_row const& e) {
    return (e.kind == access_kind::extremum && e.differentiable) || !e.primal;
  }
  template <std::size_t K>
  static constexpr auto flagged_events = [] {
    using rows = event_rows<events<K>>;
    constexpr auto match = [](std::size_t k) { return flagged(rows::rows[k]); };
    return indices_matching<rows::size, count_matching<rows::size>(match)>(match);
  }();
  template <std::size_t K>
  static constexpr void others(report& r) {
    if constexpr (missing_backward<analysis<K>, typename view<K>::body>::value)
      r.add(finding::no_derivative_rule, -1, int(K), chain_of<K, void>().s);
    using E = typename to_tuple<events<K>>::type;
    [&]<std::size_t... Ps>(std::index_sequence<Ps...>) {
      auto one = [&]<std::size_t P>(std::integral_constant<std::size_t, P>) {
        using Ev = detail::tuple_element_t<flagged_events<K>[P], E>;
        using Acc = typename Ev::access;
        func_chain const chain = chain_of<K, Ev>();
        char const* func = chain.s;
        if constexpr (Ev::kind == access_kind::extremum && differentiable_access<Acc>())
          r.add(finding::atomic_extremum_on_gradient, Acc::op_type::param, int(K), func);
        if constexpr (Acc::op_type::which != buffer::primal)
          r.add(finding::gradient_buffer_read, Acc::op_type::param, int(K), func);
      };
      (void)one;  // no event flagged
      detail::in_order{(one(std::integral_constant<std::size_t, Ps>{}), 0)...};
    }(std::make_index_sequence<flagged_events<K>.size()>{});
  }

  // D1 (CTG-AD-001) without the adstack, CTG-AD-003 with it but unsized.
  template <std::size_t K>
  static constexpr void stack(report& r, bool no_adstack, bool capacity_given) {
    using plan = ad::reverse_plan<Args, named_offload_t<K>, Slots>;
    using root = typename view<K>::body;
    constexpr auto demand = plan::demand;
    func_chain at;
    view<K>::wrapping(at);
    // The walks that name the loop are instantiated only for an offload
    // whose adjoint needs the adstack at all (most need none).
    if constexpr (demand.uses_stack) {
      if (no_adstack) {
        stack_loop_walk<typename plan::evaluator, false>::find(static_cast<root const*>(nullptr), at, at);
        r.add(finding::nested_loop_needs_adstack, -1, int(K), at.s);
        return;
      }
    }
    if constexpr (demand.unbounded) {
      if (!no_adstack && !capacity_given) {
        stack_loop_walk<typename plan::evaluator, true>::find(static_cast<root const*>(nullptr), at, at);
        r.add(finding::adstack_unsized, -1, int(K), at.s);
      }
    }
  }

  // Every check over the kernel's offloads. At compile time (offs and args
  // null, or offs an IR built in a constant expression) undecided pairs are
  // counted; at launch everything is decided. no_adstack and capacity_given
  // are the kernel's options (ctg::no_adstack, ctg::adstack_capacity<N>).
  static constexpr report evaluate(offloads_t const* offs, Args const* args, bool at_launch, bool no_adstack = false,
                                   bool capacity_given = false) {
    report r;
    param_order po[tracked_params > 0 ? tracked_params : 1]{};
    [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      (d2<Ks>(r, offs, args, at_launch), ...);
      (d5<Ks>(r, offs, args, at_launch), ...);
      auto load_in = [&]<std::size_t A>(std::integral_constant<std::size_t, A>) {
        [&]<std::size_t... Bs>(std::index_sequence<Bs...>) {
          (order_pairs<A, Bs>(r, po, offs, args, at_launch), ...);
        }(std::make_index_sequence<n_offloads>{});
      };
      (load_in(std::integral_constant<std::size_t, Ks>{}), ...);
      (bound_order<Ks>(r, po, at_launch), ...);
      if (!at_launch) (others<Ks>(r), ...);
      if (!at_launch) (stack<Ks>(r, no_adstack, capacity_given), ...);
    }(std::make_index_sequence<n_offloads>{});
    for (int p = 0; p < tracked_params; ++p) {
      param_order const& o = po[p];
      if (o.overwritten == verdict::ok) continue;
      // A tape can give the adjoint the values the field held when the launch
      // began, when every needed read sees those.
      if (o.preceded == verdict::ok)
        r.pre_params |= param_bit(p);
      else if (o.preceded == verdict::unknown && !at_launch)
        ++r.tape_undecided;
      record(r, o.overwritten, at_launch, finding::overwritten_after_read, p, o.offload, o.func.s);
    }
    r.needed_params = needed_params;
    r.written_params = written_params;
    return r;
  }
};

}  // namespace check
}  // namespace ctg
