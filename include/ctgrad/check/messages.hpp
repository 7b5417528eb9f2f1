// The text of every gradient diagnostic: what is wrong, why, and how to fix
// it, behind a stable ID. Each is a macro so that the compile-time
// static_assert and the launch-time exception print the same words.
// docs/04-diagnostics.md lists them with failing and fixed examples.
#pragma once

#define CTG_IMPL_MSG_AD_001                                                                                  \
  "CTG-AD-001 nested non-static loop without the adstack: a loop inside the offload (counted through "     \
  "funcs) carries locals whose per-iteration values the reverse pass needs, and the kernel was built with " \
  "ctg::no_adstack. Fix: remove ctg::no_adstack, make the loop a ctg::static_range, or restructure so the " \
  "carried locals enter only linearly"

#define CTG_IMPL_MSG_AD_002                                                                                \
  "CTG-AD-002 cross-iteration read-after-write on a differentiable field at the offload-level loop: one " \
  "iteration reads an element another iteration writes, and the parallel adjoint cannot chain gradients " \
  "between iterations. Fix: iterate with ctg::serial_range (the adjoint then runs the iterations in "     \
  "reverse order), or restructure so each iteration reads only what it writes"

#define CTG_IMPL_MSG_AD_003                                                                                 \
  "CTG-AD-003 adstack size unknown: a nested loop whose trip count no launch can bound (a while_, or "     \
  "bounds computed from locals) carries values the reverse pass needs. Fix: give the kernel "              \
  "ctg::adstack_capacity<N>, N the most iterations such a loop runs per thread"

#define CTG_IMPL_MSG_AD_004                                                                                  \
  "CTG-AD-004 a differentiable element is read, its value needed by the reverse pass, and later "           \
  "overwritten or accumulated into in the same kernel: the adjoint reads fields as the kernel left them "   \
  "and would use the new value. Fix: read the value into a ctg::let local and write the result to another " \
  "field, or split the kernel so the write happens in a later kernel"

#define CTG_IMPL_MSG_AD_008                                                                                 \
  "CTG-AD-008 atomic_min/atomic_max on a field with a gradient: an atomic choice has no derivative rule. " \
  "Fix: keep such fields without ctg::grad, or compute the extremum with ctg::min/ctg::max"

#define CTG_IMPL_MSG_AD_009                                                                                \
  "CTG-AD-009 no derivative rule: a gradient flows through a ctg::custom_gradient functor that has no "  \
  "backward(operands..., g) member. Fix: give the functor a backward, or wrap the call in ctg::stop_grad " \
  "if no gradient should flow through it"

#define CTG_IMPL_MSG_AD_011                                                                                \
  "CTG-AD-011 a kernel being differentiated reads or writes a gradient or tangent buffer (f.grad() / "    \
  "f.dual()): the adjoint would differentiate through its own bookkeeping. Fix: pass the buffer to the " \
  "kernel as a field of its own (x.grad() on the host) or move that access to a kernel that is not "      \
  "differentiated"

namespace ctg::check {

constexpr char const* message(int id) {
  switch (id) {
    case 1: return CTG_IMPL_MSG_AD_001;
    case 2: return CTG_IMPL_MSG_AD_002;
    case 3: return CTG_IMPL_MSG_AD_003;
    case 4: return CTG_IMPL_MSG_AD_004;
    case 8: return CTG_IMPL_MSG_AD_008;
    case 9: return CTG_IMPL_MSG_AD_009;
    case 11: return CTG_IMPL_MSG_AD_011;
    default: return "CTG-AD-000 unknown finding";
  }
}

}  // namespace ctg::check
