// CTG-EXPR-020: a store as a let's initial value, meaning "a local that is
// x[i], and y[i] set to it". The local's type was void: 311 lines of errors
// from the checks and the evaluators, none with an ID; now one error at
// the launch. The control starts the local from x[i] and writes y[i] as a
// statement.
// expected-kernel {{copy_then_square}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4), y(4), z(4);
  auto k = ctg::kernel<"copy_then_square">([](auto x, auto y, auto z) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return ctg::let(x[i], [=](auto v) { return ctg::block(y[i] = v, z[i] = v * v); });
#else
      return ctg::let(y[i] = x[i], [=](auto v) { return z[i] = v * v; });
#endif
    });
  });
  k(x, y, z);  // expected-error {{CTG-EXPR-020 a statement}}
  k.grad(x, y, z);
}
