// CTG-EXPR-020: a chained assignment, the C++ habit `a = b = value`. A
// kernel store is a statement and has no value, so the outer store had
// nothing to store: "invalid use of void expression" deep in the forward
// evaluator, without an ID; now one error at the launch. The control
// writes the two stores as two statements of a block.
// expected-kernel {{double_twice}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4), twice(4), out(4);
  auto k = ctg::kernel<"double_twice">([](auto x, auto twice, auto out) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return ctg::block(twice[i] = x[i] * 2.0, out[i] = x[i] * 2.0);
#else
      return out[i] = twice[i] = x[i] * 2.0;
#endif
    });
  });
  k(x, twice, out);  // expected-error {{CTG-EXPR-020 a statement}}
  k.grad(x, twice, out);
}
