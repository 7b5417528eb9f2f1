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

template <detail::fixed_string Name, class F, class... Options>
class kernel_t {
 public:
  static constexpr auto name = Name;

  constexpr explicit kernel_t(F body) : body_(body) {}

  // Runs the kernel forward.
  template <class... A>
  void operator()(A const&... args) const {
    launch<cpu::forward_pass>(args...);
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
