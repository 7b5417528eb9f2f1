// The adstack: per-thread storage for the values a nested loop must give back
// to the reverse pass, one snapshot of its carried locals per iteration, last
// in first out. Sized at launch; an overflow is always detected: the thread
// keeps counting what it would have needed, stops storing, and the launcher
// raises ctg::autodiff_error with the required and available sizes.
//
// Storage is in 4-byte words. A thread's k-th word sits at base[k * stride]:
// on the CPU each thread has a contiguous slice (stride 1); on a GPU the
// threads' stacks are interleaved (stride = number of threads), so that the
// threads of a warp pushing their k-th word touch consecutive addresses.
#pragma once
#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace ctg::ad {

// Words a value of type T occupies on the adstack.
template <class T>
inline constexpr std::int64_t stack_words = std::int64_t((sizeof(T) + 3) / 4);

struct adstack {
  std::uint32_t* base = nullptr;
  std::int64_t stride = 1;    // words between a thread's consecutive words
  std::int64_t capacity = 0;  // words
  std::int64_t top = 0;       // words in use (may exceed capacity after an overflow)
  std::int64_t high = 0;      // the most words ever in use
  int overflow_site = -1;     // the loop whose push did not fit

  CTG_HOST_DEVICE bool overflowed() const { return overflow_site >= 0; }

  template <class T>
  CTG_HOST_DEVICE void push(T const& v, int site) {
    constexpr std::int64_t n = stack_words<T>;
    if (top + n <= capacity) {
      std::uint32_t w[n] = {};
      memcpy(static_cast<void*>(w), static_cast<void const*>(&v), sizeof(T));
      CTG_UNROLL
      for (std::int64_t k = 0; k < n; ++k) base[(top + k) * stride] = w[k];
    } else if (overflow_site < 0) {
      overflow_site = site;
    }
    top += n;
    if (top > high) high = top;
  }
  template <class T>
  CTG_HOST_DEVICE void pop(T& v) {
    constexpr std::int64_t n = stack_words<T>;
    top -= n;
    if (top >= 0 && top + n <= capacity) {
      std::uint32_t w[n];
      CTG_UNROLL
      for (std::int64_t k = 0; k < n; ++k) w[k] = base[(top + k) * stride];
      memcpy(static_cast<void*>(&v), static_cast<void const*>(w), sizeof(T));
    }
  }
};

}  // namespace ctg::ad
