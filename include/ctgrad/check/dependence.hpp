// Whether two field accesses can touch the same element: exact reasoning on
// affine index expressions over the ranges of the loops around them.
//
// An index is turned into an affine form: a constant plus integer multiples
// of loop indices (a loop index is named by its level and axis). Two accesses
// meet when, for every axis of the field, the two forms take the same value
// for some values of their loop indices inside their ranges, under relations
// between the indices of loops the two accesses share (the same iteration of
// the offload loop, a later iteration of a nested loop, a different iteration
// of the offload loop). For each axis that equation is tested with the GCD
// test (integer solutions exist) and the bounds test (the value is reachable
// over the ranges, with the relations folded in, as in Banerjee's test);
// either proves that no element is shared. Indices that are not affine (a
// local, a value read from a field the kernel writes, a product of indices)
// prove nothing.
//
// The same constexpr code runs on the types alone (only compile-time
// constants known), on an IR built in a constant expression (plain numbers
// known), and at launch (extents, scalar arguments and field contents known).
#pragma once
#include <type_traits>
#include <utility>

#include "../analysis/intervals.hpp"
#include "../ir/node.hpp"

namespace ctg::check {

using analysis::interval;

// ---- affine forms ---------------------------------------------------------------------------------
inline constexpr int max_levels = 16;  // loop levels the reasoning distinguishes
inline constexpr int max_axes = 8;

struct affine_form {
  static constexpr int capacity = 8;
  bool linear = true;  // false: not an affine function of loop indices
  bool known = true;   // every coefficient and the constant are known numbers
  long long constant = 0;
  int count = 0;
  int level[capacity] = {};
  int axis[capacity] = {};
  long long coeff[capacity] = {};

  static constexpr affine_form number(long long v) {
    affine_form f;
    f.constant = v;
    return f;
  }
  static constexpr affine_form unknown_number() {
    affine_form f;
    f.known = false;
    return f;
  }
  static constexpr affine_form opaque() {
    affine_form f;
    f.linear = false;
    f.known = false;
    return f;
  }
  static constexpr affine_form index(int l, int a) {
    affine_form f;
    f.add(l, a, 1);
    return f;
  }
  // A loop-invariant value: a number, known or not.
  constexpr bool invariant() const { return linear && count == 0; }
  constexpr bool exact() const { return linear && known; }
  constexpr long long coefficient(int l, int a) const {
    for (int k = 0; k < count; ++k)
      if (level[k] == l && axis[k] == a) return coeff[k];
    return 0;
  }
  constexpr void add(int l, int a, long long c) {
    if (!linear || c == 0) return;
    if (l < 0 || l >= max_levels || a < 0 || a >= max_axes) {
      *this = opaque();
      return;
    }
    for (int k = 0; k < count; ++k)
      if (level[k] == l && axis[k] == a) {
        coeff[k] += c;
        if (coeff[k] == 0) {  // drop the term
          for (int q = k; q + 1 < count; ++q) level[q] = level[q + 1], axis[q] = axis[q + 1], coeff[q] = coeff[q + 1];
          --count;
        }
        return;
      }
    if (count == capacity) {
      *this = opaque();
      return;
    }
    level[count] = l, axis[count] = a, coeff[count] = c, ++count;
  }
};

constexpr affine_form scaled(affine_form f, long long k) {
  if (!f.linear) return f;
  affine_form r;
  r.known = f.known;
  r.constant = f.constant * k;
  for (int q = 0; q < f.count; ++q) r.add(f.level[q], f.axis[q], f.coeff[q] * k);
  return r;
}
constexpr affine_form sum(affine_form a, affine_form const& b) {
  if (!a.linear || !b.linear) return affine_form::opaque();
  a.known = a.known && b.known;
  a.constant += b.constant;
  for (int q = 0; q < b.count && a.linear; ++q) a.add(b.level[q], b.axis[q], b.coeff[q]);
  return a;
}
constexpr affine_form product(affine_form const& a, affine_form const& b) {
  if (!a.linear || !b.linear) return affine_form::opaque();
  if (a.invariant() && a.known) return scaled(b, a.constant);
  if (b.invariant() && b.known) return scaled(a, b.constant);
  if (a.invariant() && b.invariant()) return affine_form::unknown_number();
  if (a.invariant() || b.invariant()) {  // an unknown factor: affine, coefficients unknown
    affine_form r = a.invariant() ? b : a;
    r.known = false;
    return r;
  }
  return affine_form::opaque();
}

using ir::param_bit;

// The affine form of an index expression. Fields whose bit is set in
// `unstable` are written by the kernel: what they hold is not a constant.
template <class Args>
struct form_eval {
  Args const* args = nullptr;
  unsigned long long unstable = 0;

  template <class E>
  constexpr affine_form operator()(E const* e) const {
    return eval(e);
  }

  template <class T>
  constexpr affine_form eval(ir::node<ir::op::literal<T>> const* e) const {
    if constexpr (std::is_integral_v<T>)
      return e ? affine_form::number((long long)e->op.value) : affine_form::unknown_number();
    else
      return affine_form::opaque();
  }
  template <long long V>
  constexpr affine_form eval(ir::node<ir::op::constant<V>> const*) const {
    return affine_form::number(V);
  }
  template <int I, int A>
  constexpr affine_form eval(ir::node<ir::op::extent<I, A>> const*) const {
    return args ? affine_form::number(detail::get<I>(*args).extent[A]) : affine_form::unknown_number();
  }
  template <int L, int A>
  constexpr affine_form eval(ir::node<ir::op::loop_index<L, A>> const*) const {
    return affine_form::index(L, A);
  }
  template <class N, class K>
  constexpr affine_form eval(ir::node<ir::op::func_scope<N>, K> const* e) const {
    return eval(analysis::kid_ptr<0>(e));
  }
  template <class T, class K>
  constexpr affine_form eval(ir::node<ir::op::cast<T>, K> const* e) const {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<ir::value_t<K>> && sizeof(T) >= sizeof(int))
      return eval(analysis::kid_ptr<0>(e));
    else
      return affine_form::opaque();
  }
  // An element of an integer field the kernel never writes, at constant
  // indices: one number for the whole launch.
  template <int I, class T, int R, bool G, bool D, ir::buffer B, class... Idx>
  constexpr affine_form eval(ir::node<ir::op::access<I, T, R, G, D, B>, Idx...> const* e) const {
    if constexpr (!std::is_integral_v<T> || B != ir::buffer::primal) {
      return affine_form::opaque();
    } else {
      if ((unstable & param_bit(I)) != 0) return affine_form::opaque();
      affine_form at[R > 0 ? R : 1];
      bool known = true;
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((at[Is] = eval(analysis::kid_ptr<Is>(e))), ...);
      }(std::index_sequence_for<Idx...>{});
      for (int a = 0; a < R; ++a) {
        if (!at[a].invariant()) return affine_form::opaque();
        known = known && at[a].known;
      }
      if (!known || args == nullptr) return affine_form::unknown_number();
      auto const& view = detail::get<I>(*args);
      long long off = 0;
      for (int a = 0; a < R; ++a) {
        if (at[a].constant < 0 || at[a].constant >= view.extent[a]) return affine_form::opaque();
        off = off * view.extent[a] + at[a].constant;
      }
      return affine_form::number((long long)view.data[off]);
    }
  }
  template <class Fn, class... K>
  constexpr affine_form eval(ir::node<ir::op::math<Fn>, K...> const* e) const {
    namespace fn = ir::fn;
    if constexpr (!std::is_integral_v<ir::value_t<ir::node<ir::op::math<Fn>, K...>>>) {
      return affine_form::opaque();
    } else if constexpr (std::is_same_v<Fn, fn::neg>) {
      return scaled(eval(analysis::kid_ptr<0>(e)), -1);
    } else if constexpr (std::is_same_v<Fn, fn::add>) {
      return sum(eval(analysis::kid_ptr<0>(e)), eval(analysis::kid_ptr<1>(e)));
    } else if constexpr (std::is_same_v<Fn, fn::sub>) {
      return sum(eval(analysis::kid_ptr<0>(e)), scaled(eval(analysis::kid_ptr<1>(e)), -1));
    } else if constexpr (std::is_same_v<Fn, fn::mul>) {
      return product(eval(analysis::kid_ptr<0>(e)), eval(analysis::kid_ptr<1>(e)));
    } else if constexpr (detail::one_of<Fn, fn::div, fn::mod, fn::min, fn::max>) {
      affine_form const a = eval(analysis::kid_ptr<0>(e)), b = eval(analysis::kid_ptr<1>(e));
      if (!a.invariant() || !b.invariant()) return affine_form::opaque();
      if (!a.known || !b.known) return affine_form::unknown_number();
      if constexpr (std::is_same_v<Fn, fn::min>) return affine_form::number(a.constant < b.constant ? a.constant : b.constant);
      if constexpr (std::is_same_v<Fn, fn::max>) return affine_form::number(a.constant > b.constant ? a.constant : b.constant);
      if (b.constant == 0) return affine_form::opaque();
      if constexpr (std::is_same_v<Fn, fn::div>) return affine_form::number(a.constant / b.constant);
      return affine_form::number(a.constant % b.constant);
    } else {
      return affine_form::opaque();
    }
  }
  template <class E>
  constexpr affine_form eval(E const*) const {
    return affine_form::opaque();  // locals, selects, anything else
  }
};

// ---- the loop indices around one access --------------------------------------------------------------
// One end of a range of integers; an unknown end is unbounded.
struct bound {
  long long v = 0;
  bool known = false;
};
// The indices of the loops around an access: for each level and axis, the
// range its index takes (inclusive, a hull over the enclosing iterations),
// and the same ranges as intervals for evaluating the bounds of inner loops.
struct access_space {
  analysis::index_ranges<max_levels, max_axes> env;
  bound lo[max_levels][max_axes] = {};
  bound hi[max_levels][max_axes] = {};
  bool in_scope[max_levels][max_axes] = {};
  // One more than the deepest level entered: the levels from here on are
  // neither in scope nor known, so the walks over them stop here.
  int levels = 0;
};

// The index ranges of one loop node (its bounds over the ranges around it).
template <class Loop, class Ev>
constexpr void enter_loop(Loop const* n, Ev const& ev, access_space& space) {
  using Op = typename Loop::op_type;
  constexpr int A = Op::axes;
  interval lo[A], hi[A];
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    ((lo[Is] = ev(analysis::kid_ptr<Is>(n), space.env)), ...);
    ((hi[Is] = ev(analysis::kid_ptr<A + Is>(n), space.env)), ...);
  }(std::make_index_sequence<A>{});
  for (int a = 0; a < A; ++a) {
    if (Op::level >= max_levels || a >= max_axes) continue;
    int const l = Op::level;
    space.env.idx[l][a] = lo[a].known && hi[a].known ? interval{lo[a].lo, hi[a].hi - 1, true} : interval::unknown();
    space.lo[l][a] = {lo[a].lo, lo[a].known};
    space.hi[l][a] = {hi[a].hi - 1, hi[a].known};
    space.in_scope[l][a] = true;
    if (l + 1 > space.levels) space.levels = l + 1;
  }
}

// Enters the loops around an access (their paths from `root`, outermost
// first: an event's loop_paths).
template <class Root, class LoopPaths>
struct loops_around;
template <class Root, class... P>
struct loops_around<Root, detail::type_list<P...>> {
  template <class Ev>
  static constexpr void enter([[maybe_unused]] Root const* root, Ev const& ev, access_space& space) {
    (enter_loop(root ? &ir::node_at<P>::get(*root) : static_cast<ir::node_at_t<Root, P> const*>(nullptr), ev, space),
     ...);
  }
};

// ---- relations between the indices of the two accesses ---------------------------------------------
// How the first access's index of a loop relates to the second's: unrelated
// (different loops, or any iteration), the same iteration, an earlier or a
// later one.
enum class relation : unsigned char { any, same, before, after };

struct relations {
  relation r[max_levels][max_axes] = {};
};

// ---- the test of one equation ------------------------------------------------------------------------
// An extended integer for the bounds test: -inf, a number, or +inf.
struct ext {
  long long v = 0;
  int inf = 0;  // -1: minus infinity, +1: plus infinity
};
constexpr ext add_ext(ext a, ext b) {
  if (a.inf != 0) return a;
  if (b.inf != 0) return b;
  return {a.v + b.v, 0};
}
constexpr ext times_bound(long long c, bound b, int sign_if_unknown) {
  // c * b, where an unknown end stands for sign_if_unknown * infinity.
  if (c == 0) return {0, 0};
  if (!b.known) return {0, (c > 0 ? 1 : -1) * sign_if_unknown};
  return {c * b.v, 0};
}

// [lo, hi] of c * x for x in [l, h] (unknown ends unbounded).
struct ext_range {
  ext lo, hi;
};
constexpr ext_range linear_range(long long c, bound l, bound h) {
  if (c == 0) return {{0, 0}, {0, 0}};
  if (c > 0) return {times_bound(c, l, -1), times_bound(c, h, 1)};
  return {times_bound(c, h, 1), times_bound(c, l, -1)};
}
constexpr ext_range join_sum(ext_range a, ext_range b) { return {add_ext(a.lo, b.lo), add_ext(a.hi, b.hi)}; }

// [lo, hi] of p * x + q * d over x >= l, x + d <= h, d >= 1 (the pairs of
// distinct iterations of one loop, d the distance). Empty when h - l < 1.
constexpr ext_range distance_range(long long p, long long q, bound l, bound h) {
  auto at = [&](long long x, long long d) { return ext{p * x + q * d, 0}; };
  auto pick = [](ext const* v, int n, bool lowest) {
    ext best = v[0];
    for (int k = 1; k < n; ++k)
      if (lowest ? v[k].v < best.v : v[k].v > best.v) best = v[k];
    return best;
  };
  ext const minus{0, -1}, plus{0, 1};
  if (l.known && h.known) {
    ext const v[3] = {at(l.v, 1), at(h.v - 1, 1), at(l.v, h.v - l.v)};
    return {pick(v, 3, true), pick(v, 3, false)};
  }
  if (l.known) {  // cone from (l, 1) along (1, 0) and (0, 1)
    ext const v = at(l.v, 1);
    return {p >= 0 && q >= 0 ? v : minus, p <= 0 && q <= 0 ? v : plus};
  }
  if (h.known) {  // cone from (h - 1, 1) along (-1, 0) and (-1, 1)
    ext const v = at(h.v - 1, 1);
    return {-p >= 0 && q - p >= 0 ? v : minus, -p <= 0 && q - p <= 0 ? v : plus};
  }
  if (p != 0) return {minus, plus};
  if (q > 0) return {{q, 0}, plus};
  if (q < 0) return {minus, {q, 0}};
  return {{0, 0}, {0, 0}};
}

constexpr long long gcd_of(long long a, long long b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) {
    long long const t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Whether fa(x) == fb(y) can hold for the indices of the two accesses under
// the relations; false proves it cannot. Both forms must be exact.
// (GCC 12 with the sanitizers, at -O1, warns that the level and axis read
// from a form may be uninitialized when the pair comes from a kernel of
// rank-3 shifted accesses; every array of a form is initialized.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
constexpr bool may_equal(affine_form const& fa, affine_form const& fb, access_space const& sa,
                         access_space const& sb, relations const& rel) {
  long long const target = fb.constant - fa.constant;  // sum(a x) - sum(b y) == target
  ext_range total{{0, 0}, {0, 0}};
  long long g = 0;
  bool seen[max_levels][max_axes] = {};
  auto one = [&](int l, int a) {
    if (seen[l][a]) return;
    seen[l][a] = true;
    long long const c = fa.coefficient(l, a), d = fb.coefficient(l, a);
    relation const r = rel.r[l][a];
    if (r == relation::any) {
      total = join_sum(total, linear_range(c, sa.lo[l][a], sa.hi[l][a]));
      total = join_sum(total, linear_range(-d, sb.lo[l][a], sb.hi[l][a]));
      g = gcd_of(gcd_of(g, c), d);
    } else if (r == relation::same) {  // x == y
      bound const lo = sa.lo[l][a].known ? sa.lo[l][a] : sb.lo[l][a];
      bound const hi = sa.hi[l][a].known ? sa.hi[l][a] : sb.hi[l][a];
      total = join_sum(total, linear_range(c - d, lo, hi));
      g = gcd_of(g, c - d);
    } else if (r == relation::before) {  // y = x + dist: (c - d) x - d dist
      total = join_sum(total, distance_range(c - d, -d, sa.lo[l][a], sa.hi[l][a]));
      g = gcd_of(gcd_of(g, c - d), d);
    } else {  // after: x = y + dist: (c - d) y + c dist
      total = join_sum(total, distance_range(c - d, c, sb.lo[l][a], sb.hi[l][a]));
      g = gcd_of(gcd_of(g, c - d), c);
    }
  };
  for (int k = 0; k < fa.count; ++k) one(fa.level[k], fa.axis[k]);
  for (int k = 0; k < fb.count; ++k) one(fb.level[k], fb.axis[k]);
  if (g == 0) {
    if (target != 0) return false;
  } else if (target % g != 0) {
    return false;
  }
  if (total.lo.inf == 0 && target < total.lo.v) return false;
  if (total.hi.inf == 0 && target > total.hi.v) return false;
  if (total.lo.inf > 0 || total.hi.inf < 0) return false;
  return true;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Whether the relations can hold at all for the loops they constrain (two
// distinct iterations need a range of two or more).
constexpr bool relations_possible(access_space const& sa, relations const& rel) {
  for (int l = 0; l < sa.levels; ++l)
    for (int a = 0; a < max_axes; ++a) {
      relation const r = rel.r[l][a];
      if (r == relation::before || r == relation::after)
        if (sa.lo[l][a].known && sa.hi[l][a].known && sa.hi[l][a].v - sa.lo[l][a].v < 1) return false;
    }
  return true;
}

// Whether an access never runs: a loop around it has a known empty range.
constexpr bool never_runs(access_space const& s) {
  for (int l = 0; l < s.levels; ++l)
    for (int a = 0; a < max_axes; ++a)
      if (s.in_scope[l][a] && s.lo[l][a].known && s.hi[l][a].known && s.hi[l][a].v < s.lo[l][a].v) return true;
  return false;
}

// Whether the reasoning about an access used an unknown: a non-exact index
// or an unknown end of the range of an index it uses.
constexpr bool uses_unknowns(affine_form const* f, int rank, access_space const& s) {
  for (int k = 0; k < rank; ++k) {
    if (!f[k].exact()) return true;
    for (int q = 0; q < f[k].count; ++q)
      if (!s.lo[f[k].level[q]][f[k].axis[q]].known || !s.hi[f[k].level[q]][f[k].axis[q]].known) return true;
  }
  return false;
}

// Whether a relation constrains a loop whose range is not known.
constexpr bool relation_unknown(access_space const& sa, relations const& rel) {
  for (int l = 0; l < max_levels; ++l)
    for (int a = 0; a < max_axes; ++a)
      if (rel.r[l][a] == relation::before || rel.r[l][a] == relation::after)
        if (!sa.lo[l][a].known || !sa.hi[l][a].known) return true;
  return false;
}

// The outcome for a pair of accesses over a set of cases (each a set of
// relations; the pair meets if it meets in one case).
struct meeting {
  bool disjoint = false;  // proven: no element is touched by both
  bool unknowns = false;  // the proof failed on something not known here
};

constexpr meeting may_meet(affine_form const* fa, affine_form const* fb, int rank, access_space const& sa,
                           access_space const& sb, relations const* cases, int ncases) {
  meeting m;
  if (never_runs(sa) || never_runs(sb)) {
    m.disjoint = true;
    return m;
  }
  for (int c = 0; c < ncases; ++c) {
    if (!relations_possible(sa, cases[c])) continue;
    bool meets = true;
    for (int k = 0; k < rank && meets; ++k)
      if (fa[k].exact() && fb[k].exact() && !may_equal(fa[k], fb[k], sa, sb, cases[c])) meets = false;
    if (meets) {
      m.unknowns = uses_unknowns(fa, rank, sa) || uses_unknowns(fb, rank, sb) || relation_unknown(sa, cases[c]);
      return m;
    }
  }
  m.disjoint = true;
  return m;
}

// ---- guards: a branch taken by one residue class of iterations ---------------------------------------
// An if_ whose condition is `g % m == r`, g an affine form of the loop
// indices, m a number and r the same for the whole launch (a number, a
// scalar argument): a red-black sweep's `(i + j) % 2 == color`. Two
// iterations that both take it have g values congruent modulo m.
struct congruence {
  bool found = false;  // the condition has that shape
  bool known = true;   // g's coefficients and m are known numbers
  affine_form g;
  long long m = 0;
};

template <class Args>
struct guard_eval {
  form_eval<Args> forms;

  template <class C>
  constexpr congruence operator()(C const* c) const {
    return of(c);
  }
  template <class L, class R>
  constexpr congruence of(ir::node<ir::op::math<ir::fn::eq>, L, R> const* c) const {
    congruence k = residue_class(analysis::kid_ptr<0>(c), analysis::kid_ptr<1>(c));
    return k.found ? k : residue_class(analysis::kid_ptr<1>(c), analysis::kid_ptr<0>(c));
  }
  // Either side of an `&&` that is such a condition holds too.
  template <class L, class R>
  constexpr congruence of(ir::node<ir::op::math<ir::fn::logical_and>, L, R> const* c) const {
    congruence k = of(analysis::kid_ptr<0>(c));
    return k.found ? k : of(analysis::kid_ptr<1>(c));
  }
  template <class C>
  constexpr congruence of(C const*) const {
    return {};
  }

  // Signed arithmetic only: an unsigned g that wraps around is no longer
  // congruent to its affine form (cast<unsigned>(i) - 1 is 2^32 - 1 at 0).
  template <class G, class M, class R>
  constexpr congruence residue_class(ir::node<ir::op::math<ir::fn::mod>, G, M> const* mod, R const* r) const {
    if constexpr (!std::is_signed_v<ir::value_t<ir::node<ir::op::math<ir::fn::mod>, G, M>>>) return {};
    affine_form const residue = forms(r);
    if (!residue.invariant()) return {};
    affine_form const g = forms(analysis::kid_ptr<0>(mod)), m = forms(analysis::kid_ptr<1>(mod));
    if (!g.linear || !m.invariant()) return {};
    congruence k;
    k.found = true;
    k.known = g.known && m.known;
    k.g = g;
    k.m = m.constant < 0 ? -m.constant : m.constant;
    return k;
  }
  template <class E, class R>
  constexpr congruence residue_class(E const*, R const*) const {
    return {};
  }
};

// Whether two accesses that both run under one guard `g % m == r` can touch
// one element, decided from the guard: 1 proven apart, 0 not proven, -1 not
// known here (numbers known only at launch). Where the indices pin each
// loop index g uses (an axis indexed by c * index + constant in both, so
// the two iterations' indices differ by a known amount), g differs between
// the two iterations by a known D; both take the guard only if m divides D.
constexpr int guard_apart(congruence const& k, affine_form const* fa, affine_form const* fb, int rank) {
  if (!k.found) return 0;
  if (!k.known) return -1;
  if (k.m < 2) return 0;
  long long difference = 0;
  bool unknown = false;
  for (int t = 0; t < k.g.count; ++t) {
    bool pinned = false;
    for (int a = 0; a < rank && !pinned; ++a) {
      affine_form const& x = fa[a];
      affine_form const& y = fb[a];
      if (!x.linear || !y.linear) continue;
      if (!x.known || !y.known) {
        unknown = true;
        continue;
      }
      if (x.count != 1 || y.count != 1 || x.level[0] != k.g.level[t] || x.axis[0] != k.g.axis[t] ||
          y.level[0] != x.level[0] || y.axis[0] != x.axis[0] || y.coeff[0] != x.coeff[0])
        continue;
      long long const shift = y.constant - x.constant;  // c (x_index - y_index) on this axis
      if (shift % x.coeff[0] != 0) return 1;            // no two indices give one element
      difference += k.g.coeff[t] * (shift / x.coeff[0]);
      pinned = true;
    }
    if (!pinned) return unknown ? -1 : 0;
  }
  return difference % k.m != 0 ? 1 : 0;
}

}  // namespace ctg::check
