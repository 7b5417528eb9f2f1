// The adstack: per-thread storage for the values a nested loop must give back
// to the reverse pass, one snapshot of its carried locals per iteration, last
// in first out. Sized at launch; an overflow is always detected: the thread
// keeps counting what it would have needed, stops storing, and the launcher
// raises ctg::autodiff_error with the required and available sizes.
#pragma once
#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace ctg::ad {

struct adstack {
  unsigned char* base = nullptr;
  std::int64_t capacity = 0;  // bytes
  std::int64_t top = 0;       // bytes in use (may exceed capacity after an overflow)
  std::int64_t high = 0;      // the most bytes ever in use
  int overflow_site = -1;     // the loop whose push did not fit

  CTG_HOST_DEVICE bool overflowed() const { return overflow_site >= 0; }

  template <class T>
  CTG_HOST_DEVICE void push(T const& v, int site) {
    std::int64_t const n = std::int64_t(sizeof(T));
    if (top + n <= capacity) {
      memcpy(base + top, static_cast<void const*>(&v), sizeof(T));
    } else if (overflow_site < 0) {
      overflow_site = site;
    }
    top += n;
    if (top > high) high = top;
  }
  template <class T>
  CTG_HOST_DEVICE void pop(T& v) {
    std::int64_t const n = std::int64_t(sizeof(T));
    top -= n;
    if (top >= 0 && top + n <= capacity) memcpy(static_cast<void*>(&v), base + top, sizeof(T));
  }
};

}  // namespace ctg::ad
