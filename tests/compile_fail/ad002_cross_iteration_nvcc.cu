// D2 compiled by nvcc: the same single error as with g++ and clang. The
// control variant iterates with serial_range and compiles.
// expected-kernel {{fwd}}
// expected-func {{body}}
// expected-parameter {{1}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<float, 0, ctg::grad> x;
  ctg::field<float, 1, ctg::grad> out(4);
  ctg::field<int, 0> n_iter;
  auto body = ctg::func<"body">([](auto x, auto out, auto n_iter) {
#if defined(CTG_CONTROL)
    return ctg::serial_range(n_iter(), [=](auto i) {
#else
    return ctg::range(n_iter(), [=](auto i) {
#endif
      return ctg::if_(i == 0, out[i] = x(), out[i] = out[i - 1] + x());
    });
  });
  auto fwd = ctg::kernel<"fwd">([=](auto x, auto out, auto n_iter) { return body(x, out, n_iter); });
  fwd(x, out, n_iter);
  fwd.grad(x, out, n_iter);  // expected-error {{CTG-AD-002}}
}
