// ctg::kernel<"name">(lambda): a kernel object. k(args...) runs it forward.
#pragma once
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cpu/launch.hpp"
#include "backend/plan.hpp"
#include "check/diagnostics.hpp"
#if defined(__CUDACC__)
#  include "backend/cuda/launch.hpp"
#endif
#include "errors.hpp"
#include "field.hpp"
#include "lower/build.hpp"
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

namespace detail {

template <class T>
inline constexpr bool is_scalar_arg_v = std::is_arithmetic_v<std::remove_cvref_t<T>>;

template <class T>
inline constexpr bool has_grad_arg = false;
template <class T, int R, flags F>
inline constexpr bool has_grad_arg<field<T, R, F>> = has_flag(F, flags::grad);

template <class A>
struct param_info {
  static std::string describe(int i, A const&) { return "parameter #" + std::to_string(i) + " (scalar)"; }
};
template <class T, int R, flags F>
struct param_info<field<T, R, F>> {
  static std::string describe(int i, field<T, R, F> const& f) {
    return "parameter #" + std::to_string(i) + " (field '" + f.name() + "', shape " + f.shape_string() + ")";
  }
};

template <class... A>
std::string describe_param(int which, A const&... a) {
  std::string out;
  int i = 0;
  ((i++ == which ? (void)(out = param_info<std::remove_cvref_t<A>>::describe(which, a)) : (void)0), ...);
  return out;
}

// Which memory space the launch runs in; all field arguments must agree.
template <class... A>
memory_space launch_space(std::string_view kernel, A const&... a) {
  memory_space space = memory_space::host;
  bool seen = false;
  int i = 0;
  std::string first;
  auto visit = [&](auto const& arg) {
    using T = std::remove_cvref_t<decltype(arg)>;
    if constexpr (is_field_v<T>) {
      if (arg.empty())
        throw launch_error("kernel '" + std::string(kernel) + "': " + describe_param(i, a...) +
                           " is an empty field handle");
      if (!seen) {
        space = arg.space();
        seen = true;
        first = arg.name();
      } else if (arg.space() != space) {
        throw launch_error("kernel '" + std::string(kernel) + "': fields in different memory spaces: '" + first +
                           "' is on the " + (space == memory_space::host ? "host" : "device") + ", '" +
                           arg.name() + "' on the " + (arg.space() == memory_space::host ? "host" : "device") +
                           "; copy one with clone()");
      }
    }
    ++i;
  };
  (visit(a), ...);
  return space;
}

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
  // Iterations per loop for loops no launch can bound; -1 when not given.
  static constexpr long long capacity = [] {
    long long n = -1;
    ((n = capacity_option<Options>(n)), ...);
    return n;
  }();
};

// Compile-time facts about the adjoint of every offload of a kernel.
template <class Args, class Offloads, int Slots>
struct reverse_summary;
template <class Args, class... O, int Slots>
struct reverse_summary<Args, detail::tuple<O...>, Slots> {
  static constexpr bool uses_stack = (ad::reverse_plan<Args, O, Slots>::demand.uses_stack || ...);
  static constexpr bool unbounded = (ad::reverse_plan<Args, O, Slots>::demand.unbounded || ...);
};

template <detail::fixed_string Name, class F, class... Options>
class kernel_t {
 public:
  static constexpr auto name = Name;
  using options = kernel_options<Options...>;

  constexpr explicit kernel_t(F body) : body_(body) {}

  // Runs the kernel forward (and records it on the active ctg::tape, if any
  // and if the kernel touches a field with a gradient).
  template <class... A>
  void operator()(A const&... args) const {
    launch<backend::forward_pass>(args...);
    if constexpr ((detail::has_grad_arg<A> || ...)) {
      if (tape* t = detail::active_tape()) record_on(*t, args...);
    }
  }

  // Runs the adjoint: reads the gradients of what the kernel wrote, adds into
  // the gradients of what it read (see docs/02-autodiff.md).
  template <class... A>
  void grad(A const&... args) const {
    using checks = reverse_checks<A...>;
    // The first finding, if any, as one compile error naming kernel, field
    // parameter and func; the launch is then not instantiated at all.
    if constexpr (!checks::ok) {
      (void)sizeof(typename first_diagnostic<Name, checks::findings>::type);
    } else {
      launch<backend::reverse_pass>(args...);
    }
  }

  // The gradient diagnostics for arguments of these types, as a constexpr
  // value: static_assert(!k.template diagnose<Args...>().has(ctg::finding::...)).
  template <class... A>
  static constexpr report diagnose() {
    return reverse_checks<A...>::findings;
  }

  // Forward mode: runs the kernel and propagates tangents from the inputs'
  // .dual() into the outputs' .dual().
  template <class... A>
  void fwd(A const&... args) const {
    launch<backend::tangent_pass>(args...);
  }

  F const& body() const { return body_; }

  // The lowered IR for these arguments (for tests and tools).
  template <class... A>
  auto ir(A const&... args) const {
    return ir_for(std::index_sequence_for<A...>{}, args...);
  }

 private:
  template <std::size_t... Is, class... A>
  auto ir_for(std::index_sequence<Is...>, A const&... args) const {
    return ir::build_kernel_ir(body_, ir::arg_traits<int(Is), std::remove_cvref_t<A>>::handle(args)...);
  }

  template <std::size_t... Is, class... A>
  static auto bind(std::index_sequence<Is...>, A const&... args) {
    return detail::make_tuple(ir::arg_traits<int(Is), std::remove_cvref_t<A>>::bind(args)...);
  }

  // What the reverse pass of this kernel needs, decided from the types.
  template <class... A>
  struct reverse_checks {
    template <std::size_t... Is>
    static auto build(std::index_sequence<Is...>)
        -> decltype(ir::build_kernel_ir(std::declval<F const&>(),
                                        ir::arg_traits<int(Is), A>::handle(std::declval<A const&>())...));
    using kir_t = decltype(build(std::index_sequence_for<A...>{}));
    using args_t = decltype(bind(std::index_sequence_for<A...>{}, std::declval<A const&>()...));
    using offloads_t = decltype(kir_t::offloads);
    using summary = reverse_summary<args_t, offloads_t, kir_t::slots>;
    using rules = check::kernel_checks<args_t, offloads_t, kir_t::slots>;

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

    static constexpr report typed = rules::evaluate(nullptr, nullptr, false);
    template <bool WithValues>
    static constexpr report decided() {
      if constexpr (WithValues) {
        constexpr kir_t kir = build_constant(std::index_sequence_for<A...>{});
        return rules::evaluate(&kir.offloads, nullptr, false);
      } else {
        return typed;
      }
    }
    static constexpr report findings = [] {
      report r = decided<typed.wants_values && constant_ir>();
      if (options::no_adstack && summary::uses_stack) r.add(finding::nested_loop_needs_adstack, -1, -1);
      if (!options::no_adstack && summary::unbounded && options::capacity < 0) r.add(finding::adstack_unsized, -1, -1);
      return r;
    }();
    static constexpr bool ok = findings.ok();
  };

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

  // Pairs that plain numbers decide are checked here, with the same IDs.
  template <class Checks, class Kir, class... A>
  static void check_at_launch(Kir const& kir, memory_space space, A const&... args) {
    if constexpr (Checks::findings.undecided > 0) {
      auto check_with = [&](auto const&... readable_args) {
        auto const bound = bind(std::index_sequence_for<A...>{}, readable_args...);
        return Checks::rules::evaluate(&kir.offloads, &bound, true);
      };
      report const r = space == memory_space::device ? check_with(readable(args)...) : check_with(args...);
      if (!r.ok()) {
        auto const& e = r.items[0];
        std::string where = e.param >= 0 ? " (" + detail::describe_param(e.param, args...) + ")" : std::string();
        if (e.func[0]) where += " in func '" + std::string(e.func) + "'";
        throw autodiff_error("kernel '" + std::string(Name.view()) + "'" + where + ": " +
                             check::message(int(e.what)));
      }
    }
  }

  // Two parameters bound to the same differentiable storage would make the
  // adjoint read and write one gradient buffer under two names.
  template <class... A>
  static void check_aliasing(A const&... args) {
    void const* ids[sizeof...(A) > 0 ? sizeof...(A) : 1] = {};
    bool grad[sizeof...(A) > 0 ? sizeof...(A) : 1] = {};
    int i = 0;
    auto note_one = [&](auto const& a) {
      using T = std::remove_cvref_t<decltype(a)>;
      if constexpr (is_field_v<T>) {
        ids[i] = a.storage_id();
        grad[i] = T::has_grad;
      }
      ++i;
    };
    (note_one(args), ...);
    for (int p = 0; p < int(sizeof...(A)); ++p)
      for (int q = p + 1; q < int(sizeof...(A)); ++q)
        if (ids[p] && ids[p] == ids[q] && (grad[p] || grad[q]))
          throw autodiff_error("kernel '" + std::string(Name.view()) + "': CTG-AD-012 " +
                               detail::describe_param(p, args...) + " and " + detail::describe_param(q, args...) +
                               " share one differentiable storage; the adjoint would mix their gradients. Pass "
                               "the field once, or copy it (clone) into a second field");
  }

  // Under a tape the adjoint is replayed later; a kernel whose reverse cannot
  // be built raises then (the same ID k.grad reports at compile time).
  template <class... A>
  void record_on(tape& t, A const&... args) const {
    (note(t, args), ...);
    using checks = reverse_checks<A...>;
    if constexpr (!checks::ok) {
      t.record([] {
        auto const& e = checks::findings.items[0];
        throw autodiff_error("kernel '" + std::string(Name.view()) + "' recorded on a tape: " +
                             check::message(int(e.what)));
      });
    } else {
      t.record([self = *this, captured = std::make_tuple(args...)] {
        std::apply([&](auto const&... a) { self.template launch<backend::reverse_pass>(a...); }, captured);
      });
    }
  }
  template <class X>
  static void note(tape& t, X const& x) {
    if constexpr (is_field_v<X>) t.note_field(x);
  }

  // Runs every offload in one pass: in order forward, in reverse order for the
  // adjoint (each offload's adjoint reads the gradients the later ones left).
  template <class Pass, class... A>
  void launch(A const&... args) const {
    memory_space const space = detail::launch_space(Name.view(), args...);
    auto kir = ir(args...);
    auto bound = bind(std::index_sequence_for<A...>{}, args...);
    constexpr int slots = decltype(kir)::slots;
    constexpr std::size_t count = decltype(kir.offloads)::size;
    constexpr bool backwards = std::is_same_v<Pass, backend::reverse_pass>;
    if constexpr (backwards) {
      check_aliasing(args...);
      check_at_launch<reverse_checks<A...>>(kir, space, args...);
    }
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (run_one<Pass, slots>(detail::get<backwards ? count - 1 - Is : Is>(kir.offloads), bound, space, args...), ...);
    }(std::make_index_sequence<count>{});
  }

  template <class Pass, int Slots, class Offload, class Bound, class... A>
  void run_one(Offload const& o, Bound const& bound, memory_space space, A const&... args) const {
    eval::launch_status status{};
    int unsized = -1;
    if (space == memory_space::host) {
      cpu::run_offload<Pass, Slots>(o, bound, status, options::capacity, &unsized);
    } else {
#if defined(__CUDACC__)
      cuda::run_offload<Pass, Slots>(o, bound, status, options::capacity, &unsized, Name.view());
#else
      throw launch_error("kernel '" + std::string(Name.view()) +
                         "' was launched on device fields from a translation unit not compiled by nvcc; "
                         "compile the launching code as CUDA (and link ctgrad::cuda)");
#endif
    }
    using root = typename backend::offload_root<Offload>::type;
    if (unsized >= 0) {
      std::string where;
      ad::describe_site(static_cast<root const*>(nullptr), unsized, ad::offload_parts<Offload>::body_level, "",
                        where);
      throw autodiff_error("kernel '" + std::string(Name.view()) + "': cannot size the adstack for the " + where +
                           ": its trip count is not known at launch; give the kernel ctg::adstack_capacity<N>");
    }
    if (status.failed == int(eval::failure::index_out_of_range)) {
      std::string idx = "(";
      for (int k = 0; k < status.rank; ++k) idx += (k ? ", " : "") + std::to_string(status.index[k]);
      idx += ")";
      throw index_error("kernel '" + std::string(Name.view()) + "': index " + idx + " is out of range for " +
                        detail::describe_param(status.param, args...));
    }
    if (status.failed == int(eval::failure::adstack_overflow)) {
      std::string where;
      ad::describe_site(static_cast<root const*>(nullptr), status.site, ad::offload_parts<Offload>::body_level, "",
                        where);
      throw autodiff_error("kernel '" + std::string(Name.view()) + "': adstack overflow in the " + where +
                           ": a thread needed " + std::to_string(status.required) + " bytes, " +
                           std::to_string(status.available) +
                           " were available; raise ctg::adstack_capacity<N> (N = iterations per loop)");
    }
  }

  F body_;
};

// ctg::kernel<"name">(lambda), ctg::kernel<"name", ctg::no_adstack>(lambda).
template <detail::fixed_string Name, class... Options, class F>
constexpr auto kernel(F body) {
  return kernel_t<Name, F, Options...>(body);
}

}  // namespace ctg
