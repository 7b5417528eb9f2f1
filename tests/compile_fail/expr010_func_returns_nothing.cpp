// CTG-EXPR-010: a func whose lambda forgets `return`, the habit of a C++
// function that writes through its arguments. One error with the ID,
// instead of errors about a `void` body inside the library. The control
// returns the store.
// expected-lines {{45}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
#if defined(CTG_CONTROL)
  auto put = ctg::func<"put">([](auto out, auto i, auto v) { return out[i] = v; });
#else
  auto put = ctg::func<"put">([](auto out, auto i, auto v) { out[i] = v; });
#endif
  auto k = ctg::kernel<"put_all">([=](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return put(y, i, 2.0 * x[i]); });
  });
  k(x, y);  // expected-error {{CTG-EXPR-010 a func's lambda returns nothing}}
}
