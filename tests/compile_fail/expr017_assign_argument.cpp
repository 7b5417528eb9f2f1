// CTG-EXPR-017: a func that assigns to its argument (a C++ habit: a
// reference parameter). Inside a loop the argument is a value, so the
// assignment could only change a copy; one error at the launch with the ID,
// the kernel, the func and the fix. The control passes the field and the
// index and stores into the element.
// expected-kernel {{damp}}
// expected-func {{scale}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
#if defined(CTG_CONTROL)
  auto scale = ctg::func<"scale">([](auto y, auto i, auto v) { return y[i] = y[i] * ctg::tanh(v); });
  auto k = ctg::kernel<"damp">([=](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return scale(y, i, x[i]); });
  });
#else
  auto scale = ctg::func<"scale">([](auto e, auto v) { return e = e * ctg::tanh(v); });
  auto k = ctg::kernel<"damp">([=](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return scale(y[i], x[i]); });
  });
#endif
  k(x, y);  // expected-error {{CTG-EXPR-017 assignment to a value}}
}
