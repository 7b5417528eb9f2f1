// CTG-AD-008: atomic_max on a field with a gradient. The control keeps the
// maximum in a field without one.
// expected-kernel {{top}}
// expected-parameter {{1}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1, ctg::grad> x(4);
#if defined(CTG_CONTROL)
  ctg::field<float, 0> top;
#else
  ctg::field<float, 0, ctg::grad> top;
#endif
  auto k = ctg::kernel<"top">([](auto x, auto top) { return ctg::range(4, [=](auto i) { return ctg::atomic_max(top(), x[i]); }); });
  k(x, top);
  k.grad(x, top);  // expected-error {{CTG-AD-008}}
}
