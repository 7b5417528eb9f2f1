// Stencil adjoints as gathers.
//
// In the plain reverse pass iteration i pushes the adjoint of each value it
// read into that value's gradient: a read at u(t, i + 1) adds into
// u.grad(t, i + 1), an element other iterations add into too (atomic on more
// than one thread near chunk edges, and a loop the compiler cannot vectorise
// since consecutive iterations add into overlapping elements). When every
// differentiable read is a shift of the loop index by an amount the same for
// every iteration (`i + c`, `i - c`, with c invariant), the map from
// iterations to the elements each read touches is a translation, and can be
// inverted: element j of the read `i + c` receives from iteration j - c only.
// So the adjoint runs over the elements instead of the iterations: for
// element j and each such read, it replays iteration j - c (when that
// iteration exists) with only that read accumulating. Every element then
// has one writer, no add is atomic, and consecutive elements are
// independent.
//
// The replays read the seeds (the gradients of the elements the stores
// wrote) of neighbouring iterations, so the stores' clearing of an
// iteration's seeds waits until every element that replays it is done: in
// a second sweep over the iterations, or, in a 1-D offload, right after the
// chunk of elements that alone replays it (cpu::run_offload). That needs the seeds and the gathered elements apart: a store of
// field u and a read of u must differ in an invariant index (u(t + 1, i)
// against u(t, i - 1)), checked once per launch; otherwise, or when the
// body holds loops or atomic accumulations, the launch runs the plain
// reverse pass. Each read is replayed from a whole iteration, so the
// adjoint recomputes a body once per differentiable read: the compiler
// keeps of each replay only what reaches its read (for a linear stencil, a
// seed times a coefficient).
#pragma once
#include <array>
#include <type_traits>
#include <utility>

#include "../analysis/invariance.hpp"
#include "activity.hpp"
#include "reverse.hpp"

namespace ctg::ad {

// Statements the gather cannot replay: a nested loop (its carried values
// would need the adstack once per replay) and an atomic accumulation (its
// element would take adds from several elements' replays).
template <class Op>
inline constexpr bool replayable_op = true;
template <loop_kind K, int L, int A, int S>
inline constexpr bool replayable_op<op::loop<K, L, A, S>> = false;
template <int S>
inline constexpr bool replayable_op<op::while_<S>> = false;
template <atomic_kind K>
inline constexpr bool replayable_op<op::atomic<K>> = false;

template <class N>
inline constexpr bool replayable_v = true;
template <class Op, class... K>
inline constexpr bool replayable_v<node<Op, K...>> = replayable_op<Op> && (replayable_v<K> && ...);

// Paths (kid indices from the body) to the reads that accumulate into a
// gradient: accesses of a field's values, with a gradient, active. A
// store's written element is not a read; index expressions are integers and
// carry no gradient.
template <class AN, class N, class Path = std::index_sequence<>>
struct gradient_reads {
  using type = detail::type_list<>;
};
template <class AN, class Op, class... K, std::size_t... P>
struct gradient_reads<AN, node<Op, K...>, std::index_sequence<P...>> {
  using N = node<Op, K...>;
  template <std::size_t... Is>
  static auto kids(std::index_sequence<Is...>)
      -> detail::concat_all<typename gradient_reads<AN, K, std::index_sequence<P..., Is>>::type...>;
  static auto below() {
    if constexpr (is_access_op<Op>)
      return detail::type_list<>{};
    else if constexpr (ir::is_store_op<Op>)
      return typename gradient_reads<AN, detail::tuple_element_t<1, detail::tuple<K...>>,
                                     std::index_sequence<P..., 1>>::type{};
    else
      return typename decltype(kids(std::index_sequence_for<K...>{}))::type{};
  }
  static constexpr bool own() {
    if constexpr (is_access_op<Op>)
      return Op::has_grad && Op::which == buffer::primal && AN::template is_active<N>;
    else
      return false;
  }
  using type = std::conditional_t<own(), detail::concat_t<detail::type_list<std::index_sequence<P...>>, decltype(below())>,
                                  decltype(below())>;
};

// Paths to the stores whose written element has a gradient (their seeds).
template <class N, class Path = std::index_sequence<>>
struct seeded_stores {
  using type = detail::type_list<>;
};
template <class Op, class... K, std::size_t... P>
struct seeded_stores<node<Op, K...>, std::index_sequence<P...>> {
  template <std::size_t... Is>
  static auto kids(std::index_sequence<Is...>)
      -> detail::concat_all<typename seeded_stores<K, std::index_sequence<P..., Is>>::type...>;
  using below = typename decltype(kids(std::index_sequence_for<K...>{}))::type;
  static constexpr bool own() {
    if constexpr (ir::is_store_op<Op>) {
      using W = typename written_access<detail::tuple_element_t<0, detail::tuple<K...>>>::type::op_type;
      return W::has_grad && W::which == buffer::primal;
    } else {
      return false;
    }
  }
  using type = std::conditional_t<own(), detail::concat_t<detail::type_list<std::index_sequence<P...>>, below>, below>;
};

// One read as a stencil tap: for each loop axis a, the index position that
// holds a shift `i_a + c` of it, every other index invariant.
template <int Axes, class Acc>
struct stencil_tap {
  using bands = banded_slots<Axes, detail::type_list<Acc>>;
  static constexpr int rank = access_indices<Acc>::rank;
  static constexpr std::array<int, std::size_t(Axes)> position = bands::position;
  static constexpr bool value = [] {
    if constexpr (!bands::value) {
      return false;
    } else {
      return []<std::size_t... Ps>(std::index_sequence<Ps...>) {
        auto invariant_or_shift = [](int p, bool invariant) {
          for (int a : position)
            if (a == p) return true;
          return invariant;
        };
        return (invariant_or_shift(
                    int(Ps),
                    ::ctg::analysis::invariant_v<detail::tuple_element_t<Ps, typename access_indices<Acc>::type>>) &&
                ...);
      }(std::make_index_sequence<std::size_t(rank)>{});
    }
  }();
};

// Per launch: each shifted read's shift on each loop axis (reach() and
// interior() derive the boxes of elements from them).
template <int Taps, int Axes>
struct gather_shifts {
  int shift[Taps > 0 ? Taps : 1][Axes > 0 ? Axes : 1];
};

// The reads of a list whose indices hold no bare loop index on every axis
// (is_bare_tap_v), or those that do.
template <class Body, int Axes, bool Bare, class List>
struct taps_where;
template <class Body, int Axes, bool Bare, class... Ps>
struct taps_where<Body, Axes, Bare, detail::type_list<Ps...>> {
  using type = typename detail::concat_all<std::conditional_t<is_bare_tap_v<Axes, node_at_t<Body, Ps>> == Bare,
                                                      detail::type_list<Ps>, detail::type_list<>>...>::type;
};

// The gather adjoint of one parallel offload's body; Policy is the plain
// reverse pass's, whose `owned` it overrides: every element has one writer.
// The reads of the iteration's own element are replayed together, each
// shifted read on its own: at most max_replays replays per element, or the
// plain reverse pass runs.
// BodyName: the body, or the name a plan gives it (ir::body_name_t).
template <class Analysis, class Policy, class BodyName, int Axes>
struct stencil_gather {
  using Body = ir::named_t<BodyName>;
  static constexpr int max_replays = 9;
  using reads = typename gradient_reads<Analysis, Body>::type;
  using shifted = typename taps_where<Body, Axes, false, reads>::type;
  static constexpr bool bare = taps_where<Body, Axes, true, reads>::type::size > 0;
  using stores = typename seeded_stores<Body>::type;
  static constexpr int taps = int(shifted::size);
  using shifts = gather_shifts<taps, Axes>;

  template <class Path>
  using tap_of = stencil_tap<Axes, node_at_t<Body, Path>>;

  // Reads of one field must place the loop axes at the same index
  // positions: then element j of that field has one tap position per
  // replay, and two elements never share a writer.
  template <class P, class Q>
  static constexpr bool aligned() {
    using A = node_at_t<Body, P>;
    using B = node_at_t<Body, Q>;
    if constexpr (A::op_type::param != B::op_type::param)
      return true;
    else
      return tap_of<P>::position == tap_of<Q>::position;
  }
  template <class... Ps>
  static constexpr bool shapes_fit(detail::type_list<Ps...>*) {
    if ((!tap_of<Ps>::value || ...)) return false;
    auto with_all = [&]<class P>(P*) { return (aligned<P, Ps>() && ...); };
    return (with_all(static_cast<Ps*>(nullptr)) && ...);
  }
  // Two stores into one field would read one seed that the plain pass
  // clears between them.
  template <class... Ss>
  static constexpr bool one_store_per_field(detail::type_list<Ss...>*) {
    int params[sizeof...(Ss) + 1] = {
        written_access<std::remove_cvref_t<decltype(kid<0>(std::declval<node_at_t<Body, Ss> const&>()))>>::type::
            op_type::param...};
    for (std::size_t a = 0; a < sizeof...(Ss); ++a)
      for (std::size_t b = a + 1; b < sizeof...(Ss); ++b)
        if (params[a] == params[b]) return false;
    return true;
  }
  static constexpr bool eligible = [] {
    if constexpr (Axes == 0 || !replayable_v<Body> || stores::size == 0 || taps == 0 ||
                  taps + 1 > max_replays)
      return false;
    else
      return shapes_fit(static_cast<reads*>(nullptr)) && one_store_per_field(static_cast<stores*>(nullptr));
  }();

  // Accumulates only into the reads being gathered (frame::gather_target,
  // gather_bare), always with plain adds, and leaves the seeds for the
  // clearing sweep.
  struct policy : Policy {
    template <int I>
    static constexpr bool owned = true;
    template <int I>
    static constexpr bool banded = false;
    static constexpr bool gathering = true;
  };
  using evaluator = reverse<Analysis, policy, false>;

  // ---- per launch, on the host --------------------------------------------------------------
  // The shifts of every tap, evaluated in `host` (a frame with the launch's
  // arguments), and whether no store's seed is an element some tap gathers
  // into: every store of a field and every read of it differ in an
  // invariant index.
  template <class Fr>
  static bool prepare(Body const& body, Fr& host, gather_shifts<taps, Axes>& s) {
    if constexpr (!eligible) {
      return false;
    } else {
      int k = 0;
      [&]<class... Ps>(detail::type_list<Ps...>*) {
        (shifts_of<Ps>(body, host, s.shift[k++]), ...);
      }(static_cast<shifted*>(nullptr));
      return [&]<class... Ss>(detail::type_list<Ss...>*) {
        return (apart_from_reads<Ss>(body, host) && ...);
      }(static_cast<stores*>(nullptr));
    }
  }

  // The box of elements the taps reach: [lo + min shift, hi + max shift) on
  // each axis (shift 0 for the reads of the iteration's own element).
  template <class Box>
  static Box reach(Box const& box, gather_shifts<taps, Axes> const& s) {
    Box r = box;
    for (int a = 0; a < Axes; ++a) {
      auto const [lo, hi] = spread(s, a);
      r.lo[a] = box.lo[a] + lo;
      r.hi[a] = box.hi[a] + hi;
    }
    return r;
  }
  // The elements every replay of which lies in `box`: [lo + max shift,
  // hi + min shift) on each axis (empty when the box is narrower than the
  // taps' spread).
  template <class Box>
  static Box interior(Box const& box, gather_shifts<taps, Axes> const& s) {
    Box r = box;
    for (int a = 0; a < Axes; ++a) {
      auto const [lo, hi] = spread(s, a);
      r.lo[a] = box.lo[a] + hi;
      r.hi[a] = box.hi[a] + lo > r.lo[a] ? box.hi[a] + lo : r.lo[a];
    }
    return r;
  }

  // ---- per element ------------------------------------------------------------------------
  // Element f.idx[0] (in the loop's coordinates) of every tap: replays
  // iteration idx - shift, when it lies in `box`, with only that tap
  // accumulating.
  // Checked = false: the caller knows every replay's iteration lies in
  // `box` (the element is in interior(box, ...)).
  template <bool Checked = true, class Fr, class Box>
  CTG_HOST_DEVICE static void gather_element(Body const& body, Fr& f, Box const& box) {
    int element[Axes];
    for (int a = 0; a < Axes; ++a) element[a] = f.idx[0][a];
    f.clearing = false;
    if constexpr (bare) {  // the element's own iteration, when it is one
      int const no_shift[Axes] = {};
      replay<Checked>(body, f, element, no_shift, box, nullptr, true);
    }
    [&]<class... Ps>(detail::type_list<Ps...>*) {
      (replay_tap<Checked, Ps>(body, f, element, box), ...);
    }(static_cast<shifted*>(nullptr));
  }
  // Iteration f.idx[0]: clears the seeds its stores wrote.
  template <class Fr>
  CTG_HOST_DEVICE static void clear_iteration(Body const& body, Fr& f) {
    f.clearing = true;
    f.gather_bare = false;
    f.gather_target = nullptr;
    evaluator::run_body(body, f);
  }

 private:
  // The tap's shift is evaluated here from the read's own index
  // expression, not taken from the launch's table: the replay then reads
  // element (element - c) + c, which the compiler folds back to `element`.
  template <bool Checked, class Path, class Fr, class Box>
  CTG_HOST_DEVICE static void replay_tap(Body const& body, Fr& f, int const* element, Box const& box) {
    int shift[Axes];
    shifts_of<Path>(body, f, shift);
    replay<Checked>(body, f, element, shift, box, &node_at<Path>::get(body), false);
  }
  // Iteration element - shift, when it lies in `box`, with only `target`
  // (or, `own`, the reads of the iteration's own element) accumulating.
  template <bool Checked, class Fr, class Box>
  CTG_HOST_DEVICE static void replay(Body const& body, Fr& f, int const* element, int const* shift, Box const& box,
                                     void const* target, bool own) {
    bool inside = true;
    for (int a = 0; a < Axes; ++a) {
      int const i = element[a] - shift[a];
      if constexpr (Checked) inside = inside && i >= box.lo[a] && i < box.hi[a];
      f.idx[0][a] = i;
    }
    if (inside) {
      f.gather_target = target;
      f.gather_bare = own;
      evaluator::run_body(body, f);
    }
    f.gather_bare = false;
  }

  struct shift_range {
    int lo, hi;
  };
  static shift_range spread(gather_shifts<taps, Axes> const& s, int a) {
    int lo = bare ? 0 : s.shift[0][a], hi = lo;
    for (int k = 0; k < taps; ++k) {
      lo = s.shift[k][a] < lo ? s.shift[k][a] : lo;
      hi = s.shift[k][a] > hi ? s.shift[k][a] : hi;
    }
    return {lo, hi};
  }

  template <class Path, class Fr>
  CTG_HOST_DEVICE static void shifts_of(Body const& body, Fr& host, int* out) {
    auto const& acc = node_at<Path>::get(body);
    [&]<int... As>(std::integer_sequence<int, As...>) {
      (shift_on_axis<Path, As>(acc, host, out), ...);
    }(std::make_integer_sequence<int, Axes>{});
  }
  template <class Path, int A, class Acc, class Fr>
  CTG_HOST_DEVICE static void shift_on_axis(Acc const& acc, Fr& host, int* out) {
    constexpr int p = tap_of<Path>::position[std::size_t(A)];
    out[A] = int(index_shift(detail::get<std::size_t(p)>(acc.kids), host));
  }

  template <class StorePath, class Fr>
  static bool apart_from_reads(Body const& body, Fr& host) {
    auto const& written = written_access_of(kid<0>(node_at<StorePath>::get(body)));
    return [&]<class... Ps>(detail::type_list<Ps...>*) {
      return (apart<Ps>(written, body, host) && ...);
    }(static_cast<reads*>(nullptr));
  }
  template <class ReadPath, class W, class Fr>
  static bool apart(W const& written, Body const& body, Fr& host) {
    if constexpr (node_at_t<Body, ReadPath>::op_type::param != W::op_type::param)
      return true;
    else
      return differ_in_invariant_index(written, node_at<ReadPath>::get(body), host);
  }
};

// What a plan without a gather adjoint holds in its place.
struct no_stencil_gather {
  static constexpr bool eligible = false;
  using shifts = gather_shifts<0, 1>;
};

// A reverse frame with what the gather sweeps set: the read that
// accumulates (by address in the body) or the reads of the iteration's own
// element, and whether the sweep clears seeds.
template <class Base>
struct gather_frame : Base {
  void const* gather_target = nullptr;
  bool gather_bare = false;
  bool clearing = false;
};

}  // namespace ctg::ad
