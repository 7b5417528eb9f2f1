// Statements built and dropped while a kernel is traced.
//
// A statement is a value: `y[i] = e` builds a store and returns it, and the
// store exists in the kernel only if the body returns it or lists it in
// ctg::block(...). Written on its own line it is built and dropped, and the
// kernel silently does less than its source says. The types cannot see that
// when the body returns another statement, so every launch counts: each
// builder of a statement notes one built, and each place the library takes a
// statement from kernel code (a builder's operand, what a body returns) notes
// one taken. More built than taken is a dropped statement, reported at the
// launch naming the kernel, the field and the func (kernel.hpp). A body that
// returns nothing at all is seen by the types and fails to compile
// (CTG-EXPR-010, ir/misuse.hpp).
//
// Counting costs two thread-local increments per statement of the trace;
// only when the counts disagree is the trace run again, itemised, to name
// what was dropped. A statement taken twice (ctg::block(s, s)) offsets one
// dropped statement of the same launch: the count errs towards silence, never
// towards an error for a kernel that keeps all its statements.
#pragma once
#include <optional>
#include <type_traits>
#include <vector>

#include "../config.hpp"
#include "node.hpp"

namespace ctg::ir {

// What a traced statement is, for the message that names a dropped one.
enum class statement_kind : unsigned char {
  untraced,      // not a statement kernel code builds (a value, ctg::nothing, lowered IR)
  store,         // f[i] = e
  accumulation,  // f[i] += e, f[i] -= e, atomic_min, atomic_max
  local_update,  // v = e, v += e, ... on a let local
  block,
  condition,  // if_
  while_loop,
  loop,  // range, serial_range, ndrange, each, static_range
  assigned_value,  // =, +=, ... on a func's argument or a loop index (CTG-EXPR-017, ir/misuse.hpp)
};

// How a message names a statement of that kind (a store or an accumulation
// is followed by its field).
constexpr char const* describe(statement_kind kind) {
  switch (kind) {
    case statement_kind::store: return "a store into ";
    case statement_kind::accumulation: return "an accumulation into ";
    case statement_kind::local_update: return "an assignment to a let local";
    case statement_kind::block: return "a ctg::block";
    case statement_kind::condition: return "an if_";
    case statement_kind::while_loop: return "a while_";
    case statement_kind::loop: return "a loop";
    case statement_kind::assigned_value: return "an assignment to a value";
    case statement_kind::untraced: break;
  }
  return "a statement";
}

struct statement_info {
  statement_kind kind = statement_kind::untraced;
  int param = -1;  // the field parameter a store or an accumulation writes
};

// The field parameter an element handle's node writes (-1 for a local).
template <class N>
struct written_param : std::integral_constant<int, -1> {};
template <int I, class T, int R, bool G, bool D, buffer B, class... K>
struct written_param<node<op::access<I, T, R, G, D, B>, K...>> : std::integral_constant<int, I> {};
template <class V, class... K>
struct written_param<node<op::component, V, K...>> : written_param<V> {};

// A statement type's info; unlowered sites only (Site = -1), as builders make them.
template <class S>
struct traced_statement {
  static constexpr statement_info info{};
};
template <class T, class V>
struct traced_statement<node<op::store, T, V>> {
  static constexpr statement_info info{statement_kind::store, written_param<T>::value};
};
template <atomic_kind K, class T, class V>
struct traced_statement<node<op::atomic<K>, T, V>> {
  static constexpr statement_info info{statement_kind::accumulation, written_param<T>::value};
};
template <class T, class V>
struct traced_statement<node<op::assign<>, T, V>> {
  static constexpr statement_info info{statement_kind::local_update};
};
template <class... S>
struct traced_statement<node<op::block, S...>> {
  static constexpr statement_info info{statement_kind::block};
};
template <class C, class T, class E>
struct traced_statement<node<op::if_<>, C, T, E>> {
  static constexpr statement_info info{statement_kind::condition};
};
template <class C, class B>
struct traced_statement<node<op::while_<>, C, B>> {
  static constexpr statement_info info{statement_kind::while_loop};
};
// Pending loops (lower/builders.hpp) say so themselves.
template <class S>
  requires(S::traced_as_loop)
struct traced_statement<S> {
  static constexpr statement_info info{statement_kind::loop};
};

// One kind of statement of a launch, built and not taken.
struct dropped_statement {
  statement_info info;
  char const* func;  // the innermost func whose body built it ("" outside funcs)
  long count;
};

// The trace of one kernel body, active on this thread while it lives.
class statement_trace {
 public:
  explicit statement_trace(bool itemised = false) : itemised_(itemised), outer_(active()) { active() = this; }
  ~statement_trace() { active() = outer_; }
  statement_trace(statement_trace const&) = delete;
  statement_trace& operator=(statement_trace const&) = delete;

  bool dropped() const { return built_ > taken_; }
  // Itemised traces only: the first kind of statement built and not taken
  // (by kind, field and func), if the itemised count names one.
  std::optional<dropped_statement> first_dropped() const;

  static void note_built(statement_info info) {
    if (statement_trace* t = active()) {
      ++t->built_;
      if (t->itemised_) t->tally(info, +1);
    }
  }
  static void note_taken(statement_info info) {
    if (statement_trace* t = active()) {
      ++t->taken_;
      if (t->itemised_) t->tally(info, -1);
    }
  }
  // Which func's body is traced now; returns the one around it.
  static char const* enter_func(char const* name) {
    statement_trace* t = active();
    if (!t) return nullptr;
    char const* outer = t->func_;
    t->func_ = name;
    return outer;
  }
  static void leave_func(char const* outer) {
    if (statement_trace* t = active(); t && outer) t->func_ = outer;
  }

 private:
  static statement_trace*& active() {
    static thread_local statement_trace* current = nullptr;
    return current;
  }
  void tally(statement_info info, long delta);

  long built_ = 0;
  long taken_ = 0;
  bool itemised_;
  char const* func_ = "";
  std::vector<dropped_statement> tallies_;
  statement_trace* outer_;
};

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE std::optional<dropped_statement> statement_trace::first_dropped() const {
  for (auto const& t : tallies_)
    if (t.count > 0) return t;
  return std::nullopt;
}

CTG_RUNTIME_INLINE void statement_trace::tally(statement_info info, long delta) {
  for (auto& t : tallies_)
    if (t.info.kind == info.kind && t.info.param == info.param && t.func == func_) {
      t.count += delta;
      return;
    }
  tallies_.push_back({info, func_, delta});
}
#endif  // CTG_RUNTIME_DEFINITIONS

// The hooks builders and lowering call; nothing during constant evaluation
// (an IR built in a constant expression is built again by the launch) and
// nothing in device code. Builders note what they build before building it
// and return it as a prvalue: a copy of a deep statement costs the optimiser
// time that grows with its depth.
constexpr void note_built([[maybe_unused]] statement_info info) {
#if !CTG_DEVICE_PASS
  if (!std::is_constant_evaluated()) statement_trace::note_built(info);
#endif
}
template <class S>
constexpr void note_taken_type() {
#if !CTG_DEVICE_PASS
  constexpr statement_info info = traced_statement<std::remove_cvref_t<S>>::info;
  if constexpr (info.kind != statement_kind::untraced)
    if (!std::is_constant_evaluated()) statement_trace::note_taken(info);
#endif
}
template <class S>
constexpr void note_taken(S const&) {
  note_taken_type<S>();
}

// While lowering a func call: statements built in its body are the func's.
template <class Name>
struct func_trace_scope {
  char const* outer = nullptr;
  constexpr func_trace_scope() {
#if !CTG_DEVICE_PASS
    if (!std::is_constant_evaluated()) outer = statement_trace::enter_func(Name::c_str());
#endif
  }
  constexpr ~func_trace_scope() {
#if !CTG_DEVICE_PASS
    if (!std::is_constant_evaluated()) statement_trace::leave_func(outer);
#endif
  }
  func_trace_scope(func_trace_scope const&) = delete;
  func_trace_scope& operator=(func_trace_scope const&) = delete;
};

}  // namespace ctg::ir
