// The table of gradient findings: one row per diagnostic, from which the
// finding enum, the message text (the same words at compile time and at
// launch), the compile errors (check/diagnostics.hpp) and the test that keeps
// docs/04-diagnostics.md and tests/compile_fail in step (tests/tools) are all
// made. A new diagnostic is its rule (check/rules.hpp or the pass that
// decides it), its row here, its compile-fail test and its docs entry.
//
// Columns: number (CTG-AD-0NN), enumerator, when it is decided (compile: a
// static_assert with a tests/compile_fail/adNNN_*.cpp test; launch: an
// exception), and the message: what is wrong and why, then the fix.
#pragma once

// The messages: what is wrong and why, then the fix. Macros, so that a
// static_assert can print them (C++20 takes only string literals there).
#define CTG_IMPL_MSG_AD_001 \
  "CTG-AD-001 nested non-static loop without the adstack: a loop inside the offload (counted through "\
  "funcs) carries locals whose per-iteration values the reverse pass needs, and the kernel was built "\
  "with ctg::no_adstack. Fix: remove ctg::no_adstack, make the loop a ctg::static_range, or restructure "\
  "so the carried locals enter only linearly"

#define CTG_IMPL_MSG_AD_002 \
  "CTG-AD-002 cross-iteration read-after-write on a differentiable field in a parallel loop: one "\
  "iteration reads an element another iteration writes, and the parallel adjoint cannot chain gradients "\
  "between iterations. Fix: iterate with ctg::serial_range (the adjoint then runs the iterations in "\
  "reverse order), or restructure so each iteration reads only what it writes"

#define CTG_IMPL_MSG_AD_003 \
  "CTG-AD-003 adstack size unknown: a nested loop whose trip count no launch can bound (a while_, or "\
  "bounds computed from locals) carries values the reverse pass needs. Fix: give the kernel "\
  "ctg::adstack_capacity<N>, N the most iterations such a loop runs per thread"

#define CTG_IMPL_MSG_AD_004 \
  "CTG-AD-004 a field's value is read, the reverse pass needs it, and the same kernel later overwrites "\
  "or accumulates into that element: the adjoint reads fields as the kernel left them and would use the "\
  "new value. Fix: read the element once into a ctg::let local and store the local after the last "\
  "read; where every read comes before the first write, recording the launch on a ctg::tape is enough "\
  "(it keeps the values the launch began with); or write the result to another field, or split the "\
  "kernel"

#define CTG_IMPL_MSG_AD_008 \
  "CTG-AD-008 atomic_min/atomic_max on a field with a gradient: an atomic choice has no derivative "\
  "rule. Fix: keep such fields without ctg::grad, or compute the extremum with ctg::min/ctg::max"

#define CTG_IMPL_MSG_AD_009 \
  "CTG-AD-009 no derivative rule: a gradient flows through a ctg::custom_gradient functor that has no "\
  "backward(operands..., g) member. Fix: give the functor a backward, or wrap the call in "\
  "ctg::stop_grad if no gradient should flow through it"

#define CTG_IMPL_MSG_AD_010 \
  "CTG-AD-010 no tangent rule: forward mode (k.fwd) runs through a ctg::custom_gradient functor that "\
  "has no tangent(operands..., tangents...) member. Fix: give the functor a tangent, or wrap the call "\
  "in ctg::stop_grad"

#define CTG_IMPL_MSG_AD_011 \
  "CTG-AD-011 a kernel being differentiated reads or writes a gradient or tangent buffer (f.grad() / "\
  "f.dual()): the adjoint would differentiate through its own bookkeeping. Fix: pass the buffer to the "\
  "kernel as a field of its own (x.grad() on the host) or move that access to a kernel that is not "\
  "differentiated"

#define CTG_IMPL_MSG_AD_012 \
  "CTG-AD-012 two parameters share one storage that the kernel writes, or that has a gradient under one "\
  "name and not the other, or another layout or handle type under each; the adjoint would mix their gradients or lose "\
  "one, or the checks take a value written under one name for unchanged under the other. A field only read "\
  "under both names, through handles of one type, is fine. Fix: pass the field once, or copy it (clone) into a "\
  "second field"

#define CTG_IMPL_MSG_AD_013 \
  "CTG-AD-013 two iterations of a parallel loop store into the same element of a differentiable field: "\
  "the forward pass keeps whichever store lands last (with threads, whichever runs last), and the "\
  "adjoint cannot know which store that was, so it cannot hand the element's gradient to it. Fix: "\
  "accumulate with += if the values should add up, store where the index differs from iteration to "\
  "iteration, or iterate with ctg::serial_range to keep the last iteration's value"

#define CTG_IMPL_FINDINGS(X) \
  X(1, nested_loop_needs_adstack, compile, CTG_IMPL_MSG_AD_001) \
  X(2, cross_iteration_raw, compile, CTG_IMPL_MSG_AD_002) \
  X(3, adstack_unsized, compile, CTG_IMPL_MSG_AD_003) \
  X(4, overwritten_after_read, compile, CTG_IMPL_MSG_AD_004) \
  X(8, atomic_extremum_on_gradient, compile, CTG_IMPL_MSG_AD_008) \
  X(9, no_derivative_rule, compile, CTG_IMPL_MSG_AD_009) \
  X(10, no_tangent_rule, compile, CTG_IMPL_MSG_AD_010) \
  X(11, gradient_buffer_read, compile, CTG_IMPL_MSG_AD_011) \
  X(12, aliased_gradient_storage, launch, CTG_IMPL_MSG_AD_012) \
  X(13, parallel_store_conflict, compile, CTG_IMPL_MSG_AD_013)

namespace ctg {

// What a diagnostic found. Values are the numbers of the IDs CTG-AD-0NN.
enum class finding : int {
#define CTG_IMPL_ENUM(N, NAME, WHEN, MESSAGE) NAME = N,
  CTG_IMPL_FINDINGS(CTG_IMPL_ENUM)
#undef CTG_IMPL_ENUM
};

namespace check {

enum class decided_at { compile, launch };

struct finding_row {
  int number;
  finding what;
  decided_at when;
  char const* message;
};

inline constexpr finding_row finding_table[] = {
#define CTG_IMPL_ROW(N, NAME, WHEN, MESSAGE) {N, finding::NAME, decided_at::WHEN, MESSAGE},
    CTG_IMPL_FINDINGS(CTG_IMPL_ROW)
#undef CTG_IMPL_ROW
};

constexpr char const* message(finding f) {
  for (auto const& row : finding_table)
    if (row.what == f) return row.message;
  return "CTG-AD-000 unknown finding";
}

}  // namespace check
}  // namespace ctg
