// The errors a launch raises, with their messages built by functions that are
// not templates. A launch is instantiated for every kernel and every set of
// argument types; what it does when a launch fails (name the kernel, the
// field, the loop; assemble a message of a dozen strings) is the same for
// all of them, so it is compiled once per translation unit here instead of
// once per launch there. Launches call these only on the way to throwing.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "backend/race/launch.hpp"
#include "check/findings.hpp"
#include "check/rules.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "eval/status.hpp"
#include "field.hpp"
#include "ir/misuse.hpp"
#include "ir/statement_trace.hpp"
#include "memory/space.hpp"

namespace ctg::detail {

CTG_RUNTIME_INLINE std::string describe_field_param(int i, std::string const& name, int const* extents, int rank);

// How a message names a launch's argument: "parameter #2 (field 'v', shape
// (64))". Specialised for other argument types that are fields (ctgrad/mpi).
template <class A>
struct param_info {
  static std::string describe(int i, A const&) { return "parameter #" + std::to_string(i) + " (scalar)"; }
};
template <class T, int R, flags F>
struct param_info<field<T, R, F>> {
  static std::string describe(int i, field<T, R, F> const& f) {
    return describe_field_param(i, f.name(), f.shape().data(), R);
  }
};

// One argument of a launch as the messages see it: its address and the
// function that describes an argument of its type.
struct arg_ref {
  void const* object;
  std::string (*describe)(int, void const*);
};
template <class A>
std::string describe_erased(int i, void const* a) {
  return param_info<A>::describe(i, *static_cast<A const*>(a));
}
template <class A>
arg_ref ref_of(A const& a) {
  return {std::addressof(a), &describe_erased<std::remove_cvref_t<A>>};
}
// A launch's arguments, in order: {detail::ref_of(args)...}, built where a
// launch fails, for the call that throws.
using launch_args = std::initializer_list<arg_ref>;

CTG_RUNTIME_INLINE std::string describe_param(int which, launch_args args);

inline std::string kernel_prefix(std::string_view kernel) { return "kernel '" + std::string(kernel) + "'"; }

[[noreturn]] CTG_RUNTIME_INLINE void raise_empty_field(std::string_view kernel, int which, launch_args args);

[[noreturn]] CTG_RUNTIME_INLINE void raise_mixed_spaces(std::string_view kernel, std::string const& first,
                                                        memory_space first_space, std::string const& other,
                                                        memory_space other_space);

[[noreturn]] CTG_RUNTIME_INLINE void raise_not_compiled_as_cuda(std::string_view kernel);

// The first finding of a launch-time report (check/rules.hpp), naming the
// field and the func.
[[noreturn]] CTG_RUNTIME_INLINE void raise_finding(std::string_view kernel, report const& r, char const* context,
                                                   launch_args args);

[[noreturn]] CTG_RUNTIME_INLINE void raise_shared_storage(std::string_view kernel, int p, int q, launch_args args);

[[noreturn]] CTG_RUNTIME_INLINE void raise_changed_since_forward(std::string_view kernel, int which, launch_args args);

[[noreturn]] CTG_RUNTIME_INLINE void raise_grad_before_forward(std::string_view kernel, int which, launch_args args);

[[noreturn]] CTG_RUNTIME_INLINE void raise_forward_only_on_tape(std::string_view kernel);

[[noreturn]] CTG_RUNTIME_INLINE void raise_value_and_grad_on_tape(std::string_view kernel);

[[noreturn]] CTG_RUNTIME_INLINE void raise_forward_mode_on_tape(std::string_view kernel);

// CTG-EXPR-010: `dropped` is the first statement an itemised trace of the
// body saw built and dropped (none when the trace could not tell which).
[[noreturn]] CTG_RUNTIME_INLINE void raise_dropped_statement(std::string_view kernel,
                                                             ir::dropped_statement const* dropped, launch_args args);

// CTG-LAUNCH-002: a race checker's run (backend/race) found the offload's
// results depend on the order of its iterations.
[[noreturn]] CTG_RUNTIME_INLINE void raise_order_dependence(std::string_view kernel, char const* pass, int offload,
                                                            race::report const& race, launch_args args);

// What an offload's run left to report: a loop whose adstack it could not
// size (`unsized`, its site, or -1), an index out of range, an adstack
// overflow. `describe_site` names the loop with a given site ("range loop at
// level 1 in func 'f'"); `capacity` is the kernel's adstack_capacity, or -1.
struct offload_outcome {
  int unsized = -1;
  eval::launch_status const* status = nullptr;
  long long capacity = -1;
  void (*describe_site)(int site, std::string& out) = nullptr;

  bool failed() const { return unsized >= 0 || status->failed != 0; }
};

// Throws what the outcome reports, if it reports anything raised.
CTG_RUNTIME_INLINE void raise_offload_failure(std::string_view kernel, offload_outcome const& o, launch_args args);

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE std::string describe_field_param(int i, std::string const& name, int const* extents, int rank) {
  return "parameter #" + std::to_string(i) + " (field '" + name + "', shape " + shape_string(extents, rank) + ")";
}

CTG_RUNTIME_INLINE std::string describe_param(int which, launch_args args) {
  if (which < 0 || which >= int(args.size())) return {};
  arg_ref const& a = args.begin()[which];
  return a.describe(which, a.object);
}

CTG_RUNTIME_INLINE void raise_empty_field(std::string_view kernel, int which, launch_args args) {
  throw launch_error(kernel_prefix(kernel) + ": " + describe_param(which, args) + " is an empty field handle");
}

CTG_RUNTIME_INLINE void raise_mixed_spaces(std::string_view kernel, std::string const& first, memory_space first_space,
                                           std::string const& other, memory_space other_space) {
  throw launch_error(kernel_prefix(kernel) + ": fields in different memory spaces: '" + first + "' is on the " +
                     (first_space == memory_space::host ? "host" : "device") + ", '" + other + "' on the " +
                     (other_space == memory_space::host ? "host" : "device") + "; copy one with clone()");
}

CTG_RUNTIME_INLINE void raise_not_compiled_as_cuda(std::string_view kernel) {
  throw launch_error(kernel_prefix(kernel) +
                     " was launched on device fields from a translation unit not compiled by nvcc; "
                     "compile the launching code as CUDA (and link ctgrad::cuda)");
}

CTG_RUNTIME_INLINE void raise_finding(std::string_view kernel, report const& r, char const* context, launch_args args) {
  auto const& e = r.items[0];
  std::string where = e.param >= 0 ? " (" + describe_param(e.param, args) + ")" : std::string();
  if (e.func[0]) where += " in func '" + std::string(e.func) + "'";
  throw autodiff_error(kernel_prefix(kernel) + context + where + ": " + check::message(e.what));
}

CTG_RUNTIME_INLINE void raise_shared_storage(std::string_view kernel, int p, int q, launch_args args) {
  throw autodiff_error(kernel_prefix(kernel) + ": CTG-AD-012 " + describe_param(p, args) + " and " +
                       describe_param(q, args) +
                       " share one storage (or views of overlapping memory) that the kernel writes, or that has a "
                       "gradient under one name and not the other, or another layout or handle type under each; the "
                       "adjoint would mix their gradients or lose one, or take a value written under one name for "
                       "unchanged under the other (a field only read under both names, through handles of one "
                       "type, is fine: its gradients add). Pass the field once, or copy it (clone) into a second "
                       "field");
}

CTG_RUNTIME_INLINE void raise_changed_since_forward(std::string_view kernel, int which, launch_args args) {
  throw autodiff_error("CTG-TAPE-003 " + kernel_prefix(kernel) + ": " + describe_param(which, args) +
                       " changed since the forward launch (a launch, a host write, or a write through a pointer or "
                       "into a view's memory), and the adjoint reads "
                       "it. Fix: call k.grad before changing it, or record the launches on a ctg::tape, which "
                       "keeps the values each adjoint needs");
}

CTG_RUNTIME_INLINE void raise_grad_before_forward(std::string_view kernel, int which, launch_args args) {
  throw autodiff_error("CTG-TAPE-013 " + kernel_prefix(kernel) +
                       ": k.grad before any forward launch of the kernel on these arguments, and the adjoint reads " +
                       describe_param(which, args) +
                       ", which the forward launch writes: it would read whatever the field holds. Fix: launch "
                       "k(args...) first, or call k.value_and_grad(args...), or record the launches on a ctg::tape");
}

CTG_RUNTIME_INLINE void raise_forward_only_on_tape(std::string_view kernel) {
  throw autodiff_error("CTG-TAPE-004 " + kernel_prefix(kernel) +
                       " is ctg::forward_only, but was launched on fields with gradients under a "
                       "ctg::tape: the tape would miss its adjoint. Fix: drop ctg::forward_only (the "
                       "kernel's adjoint is then checked at compile time), or launch it outside the tape");
}

CTG_RUNTIME_INLINE void raise_value_and_grad_on_tape(std::string_view kernel) {
  throw autodiff_error("CTG-TAPE-009 " + kernel_prefix(kernel) +
                       ": value_and_grad under a ctg::tape runs the adjoint now, before the launches "
                       "recorded after it. Fix: launch k(args...) on the tape and let tape.backward() "
                       "run the adjoints, or call value_and_grad outside the tape");
}

CTG_RUNTIME_INLINE void raise_forward_mode_on_tape(std::string_view kernel) {
  throw autodiff_error("CTG-TAPE-010 " + kernel_prefix(kernel) +
                       ": k.fwd under a ctg::tape on fields with gradients: forward mode builds no adjoint, so "
                       "the tape would chain the other launches' adjoints around what it wrote and the "
                       "gradient would miss it. Fix: launch k(args...) on the tape, and k.fwd before the tape "
                       "starts or after backward()");
}

CTG_RUNTIME_INLINE void raise_dropped_statement(std::string_view kernel, ir::dropped_statement const* dropped,
                                                launch_args args) {
  std::string what = "a statement";
  std::string where;
  if (dropped) {
    what = ir::describe(dropped->info.kind);
    if (dropped->info.param >= 0) what += describe_param(dropped->info.param, args);
    if (dropped->func[0]) where = " in func '" + std::string(dropped->func) + "'";
    // Written on a line of its own, an assignment to a func's argument would
    // have changed nothing even if it were kept: its own message.
    if (dropped->info.kind == ir::statement_kind::assigned_value)
      throw launch_error(kernel_prefix(kernel) + where + ": " + CTG_IMPL_MSG_EXPR_017);
  }
  throw launch_error(kernel_prefix(kernel) + where + ": CTG-EXPR-010 a statement is built and dropped: " + what +
                     " is written on a line of its own, and the body neither returns it nor lists it in "
                     "ctg::block(...), so the kernel would skip it. Fix: return it (return y[i] = ...;) or "
                     "list the statements in order, return ctg::block(y[i] = ..., z[i] = ...);");
}

CTG_RUNTIME_INLINE void raise_order_dependence(std::string_view kernel, char const* pass, int offload,
                                               race::report const& race, launch_args args) {
  char const* const buffer[] = {"values", "gradient", "tangent"};
  throw launch_error("CTG-LAUNCH-002 " + kernel_prefix(kernel) + ": the " + pass + " of its offload #" +
                     std::to_string(offload) + " depends on the order of its iterations: " +
                     "run in order and " + race::order_name(race.against) + ", the " + buffer[race.buffer] +
                     " of " + describe_param(race.param, args) + " differ first at " + race.index + " (" +
                     race.in_order_value + " against " + race.other_value +
                     "). An iteration reads what another one writes. Fix: write each element from one "
                     "iteration only and read elements no other iteration writes (a second field for the "
                     "new values), or accumulate with +=");
}

CTG_RUNTIME_INLINE void raise_offload_failure(std::string_view kernel, offload_outcome const& o, launch_args args) {
  eval::launch_status const& status = *o.status;
  if (o.unsized >= 0) {
    std::string where;
    o.describe_site(o.unsized, where);
    throw autodiff_error(kernel_prefix(kernel) + ": CTG-AD-003 cannot size the adstack for the " + where +
                         ": its trip count could not be bounded at this launch (its bounds read values the "
                         "kernel computes, or their range over the values of the fields they read allows more "
                         "iterations than a thread's memory holds); give the kernel ctg::adstack_capacity<N>, N "
                         "the most iterations that loop runs per thread");
  }
  auto const reported_index = [&] {
    std::string idx = "(";
    for (int k = 0; k < status.rank; ++k) idx += (k ? ", " : "") + std::to_string(status.index[k]);
    return idx + ")";
  };
  if (status.failed == int(eval::failure::index_out_of_range)) {
    throw index_error(kernel_prefix(kernel) + ": index " + reported_index() + " is out of range for " +
                      describe_param(status.param, args));
  }
  if (status.failed == int(eval::failure::component_out_of_range)) {
    long long const rows = status.index[2], cols = status.index[3];
    std::string const shape = cols == 1 ? "a vector of " + std::to_string(rows) + " components"
                                        : "a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix";
    std::string const whose = status.param >= 0 ? " (an element of " + describe_param(status.param, args) + ")"
                                                : " (a local or a computed value)";
    throw index_error(kernel_prefix(kernel) + ": component index " + reported_index() + " computed at run time is " +
                      "out of range for " + shape + whose +
                      ": v[k] takes 0 <= k < the vector's size, m(r, c) 0 <= r < rows and 0 <= c < cols");
  }
  if (status.failed == int(eval::failure::store_conflict)) {
    std::string const element = status.rank > 0 ? ", element " + reported_index() : std::string();
    throw autodiff_error(kernel_prefix(kernel) + " (" + describe_param(status.param, args) + element + "): " +
                         check::message(finding::parallel_store_conflict) +
                         ". The checks could not see it before the launch (an index read from a field or "
                         "computed, a store under a condition or in a nested loop); the adjoint met it when a "
                         "second iteration wrote the element, so the gradients this launch computed are "
                         "incomplete");
  }
  if (status.failed == int(eval::failure::adstack_overflow)) {
    std::string where;
    o.describe_site(status.site, where);
    std::string advice;
    if (o.capacity >= 0) {
      long long const per = status.available > 0 ? status.available / o.capacity : 0;
      long long const needed = per > 0 ? (status.required + per - 1) / per : 0;
      advice = "raise ctg::adstack_capacity<" + std::to_string(o.capacity) + "> to at least " +
               std::to_string(needed) + " iterations";
    } else {
      advice = "the loop ran more iterations than its bounds allowed when the launch sized the adstack (do its "
               "bounds read a field the kernel writes?); give the kernel ctg::adstack_capacity<N>";
    }
    throw autodiff_error(kernel_prefix(kernel) + ": adstack overflow in the " + where + ": a thread needed " +
                         std::to_string(status.required) + " bytes, " + std::to_string(status.available) +
                         " were available; " + advice);
  }
}
#endif  // CTG_RUNTIME_DEFINITIONS

}  // namespace ctg::detail
