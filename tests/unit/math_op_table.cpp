// Every row of the op table (ir/op_table.hpp) checked on its own: the
// adjoint and the tangent of y = f(x) against central differences of the
// row's value column, so that a new row is tested by being written. Rows of
// kind `none` carry no gradient at all.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

using doctest::Approx;

namespace {

// One row of the fields per operation, in table order; a last identity row
// closes the generated block.
enum table_row : int {
#define CTG_TEST_ROW(NAME, KIND, VALUE, DERIVATIVE) row_##NAME,
  CTG_IMPL_UNARY_OP_TABLE(CTG_TEST_ROW)
#undef CTG_TEST_ROW
  row_count
};

struct row_info {
  char const* name;
  ctg::ir::fn::grad_kind kind;
  double (*value)(double);
};
row_info const rows[] = {
#define CTG_TEST_ROW(NAME, KIND, VALUE, DERIVATIVE)                               \
  {#NAME, ctg::ir::fn::grad_kind::KIND, [](double x) {                          \
     using S [[maybe_unused]] = double;                                         \
     CTG_IMPL_MATH_USING;                                                       \
     return double(VALUE);                                                      \
   }},
    CTG_IMPL_UNARY_OP_TABLE(CTG_TEST_ROW)
#undef CTG_TEST_ROW
};

// Points inside every row's domain (asin, acos: |x| < 1; log, sqrt, rsqrt:
// x > 0) and away from the jumps of floor, ceil, round and sign.
constexpr int points = 6;
double point(int j) { return 0.17 + 0.11 * j; }

constexpr ctg::flags both = ctg::grad | ctg::dual;

auto table_kernel() {
  return ctg::kernel<"op_table">([](auto x, auto y) {
    return ctg::range(y.shape(ctg::c<1>), [=](auto j) {
      return ctg::block(
#define CTG_TEST_ROW(NAME, KIND, VALUE, DERIVATIVE) y(ctg::c<row_##NAME>, j) = ctg::NAME(x(ctg::c<row_##NAME>, j)),
          CTG_IMPL_UNARY_OP_TABLE(CTG_TEST_ROW)
#undef CTG_TEST_ROW
              y(ctg::c<row_count>, j) = x(ctg::c<row_count>, j));
    });
  });
}

double central_difference(double (*f)(double), double x, double h = 1e-6) { return (f(x + h) - f(x - h)) / (2 * h); }

}  // namespace

TEST_CASE("op table: every row's adjoint and tangent match central differences of its value") {
  ctg::field<double, 2, both> x({row_count + 1, points}, {.name = "x"}), y({row_count + 1, points}, {.name = "y"});
  for (int r = 0; r <= row_count; ++r)
    for (int j = 0; j < points; ++j) x.at(r, j) = point(j);
  auto k = table_kernel();

  x.dual().fill(1.0);
  k.fwd(x, y);
  y.grad().fill(1.0);
  k.grad(x, y);

  for (int r = 0; r < row_count; ++r) {
    for (int j = 0; j < points; ++j) {
      CAPTURE(rows[r].name);
      CAPTURE(point(j));
      CHECK(y.at(r, j) == Approx(rows[r].value(point(j))).epsilon(1e-15));
      double const want = rows[r].kind == ctg::ir::fn::grad_kind::none ? 0.0 : central_difference(rows[r].value, point(j));
      CHECK(x.grad().at(r, j) == Approx(want).epsilon(1e-7).scale(1.0));
      CHECK(y.dual().at(r, j) == Approx(want).epsilon(1e-7).scale(1.0));
    }
  }
}

TEST_CASE("log1p, expm1 and erf: full precision near zero, closed-form derivatives") {
  ctg::field<double, 1, ctg::grad> x({3}, {.name = "x"}), y({3}, {.name = "y"});
  double const tiny = 1e-12, e = 0.8;
  x.at(0) = tiny;
  x.at(1) = tiny;
  x.at(2) = e;
  auto k = ctg::kernel<"near_zero">([](auto x, auto y) {
    return ctg::block(y[0] = ctg::log1p(x[0]), y[1] = ctg::expm1(x[1]), y[2] = ctg::erf(x[2]));
  });
  k(x, y);
  // Series: log1p(t) = t - t^2/2 + ..., expm1(t) = t + t^2/2 + ...; log(1 + t)
  // would lose four digits of t here.
  CHECK(y.at(0) == Approx(tiny - tiny * tiny / 2).epsilon(1e-15));
  CHECK(y.at(1) == Approx(tiny + tiny * tiny / 2).epsilon(1e-15));
  y.grad().fill(1.0);
  k.grad(x, y);
  double const pi = 3.14159265358979323846;
  CHECK(x.grad().at(0) == Approx(1.0 / (1.0 + tiny)).epsilon(1e-15));
  CHECK(x.grad().at(1) == Approx(std::exp(tiny)).epsilon(1e-15));
  CHECK(x.grad().at(2) == Approx(2.0 / std::sqrt(pi) * std::exp(-e * e)).epsilon(1e-14));
}
