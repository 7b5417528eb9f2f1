// D1 (the seed's class 1): a nonlinear recurrence in a non-static range nested
// in the offload, routed through a func, in a kernel built without the
// adstack. The control keeps the adstack and compiles.
// expected-kernel {{compute}}
// expected-func {{inner}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

#if defined(CTG_CONTROL)
#  define OPTIONS
#else
#  define OPTIONS , ctg::no_adstack
#endif

int main() {
  ctg::field<float, 1, ctg::grad> x(4);
  ctg::field<float, 0, ctg::grad> y;
  ctg::field<int, 0> n_iter;
  auto inner = ctg::func<"inner">([](auto v_in, auto n_iter) {
    return ctg::let(v_in, [=](auto v) {
      return ctg::block(ctg::range(n_iter(), [=](auto) { return v = ctg::sin(v) * 0.95f + 0.01f; }), ctg::result(v));
    });
  });
  auto k = ctg::kernel<"compute" OPTIONS>([=](auto x, auto y, auto n_iter) {
    return ctg::range(x.size(), [=](auto i) { return y() += inner(x[i], n_iter); });
  });
  k(x, y, n_iter);
  k.grad(x, y, n_iter);  // expected-error {{CTG-AD-001}}
}
