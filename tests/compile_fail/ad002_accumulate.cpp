// D2 on an accumulating destination: out[i] += out[i - 1] * x() at the
// offload-level loop. The control runs the iterations in order.
// expected-kernel {{chain}}
// expected-parameter {{1}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 0, ctg::grad> x;
  ctg::field<float, 1, ctg::grad> out(8);
  auto k = ctg::kernel<"chain">([](auto x, auto out) {
#if defined(CTG_CONTROL)
    return ctg::serial_range(1, 8, [=](auto i) { return out[i] += out[i - 1] * x(); });
#else
    return ctg::range(1, 8, [=](auto i) { return out[i] += out[i - 1] * x(); });
#endif
  });
  k(x, out);
  k.grad(x, out);  // expected-error {{CTG-AD-002}}
}
