// CTG-EXPR-010: a kernel lambda that forgets `return` (it builds its loop
// and drops it). One error with the ID, instead of g++'s "void top has
// incomplete type" inside the library. The control returns the loop. (g++
// prints 14 lines, clang 25; nvcc 205, its front end going on after the
// assert.)
// expected-lines {{210}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  auto k = ctg::kernel<"copy_over">([](auto x, auto y) {
#if defined(CTG_CONTROL)
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[i]; });
#else
    ctg::range(x.size(), [=](auto i) { return y[i] = x[i]; });
#endif
  });
  k(x, y);  // expected-error {{CTG-EXPR-010 a kernel lambda returns nothing}}
}
