// What the MPI test programs share: failures counted per rank and printed
// with the rank, the relative difference of two gathered arrays, the verdict
// over every rank, and the program around a test body.
#pragma once
#include <ctgrad/mpi/mpi.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>
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
// The exit status of a test program: 0 when no rank counted a failure.
// Rank 0 prints PASS or FAILED.
inline int verdict(MPI_Comm comm) {
  int const status = passed_on_every_rank(comm) ? 0 : 1;
  if (rank_ == 0) std::printf("%s\n", status == 0 ? "PASS" : "FAILED");
  return status;
}

// A test program: body(world) between MPI_Init and MPI_Finalize, over
// MPI_COMM_WORLD. Its exit status is the one body returns (77: skipped),
// or the verdict over every rank when body returns nothing.
template <class Body>
int run_on_world(int argc, char** argv, Body&& body) {
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    ctg::mpi::grid world;
    rank_ = world.rank();
    if constexpr (std::is_void_v<decltype(body(world))>) {
      body(world);
      status = verdict(world.comm());
    } else {
      status = body(world);
    }
  }
  MPI_Finalize();
  return status;
}

}  // namespace mpi_test
