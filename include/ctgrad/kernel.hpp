// ctg::kernel<"name">(lambda): a kernel object. k(args...) runs it forward.
#pragma once
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cpu/launch.hpp"
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

template <class... Options>
struct kernel_options {
  static constexpr bool no_adstack = (std::is_same_v<Options, ctg::no_adstack> || ...);
  static constexpr long long capacity = [] {
    long long n = -1;
    ((n = capacity_of<Options>(n)), ...);
    return n;
  }();
  template <class O>
  static constexpr long long capacity_of(long long current) {
    if constexpr (requires { O::value; })
      return O::value;
    else
      return current;
  }
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

  constexpr explicit kernel_t(F body) : body_(body) {}

  // Runs the kernel forward (and records it on the active ctg::tape, if any
  // and if the kernel touches a field with a gradient).
  template <class... A>
  void operator()(A const&... args) const {
    launch<cpu::forward_pass>(args...);
    if constexpr ((detail::has_grad_arg<A> || ...)) {
      if (tape* t = detail::active_tape()) record_on(*t, args...);
    }
  }

  // Runs the adjoint: reads the gradients of what the kernel wrote, adds into
  // the gradients of what it read (see docs/02-autodiff.md).
  template <class... A>
  void grad(A const&... args) const {
    using kir_t = decltype(ir(args...));
    using args_t = decltype(bind(std::index_sequence_for<A...>{}, args...));
    using summary = reverse_summary<args_t, decltype(kir_t::offloads), kir_t::slots>;
    using opts = kernel_options<Options...>;
    constexpr bool d1 = opts::no_adstack && summary::uses_stack;
    constexpr bool unsized = !opts::no_adstack && summary::unbounded && opts::capacity < 0;
    static_assert(!d1,
                  "CTG-AD-001 a nested non-static loop carries values the reverse pass needs, but the "
                  "kernel was built with ctg::no_adstack: remove ctg::no_adstack (the adstack keeps one "
                  "snapshot per iteration), make the loop a ctg::static_range, or restructure so the "
                  "loop's carried locals enter only linearly");
    static_assert(!unsized,
                  "CTG-AD-003 a nested loop whose trip count no launch can bound (a while_, or bounds "
                  "computed from locals) carries values the reverse pass needs: give the kernel "
                  "ctg::adstack_capacity<N> with N the most iterations such a loop runs per thread");
    if constexpr (!d1 && !unsized) run_reverse(args...);
  }

  // Forward mode: runs the kernel and propagates tangents from the inputs'
  // .dual() into the outputs' .dual().
  template <class... A>
  void fwd(A const&... args) const {
    launch<cpu::tangent_pass>(args...);
  }

  F const& body() const { return body_; }

  // The lowered IR for arguments of these types (for tests and tools).
  template <class... A>
  auto ir(A const&... args) const {
    return ir_for(std::index_sequence_for<A...>{}, args...);
  }

 private:
  template <std::size_t... Is, class... A>
  auto ir_for(std::index_sequence<Is...>, A const&... args) const {
    return ir::build_kernel_ir(body_, ir::arg_traits<int(Is), std::remove_cvref_t<A>>::handle(args)...);
  }

  // Under a tape the adjoint is replayed later; a kernel whose reverse cannot
  // be built raises then (the same ID k.grad reports at compile time).
  template <class... A>
  void record_on(tape& t, A const&... args) const {
    (note(t, args), ...);
    using kir_t = decltype(ir(args...));
    using args_t = decltype(bind(std::index_sequence_for<A...>{}, args...));
    using summary = reverse_summary<args_t, decltype(kir_t::offloads), kir_t::slots>;
    using opts = kernel_options<Options...>;
    if constexpr (opts::no_adstack && summary::uses_stack) {
      t.record([] {
        throw autodiff_error("kernel '" + std::string(Name.view()) +
                             "': CTG-AD-001 a nested loop needs the adstack but the kernel has ctg::no_adstack");
      });
    } else if constexpr (!opts::no_adstack && summary::unbounded && opts::capacity < 0) {
      t.record([] {
        throw autodiff_error("kernel '" + std::string(Name.view()) +
                             "': CTG-AD-003 a nested loop's trip count cannot be bounded: add ctg::adstack_capacity<N>");
      });
    } else {
      t.record([self = *this, captured = std::make_tuple(args...)] {
        std::apply([&](auto const&... a) { self.run_reverse(a...); }, captured);
      });
    }
  }
  template <class X>
  static void note(tape& t, X const& x) {
    if constexpr (is_field_v<X>) t.note_field(x);
  }

  template <class... A>
  void run_reverse(A const&... args) const {
    memory_space const space = detail::launch_space(Name.view(), args...);
    auto kir = ir(args...);
    auto bound = bind(std::index_sequence_for<A...>{}, args...);
    eval::launch_status status{};
    constexpr int slots = decltype(kir)::slots;
    constexpr std::size_t count = decltype(kir.offloads)::size;
    if (space != memory_space::host)
      throw launch_error("kernel '" + std::string(Name.view()) +
                         "': device fields need the CUDA backend (build with CTGRAD_CUDA and nvcc)");
    // Offloads run in reverse order; each one's adjoint reads the gradients
    // the later ones left.
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (reverse_one<slots>(detail::get<count - 1 - Is>(kir.offloads), bound, status, args...), ...);
    }(std::make_index_sequence<count>{});
    raise(status, args...);
  }

  template <int Slots, class Offload, class Bound, class... A>
  void reverse_one(Offload const& o, Bound const& bound, eval::launch_status& status, A const&... args) const {
    raise(status, args...);
    std::string unsized;
    auto report = cpu::run_reverse_offload<Slots>(o, bound, status, kernel_options<Options...>::capacity, unsized);
    if (!unsized.empty())
      throw autodiff_error("kernel '" + std::string(Name.view()) + "': cannot size the adstack for the " + unsized +
                           ": its trip count is not known at launch; give the kernel ctg::adstack_capacity<N>");
    if (report.site >= 0) {
      std::string where;
      using root = typename ad::offload_parts<Offload>::body;
      ad::describe_site(static_cast<root const*>(nullptr), report.site, ad::offload_parts<Offload>::body_level, "",
                        where);
      throw autodiff_error("kernel '" + std::string(Name.view()) + "': adstack overflow in the " + where +
                           ": a thread needed " + std::to_string(report.required) + " bytes, " +
                           std::to_string(report.available) +
                           " were available; raise ctg::adstack_capacity<N> (N = iterations per loop)");
    }
  }

  template <class Pass, class... A>
  void launch(A const&... args) const {
    memory_space const space = detail::launch_space(Name.view(), args...);
    auto kir = ir(args...);
    auto bound = bind(std::index_sequence_for<A...>{}, args...);
    eval::launch_status status{};
    if (space == memory_space::host) {
      constexpr int slots = decltype(kir)::slots;
      detail::apply([&](auto const&... offload) { (cpu::run_offload<slots, Pass>(offload, bound, status), ...); },
                    kir.offloads);
    } else {
      throw launch_error("kernel '" + std::string(Name.view()) +
                         "': device fields need the CUDA backend (build with CTGRAD_CUDA and nvcc)");
    }
    raise(status, args...);
  }

  template <std::size_t... Is, class... A>
  static auto bind(std::index_sequence<Is...>, A const&... args) {
    return detail::make_tuple(ir::arg_traits<int(Is), std::remove_cvref_t<A>>::bind(args)...);
  }

  template <class... A>
  static void raise(eval::launch_status const& s, A const&... args) {
    if (s.failed == int(eval::failure::index_out_of_range)) {
      std::string idx = "(";
      for (int k = 0; k < s.rank; ++k) idx += (k ? ", " : "") + std::to_string(s.index[k]);
      idx += ")";
      throw index_error("kernel '" + std::string(Name.view()) + "': index " + idx + " is out of range for " +
                        detail::describe_param(s.param, args...));
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
