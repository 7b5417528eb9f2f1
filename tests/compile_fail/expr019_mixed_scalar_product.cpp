// CTG-EXPR-019: a float matrix field multiplied by a captured double Eigen
// constant. Eigen has no product of the two, and the error used to be
// Eigen's, dozens of lines without an ID. The control declares the constant
// with the field's scalar type; ctg::cast<Eigen::Matrix3f>(W) works too.
// expected-lines {{45}}
#include <ctgrad/ctgrad.hpp>

int main() {
  ctg::field<Eigen::Matrix3f, 1, ctg::grad> F(2), P(2);
#if defined(CTG_CONTROL)
  Eigen::Matrix3f const W = Eigen::Matrix3f::Identity() * 2.0f;
#else
  Eigen::Matrix3d const W = Eigen::Matrix3d::Identity() * 2.0;
#endif
  auto k = ctg::kernel<"stretch">([=](auto F, auto P) {
    return ctg::range(F.size(), [=](auto i) { return P[i] = W * F[i]; });
  });
  k(F, P);  // expected-error {{CTG-EXPR-019 matrix product of matrices of different scalar types}}
  k.grad(F, P);
}
