// Turning the first finding of a report into one compile error. The culprit
// travels in the instantiated type, which every compiler prints with the
// error: the kernel's name, the field parameter and the func, e.g.
//   ctg::diagnostic<ctg::finding::cross_iteration_raw,
//                   ctg::where<"fwd", 1, "body">>
#pragma once
#include "../detail/fixed_string.hpp"
#include "../detail/meta.hpp"
#include "../ir/node.hpp"
#include "messages.hpp"
#include "rules.hpp"

namespace ctg {

// Where a finding sits: kernel, field parameter (-1: none), func ("": none),
// the names as character packs so that every compiler prints them as text.
template <class Kernel, int Param, class Func>
struct where {};

template <finding F, class Where>
struct diagnostic {
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::nested_loop_needs_adstack, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_001);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::cross_iteration_raw, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_002);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::adstack_unsized, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_003);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::overwritten_after_read, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_004);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::atomic_extremum_on_gradient, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_008);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::no_derivative_rule, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_009);
  static constexpr bool raised = true;
};
template <class W>
struct diagnostic<finding::gradient_buffer_read, W> {
  static_assert(detail::dependent_false<W>, CTG_IMPL_MSG_AD_011);
  static constexpr bool raised = true;
};

// The diagnostic type for the first finding of a constexpr report;
// instantiating it fails the build with that finding's message.
template <detail::fixed_string Kernel, report const& R>
struct first_diagnostic {
  static constexpr auto first = R.items[0];
  static constexpr auto func = detail::fixed_string<detail::length(first.func) + 1>::from(first.func);
  using type = diagnostic<first.what, where<ir::func_name<Kernel>, first.param, ir::func_name<func>>>;
};

}  // namespace ctg
