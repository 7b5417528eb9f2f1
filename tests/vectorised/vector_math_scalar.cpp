// The shared kernel without vector math (see vector_math.cpp).
#include "vector_math_kernel.hpp"

static_assert(!ctg::vector_math_enabled);

std::vector<double> vector_math_test::sines_without_vector_math(std::vector<double> const& x) {
  return run_shared_sine<double>(x);
}
