// D3 with an accumulation: loss() = x[1] * b(); b() += 100 — the adjoint
// would read b as 110 instead of 10. The control leaves b alone.
// expected-kernel {{gdar}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 1, ctg::grad> x(2);
  ctg::field<float, 0, ctg::grad> b, loss;
  auto k = ctg::kernel<"gdar">([](auto x, auto b, auto loss) {
#if defined(CTG_CONTROL)
    return loss() = x[1] * b();
#else
    return ctg::block(loss() = x[1] * b(), b() += 100.0f);
#endif
  });
  k(x, b, loss);
  k.grad(x, b, loss);  // expected-error {{CTG-AD-004}}
}
