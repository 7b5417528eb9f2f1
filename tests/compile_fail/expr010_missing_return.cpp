// CTG-EXPR-010: a loop body that forgets `return` (it builds its store and
// drops it). One error at the launch with the ID, the kernel and the fix, no
// cascade and no warning before it. The control returns the statement.
// expected-kernel {{fill_ones}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1> a({4}, {.name = "a"});
  auto k = ctg::kernel<"fill_ones">([](auto a) {
#if defined(CTG_CONTROL)
    return ctg::range(a.size(), [=](auto i) { return a[i] = 1.0; });
#else
    return ctg::range(a.size(), [=](auto i) { a[i] = 1.0; });
#endif
  });
  k(a);  // expected-error {{CTG-EXPR-010 a loop body returns nothing}}
}
