// Vectorised math for the CPU backend (opt-in: define CTG_VECTOR_MATH=1
// before including ctgrad, for the whole translation unit).
//
// A loop that calls sin or exp cannot be vectorised by the compiler unless
// it knows a vector version of the function. glibc ships them (libmvec: 2,
// 4, 8 or 16 lanes for SSE, AVX, AVX2 and AVX-512), and GCC calls them from
// a vectorised loop when the function is declared with the `simd`
// attribute; glibc's <math.h> declares them so only under -ffast-math,
// which also licenses reassociation a gradient must not have. Here each
// function is declared once more, under its own name and with the
// attribute, bound to the same symbol, so that kernels vectorise without
// -ffast-math and nothing else in the program changes.
//
// What it costs: libmvec's functions are accurate to 4 ulp (glibc's
// manual), the scalar ones to 1 ulp or better, and a launch mixes the two
// (the loop's remainder runs the scalar one); they never set errno. Kernels
// of a translation unit with and without it are distinct types (the op
// table's operations live in an inline namespace named after the setting),
// so two translation units built differently do not share instantiations.
//
// Where: GCC on x86-64 with glibc 2.22 or later (sin, cos, exp, log), 2.35
// or later for the rest of the op table's rows that libmvec has; not in
// CUDA translation units. Elsewhere the setting is accepted and does
// nothing; ctg::vector_math_enabled says which.
#pragma once
#include <cmath>
#include <string_view>

#if !defined(CTG_VECTOR_MATH)
#  define CTG_VECTOR_MATH 0
#endif

#if CTG_VECTOR_MATH && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && \
    defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 22))
#  define CTG_IMPL_VECTOR_MATH 1
#  if __GLIBC__ > 2 || __GLIBC_MINOR__ >= 35
#    define CTG_IMPL_VECTOR_MATH_ALL 1
#  else
#    define CTG_IMPL_VECTOR_MATH_ALL 0
#  endif
#else
#  define CTG_IMPL_VECTOR_MATH 0
#  define CTG_IMPL_VECTOR_MATH_ALL 0
#endif

namespace ctg {
// Whether kernels in this translation unit call libmvec's vector functions.
inline constexpr bool vector_math_enabled = CTG_IMPL_VECTOR_MATH != 0;
}  // namespace ctg

// The op table's functions libmvec has: since glibc 2.22, and since 2.35.
#define CTG_IMPL_VECTOR_FUNCTIONS_2_22(X) X(sin) X(cos) X(exp) X(log)
#define CTG_IMPL_VECTOR_FUNCTIONS_2_35(X)                                                                      \
  X(tan) X(tanh) X(asin) X(acos) X(atan) X(expm1) X(log1p) X(erf) X(sinh) X(cosh) X(asinh) X(atanh) X(exp2) \
  X(log2) X(log10) X(cbrt)
// The op table's functions that are std's in every mode.
#define CTG_IMPL_MATH_STD_ONLY std::sqrt, std::abs, std::floor, std::ceil, std::round, std::trunc
// The using-declarations of one function, std's or the vector one.
#define CTG_IMPL_USING_STD_NAME(NAME) using std::NAME;
#define CTG_IMPL_USING_VECTOR_NAME(NAME) using ::ctg::vector_math::NAME;

#if CTG_IMPL_VECTOR_MATH

// The two declarations of one function: float and double, each bound to
// glibc's symbol, with overloads in ctg::vector_math that the op table's
// expressions find as they find std::sin.
#  define CTG_IMPL_VECTOR_FUNCTION(NAME)                                                                   \
    extern "C" float ctg_impl_vector_##NAME##f(float) __asm__(#NAME "f")                                  \
        __attribute__((simd("notinbranch"), const, nothrow, leaf));                                       \
    extern "C" double ctg_impl_vector_##NAME(double) __asm__(#NAME)                                       \
        __attribute__((simd("notinbranch"), const, nothrow, leaf));                                       \
    namespace ctg::vector_math {                                                                          \
    inline float NAME(float x) { return ctg_impl_vector_##NAME##f(x); }                                   \
    inline double NAME(double x) { return ctg_impl_vector_##NAME(x); }                                    \
    /* any other type (integers, long double, a user's scalar): std's */                                  \
    template <class T>                                                                                    \
    auto NAME(T const& x) {                                                                               \
      using std::NAME;                                                                                    \
      return NAME(x);                                                                                     \
    }                                                                                                     \
    }

CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_VECTOR_FUNCTION)
#  if CTG_IMPL_VECTOR_MATH_ALL
CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_VECTOR_FUNCTION)
#  else
namespace ctg::vector_math {
CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_USING_STD_NAME)
}  // namespace ctg::vector_math
#  endif
#  undef CTG_IMPL_VECTOR_FUNCTION

namespace ctg::vector_math {
// Whether the op table's row `name` calls a vector function here (a loop
// calling it vectorises).
#  define CTG_IMPL_VECTOR_NAME_IS(NAME) || name == std::string_view(#NAME)
constexpr bool has_vector_version(std::string_view name) {
#  if CTG_IMPL_VECTOR_MATH_ALL
  return false CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_VECTOR_NAME_IS)
      CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_VECTOR_NAME_IS);
#  else
  return false CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_VECTOR_NAME_IS);
#  endif
}
#  undef CTG_IMPL_VECTOR_NAME_IS
}  // namespace ctg::vector_math

// What the op table's expressions call (op_table.hpp): the vector
// functions where libmvec has them, std's elsewhere.
#  if CTG_IMPL_VECTOR_MATH_ALL
#    define CTG_IMPL_MATH_USING                                                                            \
      CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_USING_VECTOR_NAME)                                           \
      CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_USING_VECTOR_NAME) using CTG_IMPL_MATH_STD_ONLY
#  else
#    define CTG_IMPL_MATH_USING                                                                            \
      CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_USING_VECTOR_NAME)                                           \
      CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_USING_STD_NAME) using CTG_IMPL_MATH_STD_ONLY
#  endif
#  define CTG_IMPL_MATH_ABI_BEGIN inline namespace vector_math_abi {
#  define CTG_IMPL_MATH_ABI_END }

#else

// Without the setting, the same names are std's functions, so that code
// calling them (a hand-written loop beside a kernel) builds either way.
namespace ctg::vector_math {
CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_USING_STD_NAME)
CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_USING_STD_NAME)
constexpr bool has_vector_version(std::string_view) { return false; }
}  // namespace ctg::vector_math

#  define CTG_IMPL_MATH_USING                                                                               \
    CTG_IMPL_VECTOR_FUNCTIONS_2_22(CTG_IMPL_USING_STD_NAME)                                                 \
    CTG_IMPL_VECTOR_FUNCTIONS_2_35(CTG_IMPL_USING_STD_NAME) using CTG_IMPL_MATH_STD_ONLY
#  define CTG_IMPL_MATH_ABI_BEGIN
#  define CTG_IMPL_MATH_ABI_END

#endif
