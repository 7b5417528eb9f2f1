// The range of an integer expression over the iterations of the loops around
// it: what a loop index can be, what a loop bound can evaluate to. Used to
// size the adstack at launch and to decide, in the checks, whether two field
// accesses can touch the same element.
//
// The evaluator works on node pointers so that it runs in three settings with
// one definition: at compile time on the types alone (null pointers: only
// compile-time constants are known), at compile time on an IR built in a
// constant expression (plain numbers known too), and at launch on the real IR
// and arguments (field extents and field contents known as well).
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "../detail/meta.hpp"
#include "../ir/math.hpp"
#include "../ir/node.hpp"

namespace ctg::analysis {

// A closed range [lo, hi] of integers; `known` false when nothing is known.
struct interval {
  long long lo = 0;
  long long hi = 0;
  bool known = false;
  static constexpr interval exact(long long v) { return {v, v, true}; }
  static constexpr interval unknown() { return {0, 0, false}; }
  constexpr bool empty() const { return known && hi < lo; }
};

// The ranges of the enclosing loop indices, by level and axis.
template <int Levels, int Axes>
struct index_ranges {
  interval idx[Levels > 0 ? Levels : 1][Axes > 0 ? Axes : 1];
};

// The kid I of a node pointer (null stays null).
template <std::size_t I, class N>
constexpr auto const* kid_ptr(N const* n) {
  using K = std::remove_cvref_t<decltype(detail::get<I>(std::declval<N const&>().kids))>;
  return n ? &detail::get<I>(n->kids) : static_cast<K const*>(nullptr);
}

constexpr long long min_of(long long a, long long b) { return a < b ? a : b; }
constexpr long long max_of(long long a, long long b) { return a > b ? a : b; }
constexpr long long abs_of(long long a) { return a < 0 ? -a : a; }

// The range of an integer of type T as long longs (an unsigned 64-bit
// type's ends at LLONG_MAX: a range beyond it is unknown).
template <class T>
constexpr interval range_of_type() {
  using limits = std::numeric_limits<T>;
  if constexpr (std::is_same_v<T, bool>)
    return {0, 1, true};
  else if constexpr (sizeof(T) < sizeof(long long) || std::is_signed_v<T>)
    return {(long long)limits::min(), (long long)limits::max(), true};
  else
    return {0, std::numeric_limits<long long>::max(), true};
}
// What a value in `v` holds once it is an integer of type T: itself where T
// holds every value of the range; else what C++'s conversion makes of it (a
// cast to a narrower or unsigned type, or arithmetic that overflowed wraps
// modulo 2^bits): the wrapped range where the ends wrap alike, any value of
// T where they do not. Exact values stay exact.
template <class T>
constexpr interval as_type(interval v) {
  if (!v.known) return v;
  if constexpr (std::is_same_v<T, bool>) {
    if (v.lo > 0 || v.hi < 0) return interval::exact(1);
    return v.lo == 0 && v.hi == 0 ? interval::exact(0) : interval{0, 1, true};
  } else {
    constexpr interval whole = range_of_type<T>();
    if (v.lo >= whole.lo && v.hi <= whole.hi) return v;
    if constexpr (sizeof(T) < sizeof(long long)) {
      long long const lo = (long long)T(v.lo), hi = (long long)T(v.hi);
      bool const one_turn = (unsigned long long)v.hi - (unsigned long long)v.lo < (1ULL << (8 * sizeof(T)));
      return one_turn && lo <= hi ? interval{lo, hi, true} : whole;
    } else {
      return interval::unknown();  // an unsigned 64-bit value above LLONG_MAX
    }
  }
}
// The integer operations whose range the evaluator below works out.
template <class Fn>
inline constexpr bool bounded_fn_v = detail::one_of<Fn, ir::fn::add, ir::fn::sub, ir::fn::mul, ir::fn::min, ir::fn::max,
                                                    ir::fn::neg, ir::fn::div, ir::fn::mod, ir::fn::abs, ir::fn::shr,
                                                    ir::fn::shl, ir::fn::bit_and>;
// The range of a / b over a's and b's ranges, b != 0 (C++ rounds towards
// zero, so the quotient is monotone in each operand on either side of 0).
constexpr interval quotient(interval a, interval b) {
  interval out{0, 0, false};
  auto join = [&](long long lo, long long hi) {
    if (lo > hi) return;
    long long const c[4] = {a.lo / lo, a.lo / hi, a.hi / lo, a.hi / hi};
    interval const q{min_of(min_of(c[0], c[1]), min_of(c[2], c[3])), max_of(max_of(c[0], c[1]), max_of(c[2], c[3])),
                     true};
    out = out.known ? interval{min_of(out.lo, q.lo), max_of(out.hi, q.hi), true} : q;
  };
  join(b.lo, min_of(b.hi, -1));
  join(max_of(b.lo, 1), b.hi);
  return out;
}

// Args: the bound field views (null when unknown). Fields whose parameter bit
// is set in `unstable` may change while the kernel runs (it writes them), so
// their contents are not read.
template <class Args>
struct interval_eval {
  Args const* args = nullptr;
  unsigned long long unstable = 0;

  template <class E, class Env>
  constexpr interval operator()(E const* e, Env const& env) const {
    return eval(e, env);
  }

  template <class T, class Env>
  constexpr interval eval(ir::node<ir::op::literal<T>> const* e, Env const&) const {
    if constexpr (std::is_integral_v<T>)
      return e ? interval::exact((long long)e->op.value) : interval::unknown();
    else
      return interval::unknown();
  }
  template <long long V, class Env>
  constexpr interval eval(ir::node<ir::op::constant<V>> const*, Env const&) const {
    return interval::exact(V);
  }
  template <int I, int A, class Env>
  constexpr interval eval(ir::node<ir::op::extent<I, A>> const*, Env const&) const {
    return args ? interval::exact(detail::get<I>(*args).extent[A]) : interval::unknown();
  }
  template <int L, int A, class Env>
  constexpr interval eval(ir::node<ir::op::loop_index<L, A>> const*, Env const& env) const {
    return env.idx[L][A];
  }
  template <class N, class K, class Env>
  constexpr interval eval(ir::node<ir::op::func_scope<N>, K> const* e, Env const& env) const {
    return eval(kid_ptr<0>(e), env);
  }
  template <class T, class K, class Env>
  constexpr interval eval(ir::node<ir::op::cast<T>, K> const* e, Env const& env) const {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<ir::value_t<K>>)
      return as_type<T>(eval(kid_ptr<0>(e), env));
    else
      return interval::unknown();
  }
  // The extremes of an integer field over the box its indices can reach
  // (host memory: the launcher gives device fields as host copies).
  template <int I, class T, int R, bool G, bool D, ir::buffer B, class... Idx, class Env>
  constexpr interval eval(ir::node<ir::op::access<I, T, R, G, D, B>, Idx...> const* e, Env const& env) const {
    if constexpr (!std::is_integral_v<T> || B != ir::buffer::primal) {
      return interval::unknown();
    } else {
      if (args == nullptr || (unstable & ir::param_bit(I)) != 0) return interval::unknown();
      auto const& view = detail::get<I>(*args);
      interval box[R > 0 ? R : 1];
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((box[Is] = eval(kid_ptr<Is>(e), env)), ...);
      }(std::index_sequence_for<Idx...>{});
      for (int a = 0; a < R; ++a) {
        if (!box[a].known) return interval::unknown();
        box[a].lo = max_of(box[a].lo, 0);
        box[a].hi = min_of(box[a].hi, view.extent[a] - 1);
        if (box[a].hi < box[a].lo) return interval::exact(0);
      }
      interval out{0, 0, false};
      long long cur[R > 0 ? R : 1] = {};
      for (int a = 0; a < R; ++a) cur[a] = box[a].lo;
      for (;;) {
        std::int64_t off = 0;
        for (int a = 0; a < R; ++a) off = off * view.extent[a] + cur[a];
        long long const v = (long long)view.data[off];
        out = out.known ? interval{min_of(out.lo, v), max_of(out.hi, v), true} : interval::exact(v);
        int a = R - 1;
        while (a >= 0 && ++cur[a] > box[a].hi) cur[a] = box[a].lo, --a;
        if (a < 0) break;
      }
      return out;
    }
  }
  template <class Fn, class... K, class Env>
  constexpr interval eval(ir::node<ir::op::math<Fn>, K...> const* e, Env const& env) const {
    using value = ir::value_t<ir::node<ir::op::math<Fn>, K...>>;
    if constexpr (!bounded_fn_v<Fn> || !std::is_integral_v<value>)
      return interval::unknown();
    else
      return as_type<value>(operation<value>(e, env));
  }
  // The range of the operation in long long arithmetic, its operands first
  // converted to the type it computes in (C++'s usual conversions: an int
  // operand of an unsigned one is unsigned), a shift's amount excepted.
  template <class Value, class Fn, class... K, class Env>
  constexpr interval operation(ir::node<ir::op::math<Fn>, K...> const* e, Env const& env) const {
    namespace fn = ir::fn;
    interval v[sizeof...(K)];
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      ((v[Is] = Is == 1 && detail::one_of<Fn, fn::shr, fn::shl> ? eval(kid_ptr<Is>(e), env)
                                                                  : as_type<Value>(eval(kid_ptr<Is>(e), env))),
       ...);
    }(std::index_sequence_for<K...>{});
    // Beyond these magnitudes a product (a sum) could overflow long long.
    constexpr long long product_limit = 3037000499LL, sum_limit = 1LL << 62;
    long long largest = 0;
    for (auto const& x : v) {
      if (!x.known) return interval::unknown();
      largest = max_of(largest, max_of(abs_of(max_of(x.lo, -sum_limit)), abs_of(max_of(x.hi, -sum_limit))));
    }
    if (largest >= sum_limit || (std::is_same_v<Fn, fn::mul> && largest > product_limit)) return interval::unknown();
    if constexpr (std::is_same_v<Fn, fn::neg>) {
      return {-v[0].hi, -v[0].lo, true};
    } else if constexpr (std::is_same_v<Fn, fn::abs>) {
      if (v[0].lo >= 0) return v[0];
      if (v[0].hi <= 0) return {-v[0].hi, -v[0].lo, true};
      return {0, max_of(-v[0].lo, v[0].hi), true};
    } else if constexpr (detail::one_of<Fn, fn::shr, fn::shl>) {
      // A shift by one known amount is monotone in the shifted value.
      if (v[1].lo != v[1].hi || v[1].lo < 0 || v[1].lo > 62) return interval::unknown();
      if constexpr (std::is_same_v<Fn, fn::shr>) return {v[0].lo >> v[1].lo, v[0].hi >> v[1].lo, true};
      long long const top = std::numeric_limits<long long>::max() >> v[1].lo;
      if ((v[0].lo < 0) || (v[0].hi > top)) return interval::unknown();
      return {v[0].lo << v[1].lo, v[0].hi << v[1].lo, true};
    } else if constexpr (std::is_same_v<Fn, fn::bit_and>) {
      // A non-negative operand bounds the result: between 0 and it.
      if (v[0].lo >= 0 && v[1].lo >= 0) return {0, min_of(v[0].hi, v[1].hi), true};
      if (v[0].lo >= 0) return {0, v[0].hi, true};
      if (v[1].lo >= 0) return {0, v[1].hi, true};
      return interval::unknown();
    } else if constexpr (std::is_same_v<Fn, fn::add>) {
      return {v[0].lo + v[1].lo, v[0].hi + v[1].hi, true};
    } else if constexpr (std::is_same_v<Fn, fn::sub>) {
      return {v[0].lo - v[1].hi, v[0].hi - v[1].lo, true};
    } else if constexpr (std::is_same_v<Fn, fn::min>) {
      return {min_of(v[0].lo, v[1].lo), min_of(v[0].hi, v[1].hi), true};
    } else if constexpr (std::is_same_v<Fn, fn::max>) {
      return {max_of(v[0].lo, v[1].lo), max_of(v[0].hi, v[1].hi), true};
    } else if constexpr (std::is_same_v<Fn, fn::mul>) {
      long long const c[4] = {v[0].lo * v[1].lo, v[0].lo * v[1].hi, v[0].hi * v[1].lo, v[0].hi * v[1].hi};
      return {min_of(min_of(c[0], c[1]), min_of(c[2], c[3])), max_of(max_of(c[0], c[1]), max_of(c[2], c[3])),
              true};
    } else if constexpr (std::is_same_v<Fn, fn::div>) {
      // A divisor range that holds 0 splits in two: a launch dividing by
      // 0 fails however it is sized.
      return quotient(v[0], v[1]);
    } else {  // C++ remainder: the sign follows the dividend
      long long const m = max_of(abs_of(v[1].lo), abs_of(v[1].hi));
      if (m == 0) return interval::unknown();
      return {v[0].lo < 0 ? -(m - 1) : 0, v[0].hi > 0 ? m - 1 : 0, true};
    }
  }
  template <class E, class Env>
  constexpr interval eval(E const*, Env const&) const {
    return interval::unknown();
  }
};

}  // namespace ctg::analysis
