// ctg::mpi::grid: the ranks a decomposed field is split over, and how a
// global extent is cut into one block of rows per rank.
//
// The grid is a one-dimensional Cartesian grid of ranks along axis 0 of the
// fields: rank r owns the rows [lo(r), hi(r)) of every field decomposed over
// it, the extent cut as evenly as it goes (the first n % P ranks one row
// more). It works on its own duplicate of the communicator, with
// MPI_ERRORS_RETURN: an MPI failure is an exception naming what failed, the
// field and the rank (CTG-MPI-006), not an abort.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "../errors.hpp"

namespace ctg::mpi {

// An MPI call failed, or ranks disagree about a collective step; the message
// names the rank.
struct mpi_error : error {
  using error::error;
};

class grid {
 public:
  // Every rank of `comm` calls this (it duplicates the communicator).
  explicit grid(MPI_Comm comm = MPI_COMM_WORLD) : state_(std::make_shared<state>()) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw mpi_error("CTG-MPI-006 ctg::mpi::grid: MPI is not initialised; call MPI_Init before building a grid");
    if (comm == MPI_COMM_NULL) throw mpi_error("CTG-MPI-006 ctg::mpi::grid: the communicator is MPI_COMM_NULL");
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    state_->rank = world_rank;
    check(MPI_Comm_dup(comm, &state_->comm), "MPI_Comm_dup", "", "");
    check(MPI_Comm_set_errhandler(state_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", "", "");
    check(MPI_Comm_rank(state_->comm, &state_->rank), "MPI_Comm_rank", "", "");
    check(MPI_Comm_size(state_->comm, &state_->size), "MPI_Comm_size", "", "");
  }

  int rank() const { return state_->rank; }
  int size() const { return state_->size; }
  MPI_Comm comm() const { return state_->comm; }
  // Whether two grids are the same communicator (fields of one launch must be).
  bool same_as(grid const& other) const { return state_ == other.state_; }

  // The rows of a global extent `n` that rank `r` owns: [lo, hi).
  static int lo(int n, int parts, int r) { return r * (n / parts) + (r < n % parts ? r : n % parts); }
  int lo(int n, int r) const { return lo(n, size(), r); }
  int hi(int n, int r) const { return lo(n, r + 1); }

  // Turns an MPI return code into an exception naming the call, the kernel
  // or step, the field and this rank, with MPI's own message.
  void check(int rc, char const* call, std::string const& step, std::string const& field) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    std::string where;
    if (!step.empty()) where += " in " + step;
    if (!field.empty()) where += " on field '" + field + "'";
    throw mpi_error("CTG-MPI-006 " + std::string(call) + " failed" + where + " on rank " + std::to_string(rank()) +
                    ": " + std::string(text, std::size_t(length)));
  }

 private:
  struct state {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0;
    int size = 1;
    state() = default;
    state(state const&) = delete;
    state& operator=(state const&) = delete;
    ~state() {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
    }
  };
  std::shared_ptr<state> state_;
};

}  // namespace ctg::mpi
