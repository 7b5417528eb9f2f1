// CTG-EXPR-003: % with a floating-point operand. The control takes C's
// floating-point remainder, ctg::fmod.
// expected-lines {{44}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1> x(8), y(8);
  auto k = ctg::kernel<"wrap">([](auto x, auto y) {
#if defined(CTG_CONTROL)
    return ctg::range(8, [=](auto i) { return y[i] = ctg::fmod(x[i], 2.5); });
#else
    return ctg::range(8, [=](auto i) { return y[i] = x[i] % 2.5; });  // expected-error {{CTG-EXPR-003}}
#endif
  });
  k(x, y);
}
