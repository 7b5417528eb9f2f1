// Atomic read-modify-write on field elements, for the host (std::atomic_ref)
// and the device (atomicAdd and compare-and-swap loops).
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "../config.hpp"
#include "../element.hpp"

namespace ctg::backend {

#if CTG_DEVICE_PASS
template <class T>
CTG_DEVICE void device_atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int> ||
                std::is_same_v<T, unsigned>) {
    atomicAdd(p, v);
  } else if constexpr (sizeof(T) == 8 && std::is_integral_v<T>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomic add on the device takes 32- or 64-bit values");
  }
}

// Compare-and-swap loop for min/max on any 32- or 64-bit type.
template <class T, class Pick>
CTG_DEVICE void device_atomic_cas(T* p, T v, Pick pick) {
  using U = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
  U* up = reinterpret_cast<U*>(p);
  U old = *up, assumed;
  do {
    assumed = old;
    T current;
    memcpy(&current, &assumed, sizeof(T));
    T next = pick(current, v);
    if (!(next != current)) return;
    U next_bits;
    memcpy(&next_bits, &next, sizeof(T));
    old = atomicCAS(up, assumed, next_bits);
  } while (assumed != old);
}
#endif

template <class T>
CTG_HOST_DEVICE void atomic_add_scalar(T* p, T v) {
#if CTG_DEVICE_PASS
  device_atomic_add(p, v);
#else
  std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed);
#endif
}

template <class T, class Pick>
CTG_HOST_DEVICE void atomic_pick_scalar(T* p, T v, Pick pick) {
#if CTG_DEVICE_PASS
  device_atomic_cas(p, v, pick);
#else
  std::atomic_ref<T> ref(*p);
  T current = ref.load(std::memory_order_relaxed);
  for (;;) {
    T next = pick(current, v);
    if (!(next != current)) return;
    if (ref.compare_exchange_weak(current, next, std::memory_order_relaxed)) return;
  }
#endif
}

struct pick_min {
  template <class T>
  CTG_HOST_DEVICE T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};
struct pick_max {
  template <class T>
  CTG_HOST_DEVICE T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};

// *p += v for scalars and, coefficient by coefficient, for Eigen matrices.
template <class T>
CTG_HOST_DEVICE void atomic_add(T* p, T const& v) {
  if constexpr (is_eigen_fixed_v<T>) {
    using S = typename T::Scalar;
    S* base = p->data();
    CTG_UNROLL
    for (int k = 0; k < int(T::SizeAtCompileTime); ++k) atomic_add_scalar<S>(base + k, v.coeff(k));
  } else {
    atomic_add_scalar<T>(p, v);
  }
}

template <class T>
CTG_HOST_DEVICE void atomic_min(T* p, T const& v) {
  static_assert(std::is_arithmetic_v<T>, "CTG-EXPR-012 atomic_min takes scalar field elements");
  atomic_pick_scalar(p, v, pick_min{});
}
template <class T>
CTG_HOST_DEVICE void atomic_max(T* p, T const& v) {
  static_assert(std::is_arithmetic_v<T>, "CTG-EXPR-012 atomic_max takes scalar field elements");
  atomic_pick_scalar(p, v, pick_max{});
}

}  // namespace ctg::backend
