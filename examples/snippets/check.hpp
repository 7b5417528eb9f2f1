// The documentation snippets verify what they show: check() prints a message
// and ends the program with exit code 1 when a claim does not hold, so that
// CTest fails. Not part of any snippet text.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>

inline void check(bool ok, char const* what) {
  if (!ok) {
    std::fprintf(stderr, "snippet check failed: %s\n", what);
    std::exit(1);
  }
}

inline bool close(double a, double b, double tol = 1e-9) { return std::abs(a - b) <= tol * (1 + std::abs(b)); }
