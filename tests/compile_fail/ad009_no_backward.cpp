// CTG-AD-009: a gradient flows through a custom-gradient functor without a
// backward. The control gives it one.
// expected-kernel {{clip}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

struct clipped {
  template <class T>
  CTG_HOST_DEVICE T forward(T x) const {
    return x < T(1) ? x : T(1);
  }
#if defined(CTG_CONTROL)
  template <class T>
  CTG_HOST_DEVICE T backward(T x, T g) const {
    return x < T(1) ? g : T(0);
  }
#endif
};

int main() {
  ctg::field<float, 1, ctg::grad> x(4), y(4);
  auto clip = ctg::custom_gradient<"clipped">(clipped{});
  auto k = ctg::kernel<"clip">([=](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = clip(x[i]) * 2.0f; }); });
  k(x, y);
  k.grad(x, y);  // expected-error {{CTG-AD-009}}
}
