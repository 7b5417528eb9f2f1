// What a field may hold, and the scalar underneath each element type.
#pragma once
#include <Eigen/Core>

#include "config.hpp"
#include <cstdint>
#include <type_traits>

namespace ctg {

template <class T>
struct is_eigen_fixed : std::false_type {};
template <class S, int R, int C, int O, int MR, int MC>
struct is_eigen_fixed<Eigen::Matrix<S, R, C, O, MR, MC>>
    : std::bool_constant<(R > 0 && C > 0)> {};
template <class T>
inline constexpr bool is_eigen_fixed_v = is_eigen_fixed<std::remove_cvref_t<T>>::value;

namespace detail {
template <class T, bool = is_eigen_fixed_v<T>>
struct scalar_of_impl {
  using type = T;
};
template <class T>
struct scalar_of_impl<T, true> {
  using type = typename T::Scalar;
};
}  // namespace detail

// The scalar of an element: T itself for arithmetic types, the coefficient type
// of an Eigen matrix.
template <class T>
using scalar_of_t = typename detail::scalar_of_impl<std::remove_cvref_t<T>>::type;

// Element types a field accepts: arithmetic scalars and fixed-size Eigen
// matrices of arithmetic scalars.
template <class T>
inline constexpr bool is_element_type_v =
    (std::is_arithmetic_v<T> && !std::is_const_v<T>) ||
    (is_eigen_fixed_v<T> && std::is_arithmetic_v<scalar_of_t<T>>);

// Whether values of T can carry a gradient or a tangent.
template <class T>
inline constexpr bool is_differentiable_v = std::is_floating_point_v<scalar_of_t<T>>;

// Number of scalar coefficients in one element.
template <class T>
inline constexpr int coefficients_v = [] {
  if constexpr (is_eigen_fixed_v<T>)
    return int(T::SizeAtCompileTime);
  else
    return 1;
}();

// The zero of an element type (Eigen's default constructor leaves
// coefficients uninitialised, so T{} is not zero for matrices).
template <class T>
CTG_HOST_DEVICE constexpr T zero_of() {
  if constexpr (is_eigen_fixed_v<T>)
    return T::Zero();
  else
    return T(0);
}

// An element read from memory, coefficient by coefficient. Copying an Eigen
// fixed-size matrix copies its storage as a block, which GCC moves in the
// widest pieces it can (8 + 4 bytes for a Vector3f); when the element was
// just written coefficient by coefficient, as an adjoint accumulates into a
// gradient or a statement stores a vector that the next one reads, those
// wide loads cannot take their bytes from the narrow stores still in flight
// and wait for them to reach the cache (a store-forwarding stall on x86, about
// a dozen cycles each). Loads as narrow as the stores do not wait.
template <class T>
CTG_HOST_DEVICE T load_element(T const* p) {
  if constexpr (is_eigen_fixed_v<T>) {
    T out;
    for (int c = 0; c < int(T::SizeAtCompileTime); ++c) out.coeffRef(c) = p->coeff(c);
    return out;
  } else {
    return *p;
  }
}

}  // namespace ctg
