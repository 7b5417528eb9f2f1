// Compile-time facts the adjoint needs, computed from the IR type of one
// offload: which locals carry a gradient (active), whose values the reverse
// pass must be able to read back (needed), what each nested loop must
// snapshot per iteration (carried), and for which fields gradient
// accumulation can be a plain add (every iteration of the parallel loop owns
// its own slot) rather than an atomic one.
#pragma once
#include <array>
#include <type_traits>

#include "../analysis/invariance.hpp"
#include "../eval/forward.hpp"
#include "../eval/slots.hpp"
#include "derivatives.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::ad {

CTG_IMPL_IR_VOCABULARY;


// A set of frame slots (locals and sites), as a constexpr value.
template <int N>
struct slot_set {
  static constexpr int size = N;
  bool bit[N > 0 ? N : 1]{};
  constexpr bool operator[](int s) const { return s >= 0 && s < N && bit[s]; }
  constexpr void set(int s) {
    if (s >= 0 && s < N) bit[s] = true;
  }
  constexpr bool operator==(slot_set const& o) const {
    for (int k = 0; k < N; ++k)
      if (bit[k] != o.bit[k]) return false;
    return true;
  }
  constexpr bool empty() const {
    for (int k = 0; k < N; ++k)
      if (bit[k]) return false;
    return true;
  }
  constexpr slot_set operator&(slot_set const& o) const {
    slot_set r;
    for (int k = 0; k < N; ++k) r.bit[k] = bit[k] && o.bit[k];
    return r;
  }
  constexpr slot_set operator|(slot_set const& o) const {
    slot_set r;
    for (int k = 0; k < N; ++k) r.bit[k] = bit[k] || o.bit[k];
    return r;
  }
  constexpr slot_set minus(slot_set const& o) const {
    slot_set r;
    for (int k = 0; k < N; ++k) r.bit[k] = bit[k] && !o.bit[k];
    return r;
  }
  constexpr int count() const {
    int c = 0;
    for (int k = 0; k < N; ++k) c += bit[k] ? 1 : 0;
    return c;
  }
};

template <class T>
inline constexpr bool differentiable_v = is_differentiable_v<T>;

// ---- activity ------------------------------------------------------------------------------
// Whether an expression's value depends on a differentiable input, given the
// set of active locals.
// (The walks below call their _impl directly for each kid: one constant-
// evaluation frame per level of the tree, so that an expression a few
// hundred operations deep stays within the compilers' default depth.)
template <int N>
struct activity_rules {
  template <class E>
  static constexpr bool expr(slot_set<N> const& act) {
    return expr_impl(static_cast<E const*>(nullptr), act);
  }

  template <class Op, class... K>
  static constexpr bool expr_impl(node<Op, K...> const*, slot_set<N> const& act) {
    using E = node<Op, K...>;
    if constexpr (requires { Op::value; } || std::is_same_v<Op, op::stop_grad>) {
      return false;  // constants, literals
    } else if constexpr (is_local<Op>::value) {
      return differentiable_v<value_t<E>> && act[is_local<Op>::slot];
    } else if constexpr (is_access<Op>::value) {
      return Op::has_grad && Op::which == buffer::primal && differentiable_v<value_t<E>>;
    } else if constexpr (is_math<Op>::value) {
      if constexpr (is_math<Op>::kind == fn::grad_kind::none)
        return false;
      else
        return differentiable_v<value_t<E>> && (expr_impl(static_cast<K const*>(nullptr), act) || ...);
    } else if constexpr (std::is_same_v<Op, op::select> || is_custom_op<Op>) {
      return differentiable_v<value_t<E>> && (expr_impl(static_cast<K const*>(nullptr), act) || ...);
    } else if constexpr (is_cast<Op>::value) {
      return differentiable_v<value_t<E>> && (expr_impl(static_cast<K const*>(nullptr), act) || ...);
    } else if constexpr (std::is_same_v<Op, op::component>) {
      return expr_impl(static_cast<detail::tuple_element_t<0, detail::tuple<K...>> const*>(nullptr), act);
    } else if constexpr (is_make_matrix<Op>::value || is_func_scope_op<Op>) {
      return (expr_impl(static_cast<K const*>(nullptr), act) || ...);
    } else {
      return false;  // loop indices, extents, literals
    }
  }

  template <class Op>
  struct is_local : std::false_type {};
  template <int S, class T>
  struct is_local<op::local<S, T>> : std::true_type {
    static constexpr int slot = S;
  };
  template <class Op>
  struct is_access : std::false_type {};
  template <int I, class T, int R, bool G, bool D, buffer B>
  struct is_access<op::access<I, T, R, G, D, B>> : std::true_type {};
  template <class Op>
  struct is_math : std::false_type {};
  template <class Fn>
  struct is_math<op::math<Fn>> : std::true_type {
    static constexpr fn::grad_kind kind = Fn::kind;
  };
  template <class Op>
  struct is_cast : std::false_type {};
  template <class T>
  struct is_cast<op::cast<T>> : std::true_type {};
  template <class Op>
  struct is_make_matrix : std::false_type {};
  template <int R, int C>
  struct is_make_matrix<op::make_matrix<R, C>> : std::true_type {};
};

template <class Op>
struct let_slots;
template <int... S>
struct let_slots<op::let<S...>> {
  static constexpr int count = sizeof...(S);
  static constexpr int slot[sizeof...(S) > 0 ? sizeof...(S) : 1] = {S...};
};

// ---- the fixed points over one offload body ----------------------------------------------
// WithPrimal: the reverse sweep also writes the values the forward pass
// writes (reverse_plan), so every value a store or an accumulation writes,
// and where, is needed.
//
// RootName names the body (ir::named_t): launches and checks reach it under
// the same name, a plan's ir::body_name_t, so its tables are computed once.
// A name, not the body's type, because a class template's arguments are
// spelled in the name of each of its members, and the per-node members here
// are instantiated once per node, each with an assembler name that g++
// computes although they run in constant evaluation only and are never
// emitted, in time that grows with the square of the name (docs/05, *Names
// nobody emits*).
template <class RootName, int N, bool WithPrimal = false>
struct body_analysis {
  using Root = ir::named_t<RootName>;
  using act_rules = activity_rules<N>;
  template <class E>
  static constexpr bool active_with(slot_set<N> const& act) {
    return act_rules::template expr<E>(act);
  }

  // Marks locals that become active through assignments and let-inits. The
  // set is updated in place while walking in program order, so a chain of
  // locals each computed from the previous one is settled in one pass.
  template <class S>
  static constexpr void mark_active(slot_set<N>& act) {
    mark_active_impl(static_cast<S const*>(nullptr), act);
  }
  template <class Op, class... K>
  static constexpr void mark_active_impl(node<Op, K...> const*, slot_set<N>& act) {
    using kids = detail::tuple<K...>;
    if constexpr (is_assign_op<Op>) {
      using L = detail::tuple_element_t<0, kids>;
      using R = detail::tuple_element_t<1, kids>;
      if (differentiable_v<typename eval::assigned_local<L>::type> && active_with<R>(act))
        act.set(eval::assigned_local<L>::slot);
    } else if constexpr (is_let_op<Op>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((differentiable_v<value_t<detail::tuple_element_t<Is, kids>>> &&
                  active_with<detail::tuple_element_t<Is, kids>>(act)
              ? act.set(let_slots<Op>::slot[Is])
              : void()),
         ...);
      }(std::make_index_sequence<std::size_t(let_slots<Op>::count)>{});
      mark_active<detail::tuple_element_t<sizeof...(K) - 1, kids>>(act);
    } else if constexpr (is_statement_op<Op>) {
      (mark_active<K>(act), ...);
    }
  }
  template <class Op>
  static constexpr bool is_statement_op =
      std::is_same_v<Op, op::block> || is_if_op<Op> || is_while_op<Op> || is_loop_op<Op> ||
      is_func_scope_op<Op>;

  static constexpr slot_set<N> compute_active() {
    slot_set<N> act{};
    for (int iter = 0; iter <= N + 1; ++iter) {  // loops carry activity backwards: repeat to the fixed point
      slot_set<N> const before = act;
      mark_active<Root>(act);
      if (act == before) break;
    }
    return act;
  }
  static constexpr slot_set<N> active = compute_active();

  template <class E>
  static constexpr bool is_active = active_with<E>(active);

  // ---- needed values ------------------------------------------------------------------------
  // Marks the locals an expression reads when its value is needed (need) or
  // when its adjoint must be propagated (the rules say which operand values).
  template <class E>
  static constexpr void mark_expr(bool need, slot_set<N>& out) {
    mark_expr_impl(static_cast<E const*>(nullptr), need, out);
  }
  template <class Op, class... K>
  static constexpr void mark_expr_impl(node<Op, K...> const*, bool need, slot_set<N>& out) {
    if constexpr (act_rules::template is_local<Op>::value) {
      if (need) out.set(act_rules::template is_local<Op>::slot);
    } else {
      constexpr auto reads = adjoint_reads<Op, is_active<node<Op, K...>>, K...>();
      std::size_t j = 0;
      (mark_expr_impl(static_cast<K const*>(nullptr), need || reads[j++], out), ...);
    }
  }
  // Which kids of a node with operation Op the node's adjoint needs the
  // values of (besides those needed where the node's own value is).
  template <class Op, bool Active, class... K>
  static constexpr std::array<bool, sizeof...(K)> adjoint_reads() {
    std::array<bool, sizeof...(K)> reads{};
    if constexpr (act_rules::template is_access<Op>::value || is_custom_op<Op>) {
      // an access's indices locate its adjoint; a hand-written backward may
      // read every operand
      for (auto& r : reads) r = Active;
    } else if constexpr (act_rules::template is_math<Op>::value) {
      if constexpr (act_rules::template is_math<Op>::kind != fn::grad_kind::none && Active)
        reads = operand_needs<typename math_fn<Op>::type, is_active<K>...>();
    } else if constexpr (std::is_same_v<Op, op::select>) {
      reads[0] = Active;  // the condition picks the side the adjoint goes to
    } else if constexpr (std::is_same_v<Op, op::component>) {
      for (std::size_t j = 1; j < reads.size(); ++j) reads[j] = Active;
    }
    return reads;
  }
  // Which operands of math function Fn its adjoint reads, given which are active.
  template <class Fn, bool... Active>
  static constexpr std::array<bool, sizeof...(Active)> operand_needs() {
    return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      return std::array<bool, sizeof...(Active)>{rule<Fn>::template needs<int(Is)>(Active...)...};
    }(std::index_sequence_for<std::bool_constant<Active>...>{});
  }
  template <class Op>
  struct math_fn;
  template <class Fn>
  struct math_fn<op::math<Fn>> {
    using type = Fn;
  };

  // Needed values flow from uses back to definitions, so statements are
  // walked in reverse program order with the set updated in place: a chain
  // of locals is settled in one pass (loops may need a few).
  template <class S>
  static constexpr void mark_stmt(slot_set<N>& need) {
    mark_stmt_impl(static_cast<S const*>(nullptr), need);
  }
  template <class Op, class... K>
  static constexpr void mark_stmt_impl(node<Op, K...> const*, slot_set<N>& need) {
    using kids = detail::tuple<K...>;
    if constexpr (is_store_op<Op> || is_atomic_op<Op>) {
      using L = detail::tuple_element_t<0, kids>;
      using R = detail::tuple_element_t<1, kids>;
      using A = typename written_access<L>::type;
      if constexpr (WithPrimal) {
        mark_expr<L>(true, need);
        mark_expr<R>(true, need);
      } else if constexpr (A::op_type::has_grad && A::op_type::which == buffer::primal) {
        // The reverse pass reads and clears the gradient at the written
        // element (so its indices are needed) and propagates into the rhs.
        mark_expr<L>(false, need);
        mark_expr<R>(false, need);
      }
    } else if constexpr (is_assign_op<Op>) {
      using L = detail::tuple_element_t<0, kids>;
      using R = detail::tuple_element_t<1, kids>;
      constexpr int slot = eval::assigned_local<L>::slot;
      bool const needed = need[slot];
      // A needed local is recomputed (its rhs and any component index are
      // needed); an active one routes its adjoint (component indices needed).
      mark_expr<L>(needed, need);
      mark_expr<R>(needed, need);
    } else if constexpr (is_let_op<Op>) {
      mark_stmt<detail::tuple_element_t<sizeof...(K) - 1, kids>>(need);
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (mark_expr<detail::tuple_element_t<Is, kids>>(need[let_slots<Op>::slot[Is]], need), ...);
      }(std::make_index_sequence<std::size_t(let_slots<Op>::count)>{});
    } else if constexpr (is_if_op<Op> || is_while_op<Op>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (mark_stmt<detail::tuple_element_t<sizeof...(K) - 1 - Is, kids>>(need), ...);
      }(std::make_index_sequence<sizeof...(K) - 1>{});
      mark_expr<detail::tuple_element_t<0, kids>>(true, need);
    } else if constexpr (is_loop_op<Op>) {
      mark_stmt<detail::tuple_element_t<2 * Op::axes, kids>>(need);
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (mark_expr<detail::tuple_element_t<Is, kids>>(true, need), ...);
      }(std::make_index_sequence<2 * Op::axes>{});
    } else if constexpr (std::is_same_v<Op, op::block> || is_func_scope_op<Op>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (mark_stmt<detail::tuple_element_t<sizeof...(K) - 1 - Is, kids>>(need), ...);
      }(std::index_sequence_for<K...>{});
    }
  }

  static constexpr slot_set<N> compute_needed() {
    slot_set<N> need{};
    for (int iter = 0; iter <= N + 1; ++iter) {
      slot_set<N> const before = need;
      mark_stmt<Root>(need);
      if (need == before) break;
    }
    return need;
  }
  static constexpr slot_set<N> needed = compute_needed();

  // ---- values nothing reads ----------------------------------------------------------------------
  // An assignment whose value is overwritten before anything reads it, or
  // never read at all, leaves its local's adjoint at zero, and propagating
  // that zero through its operation gives 0 * partial: NaN where the
  // partial is infinite (sqrt at 0) or the value is NaN, in a gradient that
  // does not depend on the value at all. The reverse pass skips those
  // assignments (and let-inits): the locals live after each of them, by one
  // backward walk.
  struct liveness {
    slot_set<N> seen_sites, live_sites;  // whole assignments, by site
    slot_set<N> seen_inits, live_inits;  // let-inits, by slot
  };
  // after plus the locals expression E reads (mark_expr with every value
  // needed: the needed values' walk, instantiated for E already unless E is
  // written into a field without a gradient).
  template <class E>
  static constexpr slot_set<N> with_reads(slot_set<N> after) {
    mark_expr<E>(true, after);
    return after;
  }

  // The locals live before statement St, given those live after it.
  template <class St>
  static constexpr slot_set<N> live_before(slot_set<N> after, liveness& out) {
    return live_impl(static_cast<St const*>(nullptr), after, out);
  }
  template <class Op, class... K>
  static constexpr slot_set<N> live_impl(node<Op, K...> const*, slot_set<N> after, liveness& out) {
    using kids = detail::tuple<K...>;
    if constexpr (is_assign_op<Op>) {
      using L = detail::tuple_element_t<0, kids>;
      using R = detail::tuple_element_t<1, kids>;
      constexpr int slot = eval::assigned_local<L>::slot;
      if constexpr (std::is_same_v<L, node<op::local<slot, typename eval::assigned_local<L>::type>>>) {
        out.seen_sites.set(Op::site);
        if (after[slot]) out.live_sites.set(Op::site);
        after.bit[slot] = false;
        return with_reads<R>(after);
      } else {  // a coefficient: the rest of the local stays
        return with_reads<R>(with_reads<L>(after));
      }
    } else if constexpr (std::is_same_v<Op, op::block>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((after = live_before<detail::tuple_element_t<sizeof...(K) - 1 - Is, kids>>(after, out)), ...);
      }(std::index_sequence_for<K...>{});
      return after;
    } else if constexpr (is_func_scope_op<Op>) {
      return live_before<detail::tuple_element_t<0, kids>>(after, out);
    } else if constexpr (is_if_op<Op>) {
      return with_reads<detail::tuple_element_t<0, kids>>(live_before<detail::tuple_element_t<1, kids>>(after, out) |
                                                          live_before<detail::tuple_element_t<2, kids>>(after, out));
    } else if constexpr (is_loop_op<Op> || is_while_op<Op>) {
      // After the body comes the next iteration or the loop's end, so the
      // locals live after it are those live after the loop and those the
      // next iteration reads before it assigns them. Each statement's
      // transfer is "reads, plus what is live after it less what it
      // assigns", and so is the body's: walked from nothing live, it gives
      // exactly the reads before assignments, and a second walk from the
      // union marks the assignments (the fixed point, in two walks; a loop
      // nested d deep is walked 2^d times).
      // A while_'s condition runs after every iteration too.
      using Body = detail::tuple_element_t<sizeof...(K) - 1, kids>;
      liveness first_walk{};
      slot_set<N> around = after | live_before<Body>(slot_set<N>{}, first_walk);
      if constexpr (is_while_op<Op>) around = with_reads<detail::tuple_element_t<0, kids>>(around);
      slot_set<N> head = around | live_before<Body>(around, out);
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((head = with_reads<detail::tuple_element_t<Is, kids>>(head)), ...);
      }(std::make_index_sequence<sizeof...(K) - 1>{});
      return head;
    } else if constexpr (is_let_op<Op>) {
      slot_set<N> inner = live_before<detail::tuple_element_t<sizeof...(K) - 1, kids>>(after, out);
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((out.seen_inits.set(let_slots<Op>::slot[Is]),
          inner[let_slots<Op>::slot[Is]] ? out.live_inits.set(let_slots<Op>::slot[Is]) : void(),
          inner.bit[let_slots<Op>::slot[Is]] = false),
         ...);
        ((inner = with_reads<detail::tuple_element_t<Is, kids>>(inner)), ...);
      }(std::make_index_sequence<std::size_t(let_slots<Op>::count)>{});
      return inner;
    } else if constexpr (is_store_op<Op> || is_atomic_op<Op>) {
      return with_reads<detail::tuple_element_t<1, kids>>(with_reads<detail::tuple_element_t<0, kids>>(after));
    } else {  // nothing else reads a local
      return after;
    }
  }
  template <class St>
  static constexpr slot_set<N> live_impl(St const*, slot_set<N> after, liveness&) {
    return after;
  }
  static constexpr liveness compute_liveness() {
    liveness out{};
    live_before<Root>(slot_set<N>{}, out);
    return out;
  }
  static constexpr liveness live = compute_liveness();
  // Whether the whole assignment at Site, or the let-init of Slot, has a
  // value something reads (an assignment the walk did not reach counts).
  static constexpr bool assignment_read(int site) { return !live.seen_sites[site] || live.live_sites[site]; }
  static constexpr bool init_read(int slot) { return !live.seen_inits[slot] || live.live_inits[slot]; }

  // ---- what a statement assigns and declares ------------------------------------------------
  template <class S>
  static constexpr void assigned_declared(slot_set<N>& assigned, slot_set<N>& declared) {
    assigned_declared_impl(static_cast<S const*>(nullptr), assigned, declared);
  }
  template <class Op, class... K>
  static constexpr void assigned_declared_impl(node<Op, K...> const*, slot_set<N>& assigned, slot_set<N>& declared) {
    using kids = detail::tuple<K...>;
    if constexpr (is_assign_op<Op>) {
      assigned.set(eval::assigned_local<detail::tuple_element_t<0, kids>>::slot);
    } else if constexpr (is_let_op<Op>) {
      for (int k = 0; k < let_slots<Op>::count; ++k) declared.set(let_slots<Op>::slot[k]);
      assigned_declared<detail::tuple_element_t<sizeof...(K) - 1, kids>>(assigned, declared);
    } else if constexpr (is_statement_op<Op>) {
      (assigned_declared<K>(assigned, declared), ...);
    }
  }

  // The locals a loop body must restore at the start of each iteration in
  // reverse: needed, assigned inside the body, declared outside it.
  template <class Body>
  static constexpr slot_set<N> carried() {
    slot_set<N> assigned{}, declared{};
    assigned_declared<Body>(assigned, declared);
    return assigned.minus(declared) & needed;
  }
};

// ---- plain or atomic gradient accumulation ---------------------------------------------------
// An index expression `i + c` or `c + i` or `i - c`, with i the offload loop's
// index on `Axis` and c invariant over the offload, maps distinct iterations to
// distinct values.

template <class E, int Axis>
inline constexpr bool is_shift_of_index_v = false;
template <int Axis>
inline constexpr bool is_shift_of_index_v<node<op::loop_index<0, Axis>>, Axis> = true;
template <class C, int Axis>
inline constexpr bool is_shift_of_index_v<node<op::math<fn::add>, node<op::loop_index<0, Axis>>, C>, Axis> =
    ::ctg::analysis::invariant_v<C>;
template <class C, int Axis>
inline constexpr bool is_shift_of_index_v<node<op::math<fn::add>, C, node<op::loop_index<0, Axis>>>, Axis> =
    ::ctg::analysis::invariant_v<C>;
template <class C, int Axis>
inline constexpr bool is_shift_of_index_v<node<op::math<fn::sub>, node<op::loop_index<0, Axis>>, C>, Axis> =
    ::ctg::analysis::invariant_v<C>;

// Whether an access holds, for each offload axis a, the bare index i_a at
// some position: a read of the iteration's own element on those axes (the
// gather adjoint, ad/gather.hpp, replays all of them at once).
template <int Axis, class... Idx>
inline constexpr bool holds_bare_index_v = (std::is_same_v<Idx, node<op::loop_index<0, Axis>>> || ...);
template <int Axes, class Acc>
inline constexpr bool is_bare_tap_v = false;
template <int Axes, class Op, class... Idx>
inline constexpr bool is_bare_tap_v<Axes, node<Op, Idx...>> = []<int... As>(std::integer_sequence<int, As...>) {
  return (holds_bare_index_v<As, Idx...> && ...);
}(std::make_integer_sequence<int, Axes>{});

// Whether two accesses of one field have an index position where both
// indices are invariant and their values differ: then they never meet. (The
// adjoint's decisions to clear a store's gradient late, reverse.hpp, and to
// gather, gather.hpp.)
template <class W, class R, class Fr>
CTG_HOST_DEVICE bool differ_in_invariant_index(W const& w, R const& r, Fr& f) {
  static_assert(R::arity == W::arity);
  bool differs = false;
  [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
    auto axis = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
      using WE = std::remove_cvref_t<decltype(detail::get<K>(w.kids))>;
      using RE = std::remove_cvref_t<decltype(detail::get<K>(r.kids))>;
      if constexpr (::ctg::analysis::invariant_v<WE> && ::ctg::analysis::invariant_v<RE>)
        differs = differs ||
                  eval::forward::eval(detail::get<K>(w.kids), f) != eval::forward::eval(detail::get<K>(r.kids), f);
    };
    (axis(std::integral_constant<std::size_t, Ks>{}), ...);
    (void)axis;  // rank-0 fields have no axis
  }(std::make_index_sequence<W::arity>{});
  return differs;
}

// The c of a shift `i + c`, `c + i`, `i - c` or `i` (is_shift_of_index_v),
// evaluated in `host`, a frame that holds the launch's arguments.
template <class Fr, class Idx>
CTG_HOST_DEVICE long long index_shift(node<Idx> const&, Fr&) {
  return 0;
}
template <class Fr, class Op, class A, class B>
CTG_HOST_DEVICE long long index_shift(node<Op, A, B> const& e, Fr& host) {
  if constexpr (std::is_same_v<Op, op::math<fn::sub>>)
    return -(long long)eval::forward::eval(kid<1>(e), host);
  else if constexpr (is_loop_index_op<typename A::op_type>)
    return (long long)eval::forward::eval(kid<1>(e), host);
  else
    return (long long)eval::forward::eval(kid<0>(e), host);
}

// Every access node of a statement (any parameter, any buffer), in walk order.
template <class S>
struct all_accesses {
  using type = detail::type_list<>;
};
template <class Op, class... K>
struct all_accesses<node<Op, K...>> {
  using own = std::conditional_t<is_access_op<Op>, detail::type_list<node<Op, K...>>, detail::type_list<>>;
  using type = detail::concat_all_t<own, typename all_accesses<K>::type...>;
};
template <int I, class List>
struct accesses_with_param;
template <int I, class... A>
struct accesses_with_param<I, detail::type_list<A...>> {
  using type =
      detail::concat_all_t<std::conditional_t<A::op_type::param == I, detail::type_list<A>, detail::type_list<>>...>;
};

// Collects the index tuples under which field parameter I (any of its
// buffers) is touched in a statement, as a type list of node<access...>
// types: one walk of the statement, shared by all parameters (every
// buffer: a kernel that is not differentiated, ctg::forward_only or one
// launched on fields without gradients, may accumulate into x.grad() or
// x.dual() through an index of its own, and ownership must see it).
template <int I, class S>
struct accesses_of {
  using type = typename accesses_with_param<I, typename all_accesses<S>::type>::type;
};

// How many statements of S add into (+=, -=) an element of field parameter
// I's values, and how many write it in any way (=, +=, -=, min, max).
template <int I, class S>
struct accumulations_into : std::integral_constant<int, 0> {};
template <int I, class Op, class... K>
struct accumulations_into<I, node<Op, K...>> : std::integral_constant<int, (accumulations_into<I, K>::value + ... + 0)> {};
template <int I, atomic_kind A, class L, class E>
struct accumulations_into<I, node<op::atomic<A>, L, E>>
    : std::integral_constant<int, int((A == atomic_kind::add || A == atomic_kind::sub) &&
                                      written_access<L>::type::op_type::param == I &&
                                      written_access<L>::type::op_type::which == buffer::primal) +
                                      accumulations_into<I, E>::value> {};

template <int I, class S>
struct writes_into : std::integral_constant<int, 0> {};
template <int I, class Op, class... K>
struct writes_into<I, node<Op, K...>> : std::integral_constant<int, (writes_into<I, K>::value + ... + 0)> {};
template <int I, atomic_kind A, class L, class E>
struct writes_into<I, node<op::atomic<A>, L, E>>
    : std::integral_constant<int, int(written_access<L>::type::op_type::param == I) + writes_into<I, E>::value> {};
template <int I, class L, class E>
struct writes_into<I, node<op::store, L, E>>
    : std::integral_constant<int, int(written_access<L>::type::op_type::param == I) + writes_into<I, E>::value> {};

// The accesses of field parameter I's values that the statements of S
// write (=, +=, -=, min, max), and whether one of them is a store. Only
// statements are walked: after lowering no expression holds one.
template <int I, class S>
struct writes_of {
  using type = detail::type_list<>;
  static constexpr bool stores = false;
};
template <int I, class Op, class... K>
  requires(std::is_same_v<Op, op::block> || is_if_op<Op> || is_while_op<Op> || is_loop_op<Op> || is_let_op<Op> ||
           is_func_scope_op<Op>)
struct writes_of<I, node<Op, K...>> {
  using type = detail::concat_all_t<typename writes_of<I, K>::type...>;
  static constexpr bool stores = (writes_of<I, K>::stores || ...);
};
// One write, into `lhs` (a store when Store).
template <int I, class L, bool Store>
struct write_of {
  using A = typename written_access<L>::type;
  static constexpr bool mine = A::op_type::param == I && A::op_type::which == buffer::primal;
  using type = std::conditional_t<mine, detail::type_list<A>, detail::type_list<>>;
  static constexpr bool stores = Store && mine;
};
template <int I, class L, class E>
struct writes_of<I, node<op::store, L, E>> : write_of<I, L, true> {};
template <int I, atomic_kind K, class L, class E>
struct writes_of<I, node<op::atomic<K>, L, E>> : write_of<I, L, false> {};

// Whether an expression holds a number known only from the node's value
// (a literal, a scalar argument), not from its type.
template <class E>
inline constexpr bool holds_literal_v = false;
template <class T>
inline constexpr bool holds_literal_v<node<op::literal<T>>> = true;
template <class Op, class... K>
  requires(sizeof...(K) > 0)
inline constexpr bool holds_literal_v<node<Op, K...>> = (holds_literal_v<K> || ...);

// The index expressions of an access node, as a tuple type, and their count.
template <class Acc>
struct access_indices;
template <class Op, class... Idx>
struct access_indices<node<Op, Idx...>> {
  using type = detail::tuple<Idx...>;
  static constexpr int rank = int(sizeof...(Idx));
};

// Whether every access in the list uses, for each offload axis a, one common
// index position holding the same `i_a + c` expression.
template <int Axes, class List>
struct owns_slots;
template <int Axes>
struct owns_slots<Axes, detail::type_list<>> : std::true_type {};
template <int Axes, class First, class... Rest>
struct owns_slots<Axes, detail::type_list<First, Rest...>> {
  static constexpr int rank = access_indices<First>::rank;

  template <int Axis, int P>
  static constexpr bool position_works() {
    using E = detail::tuple_element_t<std::size_t(P), typename access_indices<First>::type>;
    if constexpr (!is_shift_of_index_v<E, Axis>)
      return false;
    else if constexpr (sizeof...(Rest) > 0 && holds_literal_v<E>)
      // i + 1 and i + 2 have one type: the numbers are values of the nodes,
      // so equal types do not make equal indices (banded_slots compares the
      // values at launch).
      return false;
    else
      return detail::all_of(
          {std::is_same_v<E, detail::tuple_element_t<std::size_t(P), typename access_indices<Rest>::type>>...});
  }
  template <int Axis>
  static constexpr bool axis_owned() {
    return [&]<int... Ps>(std::integer_sequence<int, Ps...>) {
      return (position_works<Axis, Ps>() || ...);
    }(std::make_integer_sequence<int, rank>{});
  }
  static constexpr bool value = [] {
    return [&]<int... As>(std::integer_sequence<int, As...>) {
      return (axis_owned<As>() && ...);
    }(std::make_integer_sequence<int, Axes>{});
  }();
};

// Whether every access in the list holds, for each offload axis a, a shift
// `i_a + c` of that axis's index at one common index position P_a, the c
// invariant over the offload but not necessarily the same in every access
// (u[i - 1], u[i], u[i + 1]). Two iterations p and q then touch a common
// element only if |p_a - q_a| is at most the spread of the c's at P_a on
// every axis: they are near each other. `position[a]` is P_a.
template <int Axes, class List>
struct banded_slots {
  static constexpr bool value = false;
};
template <int Axes, class First, class... Rest>
struct banded_slots<Axes, detail::type_list<First, Rest...>> {
  static constexpr int rank = access_indices<First>::rank;

  template <class Acc, int P, int Axis>
  static constexpr bool shift_at() {
    if constexpr (P >= access_indices<Acc>::rank)
      return false;
    else
      return is_shift_of_index_v<detail::tuple_element_t<std::size_t(P), typename access_indices<Acc>::type>, Axis>;
  }
  template <int P, int Axis>
  static constexpr bool shift_in_all() {
    return shift_at<First, P, Axis>() && detail::all_of({shift_at<Rest, P, Axis>()...});
  }
  template <int Axis>
  static constexpr int position_of() {
    int found = -1;
    [&]<int... Ps>(std::integer_sequence<int, Ps...>) {
      ((found < 0 && shift_in_all<Ps, Axis>() ? (found = Ps) : 0), ...);
    }(std::make_integer_sequence<int, rank>{});
    return found;
  }
  static constexpr std::array<int, std::size_t(Axes)> position = [] {
    std::array<int, std::size_t(Axes)> p{};
    [&]<int... As>(std::integer_sequence<int, As...>) { ((p[std::size_t(As)] = position_of<As>()), ...); }(
        std::make_integer_sequence<int, Axes>{});
    return p;
  }();
  static constexpr bool value = [] {
    for (int p : position)
      if (p < 0) return false;
    return true;
  }();
};

}  // namespace ctg::ad
