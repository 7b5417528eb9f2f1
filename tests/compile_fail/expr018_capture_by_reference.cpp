// CTG-EXPR-018: a loop body that captures by reference ([&], the habit of
// host loops). ctgrad calls the body after the kernel's lambda has returned,
// so `scale` would be read from a dead stack frame: before this check the
// kernel compiled and wrote garbage. The control captures by value.
// expected-lines {{40}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  auto k = ctg::kernel<"scaled">([](auto x, auto y) {
    double const scale = 2.5;
#if defined(CTG_CONTROL)
    return ctg::range(x.size(), [=](auto i) { return y[i] = scale * x[i]; });
#else
    return ctg::range(x.size(), [&](auto i) { return y[i] = scale * x[i]; });
#endif
  });
  k(x, y);  // expected-error {{CTG-EXPR-018 a loop or let body captures by reference}}
}
