// CTG-AD-003: a while_ whose carried local the reverse pass needs, with no
// bound on its trip count. The control gives ctg::adstack_capacity<N>.
// expected-kernel {{grow}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

#if defined(CTG_CONTROL)
#  define OPTIONS , ctg::adstack_capacity<64>
#else
#  define OPTIONS
#endif

int main() {
  ctg::field<float, 1, ctg::grad> x(4), y(4);
  auto k = ctg::kernel<"grow" OPTIONS>([](auto x, auto y) {
    return ctg::range(4, [=](auto i) {
      return ctg::let(x[i], [=](auto v) { return ctg::block(ctg::while_(v < 10.0f, v = v * v + 1.0f), y[i] = v); });
    });
  });
  k(x, y);
  k.grad(x, y);  // expected-error {{CTG-AD-003}}
}
