// CTG-EXPR-007: a rank-2 field indexed with one index. The control gives two.
// The error comes at the launch, naming the kernel and the field parameter.
// expected-kernel {{diag}}
// expected-parameter {{0}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 2> m(3, 3);
  auto k = ctg::kernel<"diag">([](auto m) {
#if defined(CTG_CONTROL)
    return ctg::range(3, [=](auto i) { return m(i, i) = 1.0f; });
#else
    return ctg::range(3, [=](auto i) { return m(i) = 1.0f; });
#endif
  });
  k(m);  // expected-error {{CTG-EXPR-007}}
}
