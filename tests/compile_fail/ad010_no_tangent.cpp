// CTG-AD-010: forward mode through a custom-gradient functor without a
// tangent. The control gives it one.
// expected-kernel {{cube}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

struct cube {
  template <class T>
  CTG_HOST_DEVICE T forward(T x) const {
    return x * x * x;
  }
  template <class T>
  CTG_HOST_DEVICE T backward(T x, T g) const {
    return T(3) * x * x * g;
  }
#if defined(CTG_CONTROL)
  template <class T>
  CTG_HOST_DEVICE T tangent(T x, T dx) const {
    return T(3) * x * x * dx;
  }
#endif
};

int main() {
  ctg::field<float, 1, ctg::dual> x(4), y(4);
  auto c = ctg::custom_gradient<"cube">(cube{});
  auto k = ctg::kernel<"cube">([=](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = c(x[i]); }); });
  k.fwd(x, y);  // expected-error {{CTG-AD-010}}
}
