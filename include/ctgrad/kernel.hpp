// ctg::kernel<"name">(lambda): a kernel object. k(args...) runs it forward.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ad/fusion.hpp"
#include "backend/cpu/launch.hpp"
#include "backend/plan.hpp"
#include "backend/race/launch.hpp"
#include "eval/rows.hpp"
#include "eval/store_claims.hpp"
#include "check/diagnostics.hpp"
#include "detail/forward_records.hpp"
#if defined(__CUDACC__)
#  include "backend/cuda/launch.hpp"
#endif
#include "errors.hpp"
#include "field.hpp"
#include "launch_errors.hpp"
#include "lower/kernel_ir.hpp"
#include "tape.hpp"

namespace ctg {

// ---- kernel options --------------------------------------------------------------
// The reverse pass keeps no per-iteration values of nested loops; kernels that
// need them fail to build (CTG-AD-001).
struct no_adstack {};
// Per-thread adstack entries for loops whose trip count no launch can bound
// (while_, bounds read from locals).
template <int N>
struct adstack_capacity {
  static constexpr int value = N;
};
// The kernel is launched forward only, never differentiated: its launches on
// fields with gradients skip the compile-time gradient checks, and are not
// recorded on a tape for their adjoint (their writes still are, so the tape
// keeps what other adjoints need).
struct forward_only {};
// Host launches run every parallel offload in several iteration orders and
// fail (CTG-LAUNCH-002) when the results depend on the order: a race between
// iterations (backend/race). For debugging; -DCTG_RACE_CHECK=1 turns it on
// for every kernel.
struct race_check {};
#ifndef CTG_RACE_CHECK
#  define CTG_RACE_CHECK 0
#endif

namespace detail {

template <class T>
inline constexpr bool is_scalar_arg_v = std::is_arithmetic_v<std::remove_cvref_t<T>>;

// The position of the first of `A` that is `T`.
template <class T, class... A>
constexpr std::size_t first_position_of() {
  std::size_t position = 0;
  bool found = false;
  ((found = found || std::is_same_v<T, A>, position += found ? 0 : 1), ...);
  return position;
}

template <class T>
inline constexpr bool has_grad_arg = false;
template <class T, int R, flags F>
inline constexpr bool has_grad_arg<field<T, R, F>> = has_flag(F, flags::grad);

// Whether a launch can bind a gradient buffer of its own to an argument of
// this type (kernel_t::share_repeated_gradients): a ctg::field with a
// gradient, bound as its own view. (A decomposed field, ctgrad/mpi, binds
// a block view, and is not.)
template <class T>
inline constexpr bool takes_gradient_share = false;
template <class T, int R, flags F>
inline constexpr bool takes_gradient_share<field<T, R, F>> = has_flag(F, flags::grad);

// Which memory space the launch runs in; all field arguments must agree.
template <class T>
std::string name_erased(void const* f) {
  return static_cast<T const*>(f)->name();
}
template <class... A>
memory_space launch_space(std::string_view kernel, A const&... a) {
  memory_space space = memory_space::host;
  void const* first = nullptr;
  std::string (*first_name)(void const*) = nullptr;
  int i = 0;
  auto visit = [&](auto const& arg) {
    using T = std::remove_cvref_t<decltype(arg)>;
    if constexpr (is_field_v<T>) {
      if (arg.empty()) raise_empty_field(kernel, i, {ref_of(a)...});
      if (!first) {
        space = arg.space();
        first = std::addressof(arg);
        first_name = &name_erased<T>;
      } else if (arg.space() != space) {
        raise_mixed_spaces(kernel, first_name(first), space, arg.name(), arg.space());
      }
    }
    ++i;
  };
  (visit(a), ...);
  return space;
}

// The field parameters whose values a subtree reads: loads, accumulations
// (read-modify-write) and stores into one component of an element (the
// others stay); the element a whole-element store writes is not read, its
// indices are. A tape running a rollout learns from these which fields the
// steps carry.
template <class N>
inline constexpr unsigned long long loaded_params_v = 0;
template <class L>
inline constexpr unsigned long long store_target_loads_v = loaded_params_v<L>;
template <class Op, class... I>
  requires ir::is_access_op<Op>
inline constexpr unsigned long long store_target_loads_v<ir::node<Op, I...>> = (loaded_params_v<I> | ... | 0ull);
template <class Op, class... K>
inline constexpr unsigned long long loaded_params_v<ir::node<Op, K...>> =
    ir::access_param_bit<Op> | (loaded_params_v<K> | ... | 0ull);
template <class L, class E>
inline constexpr unsigned long long loaded_params_v<ir::node<ir::op::store, L, E>> =
    store_target_loads_v<L> | loaded_params_v<E>;

// What the aliasing check (kernel_t::check_aliasing) sees of an argument:
// where a field's elements lie, whether it has a gradient and whether the
// kernel writes it; nothing of any other argument.
struct storage_use {
  void const* id = nullptr;
  element_layout layout{};
  bool grad = false;
  bool written = false;
  // Whether the launch can give it a gradient buffer of its own, as the
  // later name of a field read twice (kernel_t::repeatable_reads).
  bool repeatable = false;
};
template <class A>
storage_use storage_use_of(A const& a) {
  if constexpr (is_field_v<A>)
    return {a.storage_id(), a.layout(), A::has_grad};
  else
    return {};
}
// Whether two arguments' elements share a storage or overlapping memory.
inline bool storages_meet(storage_use const& a, storage_use const& b) {
  return a.id && b.id && (a.id == b.id || layouts_overlap(a.id, a.layout, b.id, b.layout));
}
// Whether two arguments, `later` after `first`, are one field read under
// two names (dot(x, x)): the same elements, a gradient under both names,
// written under neither, and a gradient buffer of its own for the later
// name. The checks and the adjoint see two read-only parameters, which is
// what they are; the launch gives the later name that buffer and adds it in
// after (kernel_t::launch), so both shares count and never meet in one
// buffer during the launch.
inline bool read_twice(storage_use const& first, storage_use const& later) {
  return first.id && first.id == later.id && first.layout == later.layout && first.grad && later.grad &&
         !first.written && !later.written && later.repeatable;
}
// The first two arguments whose elements meet, where `matters` holds for
// one of them, and that are not one field read twice: their positions, or
// -1 for none.
template <class Matters>
std::pair<int, int> first_shared(std::span<storage_use const> used, Matters matters) {
  for (std::size_t p = 0; p < used.size(); ++p)
    for (std::size_t q = p + 1; q < used.size(); ++q)
      if ((matters(used[p]) || matters(used[q])) && storages_meet(used[p], used[q]) && !read_twice(used[p], used[q]))
        return {int(p), int(q)};
  return {-1, -1};
}
// The earlier argument that `q` repeats as one field read twice, or -1.
inline int read_twin_of(std::span<storage_use const> used, std::size_t q) {
  for (std::size_t p = 0; p < q; ++p)
    if (read_twice(used[p], used[q])) return int(p);
  return -1;
}
// Raises CTG-AD-012 for the first two arguments that share a storage or
// overlapping memory when one of them has a gradient or the kernel writes
// one of them (the checks follow each parameter by its position: a value
// written under one name would pass for unchanged under the other).
inline void check_shared_storage(std::string_view kernel, std::span<storage_use const> used, launch_args args) {
  auto const [p, q] = first_shared(used, [](storage_use const& u) { return u.grad || u.written; });
  if (p >= 0) raise_shared_storage(kernel, p, q, args);
}
// Whether two arguments share a storage the kernel writes (a forward launch
// allows it; the checks and the rows by position cannot follow it).
inline bool shares_written_storage(std::span<storage_use const> used) {
  return first_shared(used, [](storage_use const& u) { return u.written; }).first >= 0;
}

// The rows of each field argument a launch reads and writes (eval/rows.hpp).
template <std::size_t N>
struct launch_rows {
  row_set reads[N > 0 ? N : 1];
  row_set writes[N > 0 ? N : 1];
};

}  // namespace detail

template <class O>
constexpr long long capacity_option(long long current) {
  if constexpr (requires { O::value; })
    return O::value;
  else
    return current;
}

template <class... Options>
struct kernel_options {
  static constexpr bool no_adstack = (std::is_same_v<Options, ctg::no_adstack> || ...);
  static constexpr bool forward_only = (std::is_same_v<Options, ctg::forward_only> || ...);
  static constexpr bool race_check = CTG_RACE_CHECK || (std::is_same_v<Options, ctg::race_check> || ...);
  // Iterations per loop for loops no launch can bound; -1 when not given.
  static constexpr long long capacity = [] {
    long long n = -1;
    ((n = capacity_option<Options>(n)), ...);
    return n;
  }();
};

// In the op table's inline namespace (ir/vector_math.hpp): a kernel shared
// by translation units built with and without vector math is two types, so
// its launches are two sets of functions, never one merged by the linker.
CTG_IMPL_MATH_ABI_BEGIN
template <detail::fixed_string Name, class F, class... Options>
class kernel_t {
 public:
  static constexpr auto name = Name;
  using options = kernel_options<Options...>;

  constexpr explicit kernel_t(F body) : body_(body) {}

  // Runs the kernel forward. On fields with gradients the launch is checked
  // at compile time like k.grad (unless the kernel is ctg::forward_only), and
  // recorded on the active ctg::tape, if any, with the versions of the
  // fields its adjoint will read.
  template <class... A>
  void operator()(A const&... args) const {
    if constexpr (misused<A...>) {
      (void)sizeof(misuse_report_t<A...>);  // here, so that the error's notes stop at the launch
    } else {
      constexpr bool differentiable = (detail::has_grad_arg<A> || ...) && !options::forward_only;
      tape* const t = detail::active_tape();
      std::size_t entry = 0;
      std::vector<detail::launch_use> uses;
      if constexpr (differentiable) {
        using checks = reverse_checks<A...>;
        constexpr report on_tape = checks::findings.for_tape();
        if constexpr (!on_tape.ok()) {
          // The first finding, as one compile error at this launch (see grad()).
          (void)sizeof(typename first_diagnostic<Name, checks::tape_findings, detail::type_list<A...>>::type);
          return;
        } else {
          if (t) {
            check_aliasing(args...);
            unsigned long long const before = tape_pre_params<checks>(args...);
            uses = launch_uses(checks::findings.needed_params, before, checks::findings.written_params,
                               read_params<A...>(), args...);
            entry = t->begin_launch(Name.view(), uses, numbers_of<true>(args...));
          }
          run_forward(t, entry, uses, args...);
        }
      } else {
        if constexpr ((detail::has_grad_arg<A> || ...)) {
          if (t) detail::raise_forward_only_on_tape(Name.view());
        }
        if (t) entry = begin_without_adjoint(*t, uses, args...);
        run_forward(t, entry, uses, args...);
      }
    }
  }

  // Runs the adjoint: reads the gradients of what the kernel wrote, adds into
  // the gradients of what it read (see docs/02-autodiff.md).
  template <class... A>
  void grad(A const&... args) const {
    if constexpr (misused<A...>) {
      (void)sizeof(misuse_report_t<A...>);  // here, so that the error's notes stop at the launch
    } else {
      using checks = reverse_checks<A...>;
      // The first finding, if any, as one compile error naming kernel, field
      // parameter and func; the launch is then not instantiated at all.
      if constexpr (!checks::ok) {
        (void)sizeof(typename first_diagnostic<Name, checks::findings, detail::type_list<A...>>::type);
      } else {
        check_unchanged_since_forward(checks::findings.needed_params, checks::findings.written_params, args...);
        (void)launch<backend::reverse_pass>(args...);
      }
    }
  }

  // k(args...) followed by k.grad(args...): the values the kernel writes and
  // the gradients its adjoint adds. In one sweep where that gives the same
  // result (ad/fusion.hpp: the kernel reads none of the fields it writes,
  // each stored field has one store, ...); otherwise the two launches.
  template <class... A>
  void value_and_grad(A const&... args) const {
    if constexpr (!reverse_ready<A...>()) {
      grad(args...);  // reports the kernel's mistake or its first finding, as k.grad does
    } else {
      if (detail::active_tape()) detail::raise_value_and_grad_on_tape(Name.view());
      if constexpr (fuses_value_and_gradient<A...>()) {
        using checks = reverse_checks<A...>;
        auto const rows = launch<backend::value_and_gradient_pass>(args...);
        note_writes(checks::findings.written_params, rows, args...);
        remember_forward(checks::findings.needed_params, rows, args...);
      } else {
        (*this)(args...);
        grad(args...);
      }
    }
  }

  // Whether value_and_grad on arguments of these types runs one sweep.
  template <class... A>
  static constexpr bool fuses_value_and_gradient() {
    if constexpr (options::race_check || !(is_field_v<A> || ...)) {
      return false;
    } else {
      using checks = reverse_checks<A...>;
      using bound_t = typename checks::args_t;
      // An argument type that checks each pass itself (ctgrad/mpi) sees two passes.
      constexpr bool hooked = requires(typename checks::kir_t const& kir, bound_t const& bound, A const&... args) {
        ctg_launch_hook(Name.view(), true, kir, bound, args...);
      };
      return !hooked && ad::value_and_gradient_fusion<bound_t, ir_key<A...>>::valid;
    }
  }

  // Whether k.grad on arguments of these types runs the adjoint of a
  // stencil offload as a gather on the host (ad/gather.hpp). A launch whose
  // stores and reads of one field meet runs the plain adjoint instead.
  template <class... A>
  static constexpr bool gathers_adjoint() {
    return some_plan<backend::reverse_pass, A...>([]<class P>(P*) { return P::gathers; });
  }

  // Whether a launch on arguments of these types steps several iterations
  // of a parallel offload together on the host (eval/interleave.hpp), and
  // whether k.grad does (ad/interleave.hpp).
  template <class... A>
  static constexpr bool interleaves_forward() {
    return some_plan<backend::forward_pass, A...>([]<class P>(P*) { return P::interleaves_iterations; });
  }
  template <class... A>
  static constexpr bool interleaves_adjoint() {
    return some_plan<backend::reverse_pass, A...>([]<class P>(P*) { return P::interleaves_iterations; });
  }

  // The gradient diagnostics for arguments of these types, as a constexpr
  // value: static_assert(!k.template diagnose<Args...>().has(ctg::finding::...)).
  template <class... A>
  static constexpr report diagnose() {
    if constexpr (misused<A...>) {
      (void)sizeof(misuse_report_t<A...>);  // a body that does not build reports that first
      return {};
    } else {
      return reverse_checks<A...>::findings;
    }
  }

  // Forward mode: runs the kernel and propagates tangents from the inputs'
  // .dual() into the outputs' .dual().
  template <class... A>
  void fwd(A const&... args) const {
    if constexpr (misused<A...>) {
      (void)sizeof(misuse_report_t<A...>);  // here, so that the error's notes stop at the launch
    } else {
      using kir_t = typename reverse_checks<A...>::kir_t;
      static constexpr report const& findings = tangent_findings<decltype(kir_t::offloads)>;
      if constexpr (!findings.ok()) {
        (void)sizeof(typename first_diagnostic<Name, tangent_findings<decltype(kir_t::offloads)>,
                                               detail::type_list<A...>>::type);
      } else {
        // Its writes count as any launch's (k.grad and tapes compare
        // versions). A tape records it as a launch without an adjoint, which
        // only fields without gradients allow.
        tape* const t = detail::active_tape();
        std::size_t entry = 0;
        std::vector<detail::launch_use> uses;
        if (t) {
          if constexpr ((detail::has_grad_arg<A> || ...)) detail::raise_forward_mode_on_tape(Name.view());
          entry = begin_without_adjoint(*t, uses, args...);
        }
        run_forward<backend::tangent_pass>(t, entry, uses, args...);
      }
    }
  }

  F const& body() const { return body_; }

  // The lowered IR for these arguments (for tests and tools).
  template <class... A>
  auto ir(A const&... args) const {
    if constexpr (misused<std::remove_cvref_t<A>...>) (void)sizeof(misuse_report_t<std::remove_cvref_t<A>...>);
    ir::statement_trace const trace;
    auto kir = ir_for(std::index_sequence_for<A...>{}, args...);
    if (trace.dropped()) raise_dropped_statement(args...);
    return kir;
  }

 private:
  // The IR's type for arguments of these types (what every check reads).
  template <class... A>
  struct built {
    template <std::size_t... Is>
    static auto build(std::index_sequence<Is...>)
        -> decltype(ir::build_kernel_ir(std::declval<F const&>(),
                                        ir::arg_traits<int(Is), A>::handle(std::declval<A const&>())...));
    using type = decltype(build(std::index_sequence_for<A...>{}));
  };
  // Offload Position of the IR for arguments of types A, under a name that
  // this kernel, those types and the position spell (ir::keyed_offload):
  // what its plan, frames and per-node functions are instantiated on.
  template <int Position, class... A>
  struct offload_key {
    using offload = detail::tuple_element_t<std::size_t(Position), decltype(built<A...>::type::offloads)>;
  };
  template <int Position, class... A>
  using offload_name = ir::keyed_offload<offload_key<Position, A...>>;
  // The IR for arguments of types A under a short name, for the checks
  // (check::kernel_checks) and the choice of one sweep (ad/fusion.hpp).
  template <class... A>
  struct ir_key {
    using offloads = decltype(built<A...>::type::offloads);
    template <int Position>
    using offload = offload_name<Position, A...>;
  };
  // A mistake in the body that its types show (ir/misuse.hpp): reported at
  // the launch as one error, before any check or backend is instantiated.
  template <class... A>
  using misuse_t = ir::first_misuse_t<decltype(built<A...>::type::offloads)>;
  template <class... A>
  static constexpr bool misused = !std::is_void_v<misuse_t<A...>>;
  template <class... A>
  using misuse_report_t = typename misuse_diagnostic_of<Name, misuse_t<A...>, decltype(built<A...>::type::offloads),
                                                        detail::type_list<A...>>::type;

  // A statement the body built and neither returned nor listed in a block
  // (ir/statement_trace.hpp): traced again, itemised, to name it.
  template <class... A>
  [[noreturn]] void raise_dropped_statement(A const&... args) const {
    ir::statement_trace const itemised(true);
    (void)ir_for(std::index_sequence_for<A...>{}, args...);
    auto const dropped = itemised.first_dropped();
    detail::raise_dropped_statement(Name.view(), dropped ? &*dropped : nullptr, {detail::ref_of(args)...});
  }

  template <std::size_t... Is, class... A>
  auto ir_for(std::index_sequence<Is...>, A const&... args) const {
    return ir::build_kernel_ir(body_, ir::arg_traits<int(Is), std::remove_cvref_t<A>>::handle(args)...);
  }

  template <std::size_t... Is, class... A>
  static auto bind(std::index_sequence<Is...>, A const&... args) {
    return detail::make_tuple(ir::arg_traits<int(Is), std::remove_cvref_t<A>>::bind(args)...);
  }

  // What the reverse pass of this kernel needs, decided from the types.
  // Whether `says` holds for the plan of Pass of some offload, on fields of
  // these types (false under the race checker, which plans its own runs).
  template <class Pass, class... A, class Says>
  static constexpr bool some_plan(Says says) {
    if constexpr (options::race_check || !(is_field_v<A> || ...)) {
      return false;
    } else {
      using checks = reverse_checks<A...>;
      return [&]<int... Is>(std::integer_sequence<int, Is...>) {
        return (says(static_cast<typename Pass::template plan<typename checks::args_t, offload_name<Is, A...>,
                                                              checks::kir_t::slots>*>(nullptr)) ||
                ...);
      }(std::make_integer_sequence<int, int(ir_key<A...>::offloads::size)>{});
    }
  }

  template <class... A>
  struct reverse_checks {
    using kir_t = typename built<A...>::type;
    using args_t = decltype(bind(std::index_sequence_for<A...>{}, std::declval<A const&>()...));
    using rules = check::kernel_checks<args_t, ir_key<A...>, kir_t::slots>;

    // The IR built in a constant expression: possible when the lambda
    // captures nothing and every argument is a field (scalar arguments are
    // values only a launch has). Its plain numbers are then known here.
    template <std::size_t... Is>
    static constexpr kir_t build_constant(std::index_sequence<Is...>) {
      return ir::build_kernel_ir(F{}, typename ir::arg_traits<int(Is), A>::handle_type{}...);
    }
    static constexpr bool constant_ir = [] {
      if constexpr (!std::is_default_constructible_v<F> || !(is_field_v<A> && ...))
        return false;
      else
        return requires { typename std::integral_constant<int, (build_constant(std::index_sequence_for<A...>{}), 0)>; };
    }();

    static constexpr report typed =
        rules::evaluate(nullptr, nullptr, false, options::no_adstack, options::capacity >= 0);
    // The findings, with the IR's numbers where a check wants them and the
    // IR can be built in a constant expression. Whether it can is asked only
    // then: the asking builds it, which for a deep expression costs seconds
    // of compile time (docs/05, *Checks that build the IR*) that most
    // kernels, whose checks the types decide, need not pay.
    template <bool WantsValues>
    static constexpr report decided() {
      if constexpr (!WantsValues) {
        return typed;
      } else if constexpr (!constant_ir) {
        return typed;
      } else {
        constexpr kir_t kir = build_constant(std::index_sequence_for<A...>{});
        return rules::evaluate(&kir.offloads, nullptr, false, options::no_adstack, options::capacity >= 0);
      }
    }
    static constexpr report findings = decided<typed.wants_values>();
    static constexpr bool ok = findings.ok();
    static constexpr report tape_findings = findings.for_tape();
  };

  // The reverse checks pass for these argument types (and the body builds).
  template <class... A>
  static constexpr bool reverse_ready() {
    if constexpr (misused<A...>)
      return false;
    else
      return reverse_checks<A...>::ok;
  }

  // What the launch-time half of the checks reads of a field: device fields
  // of integers (loop bounds, indices) as host copies.
  template <class X>
  static X readable(X const& x) {
    if constexpr (is_field_v<X>) {
      if constexpr (std::is_integral_v<typename X::value_type>)
        if (x.space() == memory_space::device) return x.clone(memory_space::host);
    }
    return x;
  }

  // f(bound views the host can read) for a launch in `space`: on the device,
  // views of host copies of its integer fields (kept alive for the call).
  template <class Fn, class... A>
  static decltype(auto) with_host_readable(memory_space space, Fn&& f, A const&... args) {
    auto call = [&](auto const&... readable_args) {
      return f(bind(std::index_sequence_for<A...>{}, readable_args...));
    };
    return space == memory_space::device ? call(readable(args)...) : call(args...);
  }

  // The launch-time half of the checks: pairs that only values decide, with
  // the lowered IR and the arguments of this launch.
  template <class Checks, class Kir, class... A>
  static report launch_report(Kir const& kir, memory_space space, A const&... args) {
    return with_host_readable(
        space, [&](auto const& bound) { return Checks::rules::evaluate(&kir.offloads, &bound, true); }, args...);
  }
  // Raises the first finding of a launch-time report, naming the field and func.
  template <class... A>
  static void raise_first(report const& r, char const* context, A const&... args) {
    if (!r.ok()) detail::raise_finding(Name.view(), r, context, {detail::ref_of(args)...});
  }
  template <class Checks, class Kir, class... A>
  static void check_at_launch(Kir const& kir, memory_space space, A const&... args) {
    if constexpr (Checks::findings.undecided > 0) raise_first(launch_report<Checks>(kir, space, args...), "", args...);
  }

  template <class... A>
  auto build_ir(A const&... args) const {
    return ir(args...);
  }

  // Two parameters bound to the same differentiable storage would make the
  // adjoint read and write one gradient buffer under two names; so would two
  // views of overlapping memory (view.hpp), compared by the bytes they cover.
  template <class... A>
  static void check_aliasing(A const&... args) {
    if constexpr (sizeof...(A) > 1) {
      auto const used = storage_uses(args...);
      detail::check_shared_storage(Name.view(), used, {detail::ref_of(args)...});
    }
  }
  // What the aliasing checks see of each argument (detail::storage_use).
  template <class... A>
  static std::array<detail::storage_use, sizeof...(A)> storage_uses(A const&... args) {
    std::array<detail::storage_use, sizeof...(A)> used{detail::storage_use_of(args)...};
    constexpr unsigned long long written = written_params<A...>();
    constexpr unsigned long long repeatable = repeatable_reads<A...>();
    for (std::size_t i = 0; i < sizeof...(A); ++i) {
      used[i].written = (written & ir::param_bit(int(i))) != 0;
      used[i].repeatable = (repeatable & ir::param_bit(int(i))) != 0;
    }
    return used;
  }

  // The arguments that may repeat an earlier one as one field read twice
  // (detail::read_twice), from the types: a field with a gradient that the
  // kernel does not write (detail::takes_gradient_share), of the same type
  // as an earlier argument.
  template <class... A>
  static constexpr unsigned long long repeatable_reads() {
    if constexpr (sizeof...(A) < 2) {
      return 0;
    } else {
      constexpr unsigned long long written = written_params<A...>();
      constexpr std::size_t first_of_type[] = {detail::first_position_of<A, A...>()...};
      constexpr bool readable[] = {detail::takes_gradient_share<A>...};
      unsigned long long out = 0;
      for (std::size_t q = 1; q < sizeof...(A) && q < 64; ++q)
        if (readable[q] && first_of_type[q] < q && (written & ir::param_bit(int(q))) == 0)
          out |= ir::param_bit(int(q));
      return out;
    }
  }
  // Binds a gradient buffer of its own to each argument that repeats an
  // earlier one as one field read twice; returns what adds those buffers
  // into the field's gradient once the launch has run.
  template <class Bound, class... A>
  static std::vector<std::function<void()>> share_repeated_gradients(Bound& bound, A const&... args) {
    constexpr unsigned long long repeatable = repeatable_reads<A...>();
    std::vector<std::function<void()>> add_shares;
    auto const used = storage_uses(args...);
    auto const all = std::tie(args...);
    [&]<std::size_t... Q>(std::index_sequence<Q...>) {
      (
          [&] {
            if constexpr ((repeatable & ir::param_bit(int(Q))) != 0) {
              if (detail::read_twin_of(used, Q) >= 0) {
                auto const& a = std::get<Q>(all);
                auto share = a.gradient_share();
                detail::get<Q>(bound) = a.view_with_gradient(share);
                add_shares.emplace_back([a, share] { a.add_gradient_share(share); });
              }
            }
          }(),
          ...);
    }(std::index_sequence_for<A...>{});
    return add_shares;
  }

  template <class Offloads>
  static constexpr report tangent_findings = check::tangent_checks<Offloads>::evaluate();

  // The fields a kernel writes, from the IR type alone (no gradient analysis).
  template <class... A>
  static constexpr unsigned long long written_params() {
    using kir_t = typename reverse_checks<A...>::kir_t;
    return []<class... O>(detail::tuple<O...> const*) {
      return (offload_writes<O>() | ... | 0ull);
    }(static_cast<decltype(kir_t::offloads) const*>(nullptr));
  }
  template <class O>
  static constexpr unsigned long long offload_writes() {
    if constexpr (requires { &O::stmt; })
      return ir::written_params_v<decltype(O::stmt)>;
    else
      return ir::written_params_v<decltype(O::body)>;
  }
  // The fields a kernel reads (detail::loaded_params_v), from the IR type alone.
  template <class... A>
  static constexpr unsigned long long read_params() {
    using kir_t = typename reverse_checks<A...>::kir_t;
    return []<class... O>(detail::tuple<O...> const*) {
      return (offload_reads<O>() | ... | 0ull);
    }(static_cast<decltype(kir_t::offloads) const*>(nullptr));
  }
  template <class O>
  static constexpr unsigned long long offload_reads() {
    if constexpr (requires { &O::stmt; })
      return detail::loaded_params_v<decltype(O::stmt)>;
    else
      return detail::loaded_params_v<decltype(O::body)>;
  }

  // The fields the tape must give this launch's adjoint as they were before
  // it (it reads them, then overwrites them); decided at launch when only
  // values can tell, with the launch-time half of the checks.
  template <class Checks, class... A>
  unsigned long long tape_pre_params(A const&... args) const {
    constexpr report on_tape = Checks::findings.for_tape();
    if constexpr (on_tape.undecided == 0) {
      return on_tape.pre_params;
    } else {
      auto kir = build_ir(args...);
      report const r = launch_report<Checks>(kir, detail::launch_space(Name.view(), args...), args...).for_tape();
      raise_first(r, " recorded on a tape", args...);
      return r.pre_params;
    }
  }

  // How this launch uses each field argument, for the tape.
  template <class... A>
  static std::vector<detail::launch_use> launch_uses(unsigned long long needed, unsigned long long before,
                                                     unsigned long long written, unsigned long long read,
                                                     A const&... args) {
    std::vector<detail::launch_use> uses;
    int i = 0;
    auto one = [&](auto const& a) {
      using X = std::remove_cvref_t<decltype(a)>;
      if constexpr (is_field_v<X>) {
        unsigned long long const bit = ir::param_bit(i);
        bool const n = (needed & bit) != 0, w = (written & bit) != 0, r = (read & bit) != 0;
        if (n || w || r) detail::add_launch_use(uses, a.storage(), a.buffer_index(), a.name(), i, n,
                                                n && (before & bit) != 0, w, r);
      }
      ++i;
    };
    (one(args), ...);
    return uses;
  }

  // On a tape, a launch that records no adjoint (a forward-only kernel, or
  // k.fwd): what it reads and writes still matters to the others' adjoints.
  template <class... A>
  std::size_t begin_without_adjoint(tape& t, std::vector<detail::launch_use>& uses, A const&... args) const {
    uses = launch_uses(0, 0, written_params<A...>(), read_params<A...>(), args...);
    return t.begin_launch(Name.view(), uses, numbers_of<true>(args...));
  }

  // Runs the forward launch (or k.fwd's tangent pass, which has no adjoint),
  // records what it wrote, and completes the tape entry with the adjoint.
  template <class Pass = backend::forward_pass, class... A>
  void run_forward(tape* t, std::size_t entry, std::vector<detail::launch_use> const& uses, A const&... args) const {
    auto const rows = launch<Pass>(args...);
    constexpr bool differentiable =
        std::is_same_v<Pass, backend::forward_pass> && (detail::has_grad_arg<A> || ...) && !options::forward_only;
    note_writes(
        [] {
          if constexpr (differentiable)
            return reverse_checks<A...>::findings.written_params;
          else
            return written_params<A...>();
        }(),
        rows, args...);
    if constexpr (differentiable) {
      remember_forward(reverse_checks<A...>::findings.needed_params, rows, args...);
      if (t) {
        (t->note_gradient_of(args), ...);
        t->end_launch(entry, uses, [self = *this, captured = std::make_tuple(args...)] {
          std::apply([&](auto const&... a) { (void)self.template launch<backend::reverse_pass, false>(a...); },
                     captured);
        });
      }
    } else {
      records().note_unrecorded_launch();
      if (t) t->end_launch(entry, uses, {});
    }
  }

  // Marks the fields a launch wrote, and which rows (their versions and
  // write stamps, for tapes and k.grad), with the tape recording on this
  // thread (tape.hpp: a tape reading what another launch wrote).
  template <class... A>
  static void note_writes(unsigned long long written, detail::launch_rows<sizeof...(A)> const& rows, A const&... args) {
    void const* const recorder = detail::active_tape();
    int i = 0;
    auto mark = [&](auto const& a) {
      if constexpr (is_field_v<std::remove_cvref_t<decltype(a)>>)
        if ((written & ir::param_bit(i)) != 0) a.note_launch_write(rows.writes[i], recorder);
      ++i;
    };
    (mark(args), ...);
  }

  // The rows of each field a launch of this IR on these bound arguments
  // reads and writes (eval/rows.hpp), offload by offload. All rows when an
  // argument type checks each pass itself (ctgrad/mpi): a decomposed
  // field's kernels index the global grid, not the block it holds.
  template <class Kir, class Bound, class... A>
  static detail::launch_rows<sizeof...(A)> rows_of(Kir const& kir, Bound const& bound, memory_space space,
                                                    A const&... args) {
    constexpr std::size_t N = sizeof...(A);
    detail::launch_rows<N> rows;
    if constexpr (requires { ctg_launch_hook(Name.view(), true, kir, bound, args...); }) {
      for (std::size_t i = 0; i < N; ++i) rows.reads[i].add_all(), rows.writes[i].add_all();
    } else {
      eval::launch_status status{};
      constexpr auto offloads = std::make_index_sequence<decltype(kir.offloads)::size>{};
      auto walk = [&]<unsigned long long Stable, std::size_t... Is>(std::integral_constant<unsigned long long, Stable>,
                                                                     std::index_sequence<Is...>) {
        (rows_of_offload<Kir::slots, offload_name<int(Is), A...>, Stable>(detail::get<Is>(kir.offloads), bound, status,
                                                                           rows),
         ...);
      };
      // A row chosen by an integer field (x(step() + 1, i)) is read on the
      // host, so only for host launches; on the device it counts as every
      // row, and so it does when the field is also passed under a name the
      // kernel writes.
      constexpr unsigned long long stable = stable_integer_fields<A...>();
      if constexpr (stable != 0) {
        if (space == memory_space::host && !detail::shares_written_storage(storage_uses(args...))) {
          walk(std::integral_constant<unsigned long long, stable>{}, offloads);
          return rows;
        }
      }
      walk(std::integral_constant<unsigned long long, 0>{}, offloads);
    }
    return rows;
  }
  // The integer fields a launch on arguments of these types reads and does
  // not write (the first 64 parameters): fixed for the launch.
  template <class... A>
  static constexpr unsigned long long stable_integer_fields() {
    unsigned long long fields = 0;
    int i = 0;
    auto one = [&]<class X>(X const*) {
      if constexpr (is_field_v<X>)
        if (std::is_integral_v<typename X::value_type> && i < 64) fields |= ir::param_bit(i);
      ++i;
    };
    (one(static_cast<A const*>(nullptr)), ...);
    return fields & ~written_params<A...>();
  }
  template <int Slots, class Named, unsigned long long Stable, class Bound, std::size_t N>
  static void rows_of_offload(ir::named_t<Named> const& o, Bound const& bound, eval::launch_status& status,
                              detail::launch_rows<N>& rows) {
    using plan = typename backend::forward_pass::template plan<Bound, Named, Slots>;
    typename plan::template frame<false> host;
    host.args = &bound;
    host.status = &status;
    eval::row_walk<decltype(host), Stable> walk{host, rows.reads, rows.writes};
    if constexpr (requires { o.stmt; })
      walk.visit(o.stmt);
    else
      walk.visit(o.body);
  }

  // ---- k.grad called alone: the fields its adjoint reads are those the
  // forward launch left (compared by launches, whole-field host writes and,
  // with CTG_HOST_WRITE_CHECKS, element writes through at(), map(), flat()).
  // Every kernel's own records (detail/forward_records.hpp).
  static detail::forward_records& records() {
    static detail::forward_records r;
    return r;
  }
  // Calls f(field, its parameter's position) on each field argument whose
  // bit is in `params` (the fields the adjoint reads, or some of them).
  template <class Each, class... A>
  static void for_fields_in(unsigned long long params, Each&& f, A const&... args) {
    int i = 0;
    auto one = [&](auto const& a) {
      if constexpr (is_field_v<std::remove_cvref_t<decltype(a)>>)
        if ((params & ir::param_bit(i)) != 0) f(a, i);
      ++i;
    };
    (one(args), ...);
  }
  // The position of the first field argument in `params` for which
  // pred(field, position) holds, or -1.
  template <class Pred, class... A>
  static int first_field_in(unsigned long long params, Pred&& pred, A const&... args) {
    int found = -1;
    for_fields_in(
        params, [&](auto const& a, int i) { if (found < 0 && pred(a, i)) found = i; }, args...);
    return found;
  }
  template <class... A>
  static detail::buffer_list needed_buffers(unsigned long long needed, A const&... args) {
    detail::buffer_list out;
    for_fields_in(needed, [&](auto const& a, int) { out.push(a.storage_id()); }, args...);
    return out;
  }
  // FNV-1a over the bytes of the arithmetic and enumeration arguments (the
  // numbers a launch's indices are computed from) and, WithMatrices, of the
  // fixed-size Eigen ones too (every value a rollout's step passes, which its
  // run again by backward() must pass alike); fields add nothing.
  template <bool WithMatrices = false, class... A>
  static std::uint64_t numbers_of(A const&... args) {
    std::uint64_t h = 14695981039346656037ull;
    auto one = [&](auto const& a) {
      using T = std::remove_cvref_t<decltype(a)>;
      if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T> || (WithMatrices && is_eigen_fixed_v<T>)) {
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &a, sizeof(T));
        for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
      }
    };
    (one(args), ...);
    return h;
  }
  // `rows`: the rows the launch read (and the adjoint will), digested with
  // the host-write checks.
  template <class... A>
  static void remember_forward(unsigned long long needed, detail::launch_rows<sizeof...(A)> const& rows,
                               A const&... args) {
    if (needed == 0) return;
    if constexpr (CTG_HOST_WRITE_CHECKS)
      for_fields_in(needed, [&](auto const& a, int i) { a.watch_for_adjoint(rows.reads[i]); }, args...);
    auto now = needed_buffers(needed, args...);
    std::uint64_t const numbers = numbers_of(args...);
    std::uint64_t const stamp = detail::next_write_stamp();  // after the launch's own writes
    records().remember(std::move(now), numbers, stamp);
  }
  // Throws CTG-TAPE-003 when a launch or a host write wrote rows the adjoint
  // reads (at this call's arguments) after the last forward launch on the
  // same buffers: launches that wrote other rows (the next steps of a field
  // indexed by the time step) do not count. Throws CTG-TAPE-013 when no
  // forward launch ran on them and the adjoint reads a field the kernel
  // writes (`written`), whose values are then whatever the field held.
  template <class... A>
  void check_unchanged_since_forward(unsigned long long needed, unsigned long long written, A const&... args) const {
    if (needed == 0) return;
    std::optional<std::uint64_t> const stamp = records().stamp_of(needed_buffers(needed, args...), numbers_of(args...));
    auto rows = [&] {
      return rows_of(ir(args...), bind(std::index_sequence_for<A...>{}, args...),
                     detail::launch_space(Name.view(), args...), args...);
    };
    if (!stamp) {
      if ((needed & written) == 0 || !records().holds_every_launch()) return;
      // Rows the adjoint reads that the forward launch would have written.
      auto const touched = rows();
      int const own = first_field_in(
          needed & written, [&](auto const&, int i) { return touched.reads[i].meets(touched.writes[i]); }, args...);
      if (own >= 0) detail::raise_grad_before_forward(Name.view(), own, {detail::ref_of(args)...});
      return;
    }
    if constexpr (CTG_HOST_WRITE_CHECKS) for_fields_in(needed, [](auto const& a, int) { a.settle(); }, args...);
    auto const touched = rows();
    int const changed = first_field_in(
        needed, [&](auto const& a, int i) { return a.rows_written_after(touched.reads[i], *stamp); }, args...);
    if (changed >= 0) detail::raise_changed_since_forward(Name.view(), changed, {detail::ref_of(args)...});
    // Writes that left no version (through data(), into a view's memory):
    // the rows read, against the digests the forward launch took.
    if constexpr (CTG_HOST_WRITE_CHECKS) {
      int const bypassed = first_field_in(
          needed, [&](auto const& a, int i) { return !a.rows_as_forward_left(touched.reads[i]); }, args...);
      if (bypassed >= 0) detail::raise_changed_since_forward(Name.view(), bypassed, {detail::ref_of(args)...});
    }
  }

  // Runs every offload in one pass: in order forward, in reverse order for the
  // adjoint (each offload's adjoint reads the gradients the later ones left).
  // Checked: run the launch-time half of the checks before an adjoint (a
  // tape ran it when it recorded the launch).
  // Returns the rows each field's accesses touch (eval/rows.hpp), for the
  // passes that write values; empty for the others.
  template <class Pass, bool Checked = true, class... A>
  detail::launch_rows<sizeof...(A)> launch(A const&... args) const {
    memory_space const space = detail::launch_space(Name.view(), args...);
    auto kir = ir(args...);
    auto bound = bind(std::index_sequence_for<A...>{}, args...);
    // An argument type may check each pass against the lowered IR, through a
    // function found by argument-dependent lookup (ctgrad/mpi: the ghost
    // width and the written rows of a decomposed field). It reads integer
    // fields (constant indices) from the host, as the launch-time checks do.
    if constexpr (requires { ctg_launch_hook(Name.view(), true, kir, bound, args...); }) {
      with_host_readable(
          space,
          [&](auto const& readable_bound) {
            ctg_launch_hook(Name.view(), std::is_same_v<Pass, backend::forward_pass>, kir, readable_bound, args...);
          },
          args...);
    }
    constexpr int slots = decltype(kir)::slots;
    constexpr std::size_t count = decltype(kir.offloads)::size;
    constexpr bool backwards = backend::runs_adjoint_v<Pass>;
    if constexpr (backwards && Checked) {
      check_aliasing(args...);
      check_at_launch<reverse_checks<A...>>(kir, space, args...);
    }
    // A field read under two names: the second name's gradient goes to a
    // buffer of its own, added in once the offloads have run.
    constexpr unsigned long long repeatable = [] {
      if constexpr (backwards)
        return repeatable_reads<A...>();
      else
        return 0ull;
    }();
    [[maybe_unused]] auto const add_shares = [&] {
      if constexpr (repeatable != 0)
        return share_repeated_gradients(bound, args...);
      else
        return 0;
    }();
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (run_one<Pass, slots, offload_name<int(backwards ? count - 1 - Is : Is), A...>>(
           detail::get<backwards ? count - 1 - Is : Is>(kir.offloads), int(backwards ? count - 1 - Is : Is), bound,
           space, args...),
       ...);
    }(std::make_index_sequence<count>{});
    if constexpr (repeatable != 0)
      for (auto const& add : add_shares) add();
    if constexpr (std::is_same_v<Pass, backend::forward_pass> || std::is_same_v<Pass, backend::value_and_gradient_pass> ||
                  std::is_same_v<Pass, backend::tangent_pass>)
      return rows_of(kir, bound, space, args...);
    else
      return {};
  }

  template <class Pass, int Slots, class Named, class Offload, class Bound, class... A>
  void run_one(Offload const& o, [[maybe_unused]] int number, Bound const& bound, memory_space space, A const&... args) const {
    eval::launch_status status{};
    eval::store_claims_release const release_claims{status};
    int unsized = -1;
    if (space == memory_space::host) {
      // Every host offload passes here: the program's subnormal mode is set
      // on this thread, and the pool hands it to the workers with each chunk.
      cpu::subnormal_mode_scope const subnormals(cpu::requested_subnormal_mode());
      if constexpr (options::race_check) {
        race::report race;
        race::run_offload<Pass, Slots, Named>(o, bound, status, options::capacity, &unsized, race);
        if (race.found()) {
          char const* const pass = std::is_same_v<Pass, backend::forward_pass>   ? "forward pass"
                                   : std::is_same_v<Pass, backend::reverse_pass> ? "adjoint"
                                                                                 : "tangent pass";
          detail::raise_order_dependence(Name.view(), pass, number, race, {detail::ref_of(args)...});
        }
      } else {
        cpu::run_offload<Pass, Slots, Named>(o, bound, status, options::capacity, &unsized);
      }
    } else {
#if defined(__CUDACC__)
      // Under its own type: a __global__ template's arguments may not name
      // the kernel's lambda, which the short name spells.
      cuda::run_offload<Pass, Slots, Offload>(o, bound, status, options::capacity, &unsized, Name.view());
#else
      detail::raise_not_compiled_as_cuda(Name.view());
#endif
    }
    // The root statement: the offload's loop (level 0), or the statements of
    // a serial offload, which no loop encloses.
    using root = typename ir::offload_traits<Offload>::root;
    if (unsized >= 0 || status.failed != 0)
      detail::raise_offload_failure(Name.view(), {unsized, &status, options::capacity, &ad::describe_site_in<root>},
                                    {detail::ref_of(args)...});
  }

  F body_;
};
CTG_IMPL_MATH_ABI_END

// ctg::kernel<"name">(lambda), ctg::kernel<"name", ctg::no_adstack>(lambda).
template <detail::fixed_string Name, class... Options, class F>
constexpr auto kernel(F body) {
  return kernel_t<Name, F, Options...>(body);
}

}  // namespace ctg
