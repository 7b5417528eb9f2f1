// CTG-EXPR-016: C++'s ?: on a kernel value (Python's `a if c else b`). One
// error with the ID and the fix; the control writes ctg::select.
// expected-lines {{40}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  auto k = ctg::kernel<"leaky">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return y[i] = ctg::select(x[i] > 0.0, 1.0 * x[i], 0.1 * x[i]);
#else
      return y[i] = x[i] > 0.0 ? 1.0 * x[i] : 0.1 * x[i];
#endif
    });
  });
  k(x, y);  // expected-error {{CTG-EXPR-016}}
}
