// CTG-EXPR-002: ctg::select between a vector and a scalar, as a ternary
// `c ? v * s : 0.0` would be written in Python. The two values have no
// common type: the first error was std::common_type's, deep in the value
// types, without an ID. Now one error at the launch. The control writes
// the zero as a vector.
// expected-kernel {{scaled_where_positive}}
// expected-lines {{12}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<double, 1, ctg::grad> x(4);
  ctg::field<Eigen::Vector3d, 1, ctg::grad> v(4);
  auto k = ctg::kernel<"scaled_where_positive">([](auto x, auto v) {
    return ctg::range(x.size(), [=](auto i) {
#if defined(CTG_CONTROL)
      return v[i] = ctg::select(x[i] > 0.0, ctg::vec(1.0, 2.0, 3.0) * x[i], ctg::vec(0.0, 0.0, 0.0));
#else
      return v[i] = ctg::select(x[i] > 0.0, ctg::vec(1.0, 2.0, 3.0) * x[i], 0.0);
#endif
    });
  });
  k(x, v);  // expected-error {{CTG-EXPR-002 ctg::select}}
  k.grad(x, v);
}
