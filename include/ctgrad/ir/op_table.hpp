// The op table: one row per coefficient-wise unary math operation, its value
// and its derivative side by side. A row is the whole of a new operation:
// the IR's function object (ir/math.hpp), the kernel-language function
// ctg::NAME (ir/expr.hpp, lower/builders.hpp), its derivative rule for the
// adjoint and the tangent (ad/derivatives.hpp) and its place in the table-driven
// tests (tests/unit/math_op_table.cpp) are all generated from it.
//
// Columns: X(NAME, KIND, VALUE, DERIVATIVE)
//   NAME        the function's name, ctg::NAME in kernels
//   KIND        linear | nonlinear | none (ir::fn::grad_kind): nonlinear
//               operations keep their operand for the reverse pass; `none`
//               carries no gradient (piecewise constant), its derivative
//               column is never used
//   VALUE       f(x), an expression in the scalar `x` of type `S`
//   DERIVATIVE  f'(x), an expression in the same `x`
// Both expressions may call the functions CTG_IMPL_MATH_USING names,
// unqualified, so that the overloads for float, double and the device's
// math library are found alike.
//
// It includes only the choice of math library (vector_math.hpp, where
// CTG_IMPL_MATH_USING is defined): it is read by the IR and by the
// derivative rules, which sit on different levels of the layering.
#pragma once
#include "vector_math.hpp"

#define CTG_IMPL_UNARY_OP_TABLE(X)                                                \
  X(sin, nonlinear, sin(x), cos(x))                                               \
  X(cos, nonlinear, cos(x), -sin(x))                                              \
  X(tan, nonlinear, tan(x), S(1) + tan(x) * tan(x))                               \
  X(tanh, nonlinear, tanh(x), S(1) - tanh(x) * tanh(x))                           \
  X(sinh, nonlinear, sinh(x), cosh(x))                                            \
  X(cosh, nonlinear, cosh(x), sinh(x))                                            \
  X(asinh, nonlinear, asinh(x), S(1) / sqrt(x * x + S(1)))                        \
  X(atanh, nonlinear, atanh(x), S(1) / (S(1) - x * x))                            \
  X(asin, nonlinear, asin(x), S(1) / sqrt(S(1) - x * x))                          \
  X(acos, nonlinear, acos(x), S(-1) / sqrt(S(1) - x * x))                         \
  X(atan, nonlinear, atan(x), S(1) / (S(1) + x * x))                              \
  X(exp, nonlinear, exp(x), exp(x))                                               \
  X(expm1, nonlinear, expm1(x), exp(x))                                           \
  X(log, nonlinear, log(x), S(1) / x)                                             \
  X(log1p, nonlinear, log1p(x), S(1) / (S(1) + x))                                \
  X(exp2, nonlinear, exp2(x), S(0.69314718055994530942) * exp2(x))                \
  X(log2, nonlinear, log2(x), S(1.4426950408889634074) / x)                       \
  X(log10, nonlinear, log10(x), S(0.43429448190325182765) / x)                    \
  X(erf, nonlinear, erf(x), S(1.1283791670955125739) * exp(-(x * x)))             \
  X(sqrt, nonlinear, sqrt(x), S(0.5) / sqrt(x))                                   \
  X(rsqrt, nonlinear, S(1) / sqrt(x), S(-0.5) / (x * sqrt(x)))                    \
  X(cbrt, nonlinear, cbrt(x), S(1) / (S(3) * cbrt(x) * cbrt(x)))                  \
  X(abs, nonlinear, abs(x), S((S(0) < x) - (x < S(0))))                           \
  X(floor, none, floor(x), S(0))                                                  \
  X(ceil, none, ceil(x), S(0))                                                    \
  X(round, none, round(x), S(0))                                                  \
  X(trunc, none, trunc(x), S(0))                                                  \
  X(sign, none, S((S(0) < x) - (x < S(0))), S(0))
