// One kernel that both vector-math test translation units launch: built
// with CTG_VECTOR_MATH in vector_math.cpp and without it in
// vector_math_scalar.cpp, it must stay two instantiations.
#pragma once
#include <ctgrad/ctgrad.hpp>
#include <type_traits>
#include <vector>

namespace vector_math_test {

inline auto shared_sine = ctg::kernel<"shared_sine">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]); });
});

// sin of each input, by shared_sine, in the translation unit of each name.
std::vector<double> sines_with_vector_math(std::vector<double> const& x);
std::vector<double> sines_without_vector_math(std::vector<double> const& x);

// Internal to each translation unit: an inline function of the program's
// own that launches a kernel is one function for the linker, whatever
// setting each translation unit saw (as with any configuration macro).
namespace {
template <class T>
std::vector<double> run_shared_sine(std::vector<double> const& x) {
  int const n = int(x.size());
  ctg::field<T, 1> in({n}, {.name = "x"}), out({n}, {.name = "y"});
  for (int i = 0; i < n; ++i) in.at(i) = T(x[std::size_t(i)]);
  // Through a pointer the optimiser cannot see through, so that the launch
  // runs the out-of-line function the linker kept under its name, not a
  // copy inlined here.
  using kernel_type = std::remove_cvref_t<decltype(shared_sine)>;
  using field_type = ctg::field<T, 1>;
  void (kernel_type::*volatile launch)(field_type const&, field_type const&) const =
      &kernel_type::template operator()<field_type, field_type>;
  (shared_sine.*launch)(in, out);
  std::vector<double> y(x.size());
  for (int i = 0; i < n; ++i) y[std::size_t(i)] = double(out.at(i));
  return y;
}
}  // namespace

}  // namespace vector_math_test
