// CTG-EXPR-007: f[i] on a rank-2 field, inside a func. The control indexes
// it with two indices. The error comes at the first launch, naming the
// kernel, the field parameter and the func.
// expected-kernel {{rows}}
// expected-func {{first}}
// expected-parameter {{1}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1, ctg::grad> out(3);
  ctg::field<float, 2, ctg::grad> m(3, 3);
  auto first = ctg::func<"first">([](auto m, auto i) {
#if defined(CTG_CONTROL)
    return m(i, 0) * 2.0f;
#else
    return m[i] * 2.0f;
#endif
  });
  auto k = ctg::kernel<"rows">([=](auto out, auto m) {
    return ctg::range(out.size(), [=](auto i) { return out[i] = first(m, i); });
  });
  k(out, m);  // expected-error {{CTG-EXPR-007}}
  k.grad(out, m);
}
