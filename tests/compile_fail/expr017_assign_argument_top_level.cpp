// CTG-EXPR-017 at a kernel's top level, outside every loop, where a func's
// arguments are passed as written: the assignment still reaches nothing
// (the element load is a value), so it is the same error, not a statement
// that silently does nothing. The control stores through the field.
// expected-kernel {{first_only}}
// expected-func {{scale}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

using namespace ctg::literals;

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
#if defined(CTG_CONTROL)
  auto scale = ctg::func<"scale">([](auto y, auto v) { return y[0_c] = y[0_c] * ctg::tanh(v); });
  auto k = ctg::kernel<"first_only">([=](auto x, auto y) { return ctg::block(y[1_c] = 2.0, scale(y, x[0_c])); });
#else
  auto scale = ctg::func<"scale">([](auto e, auto v) { return e = e * ctg::tanh(v); });
  auto k = ctg::kernel<"first_only">([=](auto x, auto y) { return ctg::block(y[1_c] = 2.0, scale(y[0_c], x[0_c])); });
#endif
  k(x, y);  // expected-error {{CTG-EXPR-017 assignment to a value}}
}
