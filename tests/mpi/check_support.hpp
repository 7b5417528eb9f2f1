// What the MPI test programs share: failures counted per rank and printed
// with the rank, the relative difference of two gathered arrays, and the
// verdict over every rank.
#pragma once
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace mpi_test {

inline int failures = 0;
inline int rank_ = 0;

inline void expect(bool ok, char const* what, double value = 0, double bound = 0) {
  if (!ok) {
    ++failures;
    std::printf("FAIL (rank %d): %s (%.3g, bound %.3g)\n", rank_, what, value, bound);
  }
}
// max |a - b| / max |b|.
inline double relative(std::vector<double> const& a, std::vector<double> const& b) {
  double diff = 0, scale = 0;
  for (std::size_t k = 0; k < b.size(); ++k) {
    diff = std::max(diff, std::abs(a[k] - b[k]));
    scale = std::max(scale, std::abs(b[k]));
  }
  return a.size() == b.size() ? diff / scale : 1e300;
}
// Whether no rank of `comm` counted a failure.
inline bool passed_on_every_rank(MPI_Comm comm) {
  int any = failures;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, comm);
  return any == 0;
}

}  // namespace mpi_test
