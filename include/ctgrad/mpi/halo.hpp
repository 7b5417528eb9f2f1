// The communication steps of a decomposed simulation, each recorded on the
// active ctg::tape like a kernel launch, with its adjoint:
//
//   exchange(u)     ghost rows of u := the owners' values (MPI_Isend/Irecv).
//                   The tape sees a write of u (its version moves on, and a
//                   value an earlier adjoint needs is saved first). Adjoint:
//                   the ghost rows' gradients go back to their owners, are
//                   added there, and are cleared.
//   sum(g, loss)    a 0-d field := its sum over the ranks (MPI_Allreduce), the
//                   same on every rank. Adjoint: every rank's partial gets the
//                   loss's gradient (a broadcast from rank 0).
//
// Along axis 0 a ghost layer is whole rows, contiguous in the storage: the
// messages go straight from and into the field's host buffer. gather and
// copy_from_global move whole global fields between rank 0 and the blocks.
#pragma once
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "dfield.hpp"
#include "launch.hpp"

namespace ctg::mpi {
namespace detail {

template <class S>
MPI_Datatype datatype() {
  if constexpr (std::is_same_v<S, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<S, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<S, long double>)
    return MPI_LONG_DOUBLE;
  else
    static_assert(ctg::detail::dependent_false<S>, "CTG-MPI-008 sum() reduces float, double or long double values");
}

inline int message_count(std::int64_t bytes, grid const& g, std::string const& step, std::string const& field) {
  if (bytes > INT_MAX)
    throw mpi_error("CTG-MPI-006 " + step + " on field '" + field + "' on rank " + std::to_string(g.rank()) +
                    ": one message of " + std::to_string(bytes) + " bytes is more than MPI's int count allows");
  return int(bytes);
}

// The ghost rows of `buffer` (the primal values or the gradients), in one
// direction. Forward: send the first and last `ghost` owned rows to the
// neighbours, receive their rows into the ghost layers. Adjoint: send the
// ghost layers back, add what comes into the owned rows it came from, clear
// the ghost layers.
template <class T>
void transfer(decomposition& d, T* buffer, std::string const& name, bool adjoint) {
  grid const& g = d.g;
  int const rank = g.rank(), size = g.size();
  int const own = d.hi - d.lo, gw = d.ghost;
  std::int64_t const row_bytes = d.row_elements * std::int64_t(sizeof(T));
  std::int64_t const layer = std::int64_t(gw) * row_bytes;
  std::string const step = adjoint ? "the adjoint of ctg::mpi::exchange" : "ctg::mpi::exchange";
  if (gw == 0 || size == 1) {  // no neighbours: nothing to move
    ++(adjoint ? d.stats.adjoint_exchanges : d.stats.exchanges);
    return;
  }
  int const count = message_count(layer, g, step, name);
  auto* bytes = reinterpret_cast<unsigned char*>(buffer);
  auto rows = [&](int local_row) { return bytes + std::int64_t(local_row) * row_bytes; };
  bool const down = rank > 0, up = rank + 1 < size;
  // Tags name the layer on the receiving side: 1 its lower ghosts, 2 its upper.
  std::vector<MPI_Request> requests;
  requests.reserve(4);
  auto post = [&](int rc, char const* call) {
    g.check(rc, call, step, name);
  };
  std::vector<unsigned char> from_down, from_up;
  if (!adjoint) {
    if (down) {
      requests.emplace_back();
      post(MPI_Irecv(rows(0), count, MPI_BYTE, rank - 1, 1, g.comm(), &requests.back()), "MPI_Irecv");
    }
    if (up) {
      requests.emplace_back();
      post(MPI_Irecv(rows(gw + own), count, MPI_BYTE, rank + 1, 2, g.comm(), &requests.back()), "MPI_Irecv");
    }
    if (down) {
      requests.emplace_back();
      post(MPI_Isend(rows(gw), count, MPI_BYTE, rank - 1, 2, g.comm(), &requests.back()), "MPI_Isend");
    }
    if (up) {
      requests.emplace_back();
      post(MPI_Isend(rows(own), count, MPI_BYTE, rank + 1, 1, g.comm(), &requests.back()), "MPI_Isend");
    }
  } else {
    // The neighbours' ghost gradients land in staging buffers, then add.
    if (down) {
      from_down.resize(std::size_t(layer));
      requests.emplace_back();
      post(MPI_Irecv(from_down.data(), count, MPI_BYTE, rank - 1, 3, g.comm(), &requests.back()), "MPI_Irecv");
    }
    if (up) {
      from_up.resize(std::size_t(layer));
      requests.emplace_back();
      post(MPI_Irecv(from_up.data(), count, MPI_BYTE, rank + 1, 4, g.comm(), &requests.back()), "MPI_Irecv");
    }
    if (down) {  // my lower ghosts are rank - 1's last owned rows
      requests.emplace_back();
      post(MPI_Isend(rows(0), count, MPI_BYTE, rank - 1, 4, g.comm(), &requests.back()), "MPI_Isend");
    }
    if (up) {  // my upper ghosts are rank + 1's first owned rows
      requests.emplace_back();
      post(MPI_Isend(rows(gw + own), count, MPI_BYTE, rank + 1, 3, g.comm(), &requests.back()), "MPI_Isend");
    }
  }
  post(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  int const neighbours = int(down) + int(up);
  if (!adjoint) {
    ++d.stats.exchanges;
    d.stats.bytes_sent += neighbours * layer;
    d.stats.bytes_received += neighbours * layer;
    return;
  }
  using S = scalar_of_t<T>;
  std::int64_t const coefficients = std::int64_t(gw) * d.row_elements * coefficients_v<T>;
  auto add = [&](std::vector<unsigned char> const& in, int local_row) {
    auto* dst = reinterpret_cast<S*>(rows(local_row));
    S incoming;
    for (std::int64_t c = 0; c < coefficients; ++c) {
      std::memcpy(&incoming, in.data() + c * std::int64_t(sizeof(S)), sizeof(S));
      dst[c] += incoming;
    }
  };
  if (down) add(from_down, gw);  // rank - 1's upper ghosts: my first owned rows
  if (up) add(from_up, own);     // rank + 1's lower ghosts: my last owned rows
  // The ghost values were overwritten by the forward exchange: nothing
  // before it depends on them through this rank.
  std::memset(rows(0), 0, std::size_t(layer));
  std::memset(rows(gw + own), 0, std::size_t(layer));
  ++d.stats.adjoint_exchanges;
  d.stats.adjoint_bytes_sent += neighbours * layer;
  d.stats.adjoint_bytes_received += neighbours * layer;
}

// Records a communication step on the active tape as a launch that reads
// and writes `f`, runs it, and gives it `adjoint`.
template <class F, class Run, class Adjoint>
void recorded_step(char const* name, F const& f, Run&& run, Adjoint&& adjoint) {
  tape* const t = ctg::detail::active_tape();
  std::vector<ctg::detail::launch_use> uses;
  std::size_t entry = 0;
  if (t) {
    uses.push_back({f.storage(), f.buffer_index(), f.name(), 0, false, false, true, true});
    entry = t->begin_launch(name, uses);
  }
  run();
  f.note_write();
  if (!t) return;
  if constexpr (F::has_grad) {
    t->note_gradient(f);
    t->end_launch(entry, uses, std::function<void()>(std::forward<Adjoint>(adjoint)));
  } else {
    (void)adjoint;
    t->end_launch(entry, uses, {});
  }
}

}  // namespace detail

// Fills the ghost rows of `u` with the current values of the ranks that own
// them. Every rank of u's grid calls it.
template <class T, int R, flags F>
void exchange(dfield<T, R, F> const& u) {
  auto& d = u.state();
  detail::record_step(d.g, "exchange of '" + u.name() + "'");
  detail::recorded_step(
      "ctg::mpi::exchange", u, [&] { detail::transfer(d, u.data(), u.name(), false); },
      [u] {
        if constexpr (field<T, R, F>::has_grad) detail::transfer(u.state(), u.grad().data(), u.name() + ".grad", true);
      });
  d.fresh = u.version();
}

// loss := the sum of every rank's loss (each rank holds its partial before,
// the total after). Every rank of `g` calls it.
template <class T, flags F>
void sum(grid const& g, field<T, 0, F> const& loss) {
  using S = scalar_of_t<T>;
  detail::record_step(g, "sum of '" + loss.name() + "'");
  detail::recorded_step(
      "ctg::mpi::sum", loss,
      [&] {
        g.check(MPI_Allreduce(MPI_IN_PLACE, loss.data(), coefficients_v<T>, detail::datatype<S>(), MPI_SUM, g.comm()),
                "MPI_Allreduce", "ctg::mpi::sum", loss.name());
      },
      [g, loss] {
        if constexpr (has_flag(F, flags::grad)) {
          // d total / d partial = 1: each partial's gradient is the total's,
          // which rank 0 holds (every rank seeded it alike).
          g.check(MPI_Bcast(loss.grad().data(), coefficients_v<T>, detail::datatype<S>(), 0, g.comm()), "MPI_Bcast",
                  "the adjoint of ctg::mpi::sum", loss.name());
        }
      });
}

namespace detail {
template <class T, int R, flags F>
std::vector<T> gather_buffer(dfield<T, R, F> const& u, T const* buffer, int root, char const* what) {
  auto const& d = u.state();
  grid const& g = d.g;
  std::int64_t const row_bytes = d.row_elements * std::int64_t(sizeof(T));
  std::vector<int> counts(std::size_t(g.size())), displs(std::size_t(g.size()));
  for (int r = 0; r < g.size(); ++r) {
    counts[std::size_t(r)] = message_count((g.hi(d.rows, r) - g.lo(d.rows, r)) * row_bytes, g, what, u.name());
    displs[std::size_t(r)] = message_count(g.lo(d.rows, r) * row_bytes, g, what, u.name());
  }
  std::vector<T> out(g.rank() == root ? std::size_t(u.global_size()) : 0);
  auto const* mine = reinterpret_cast<unsigned char const*>(buffer) + d.ghost * row_bytes;
  g.check(MPI_Gatherv(mine, counts[std::size_t(g.rank())], MPI_BYTE, out.data(), counts.data(), displs.data(),
                      MPI_BYTE, root, g.comm()),
          "MPI_Gatherv", what, u.name());
  return out;
}
}  // namespace detail

// The global field's values on `root` (row-major, global shape); empty on
// the other ranks. Collective.
template <class T, int R, flags F>
std::vector<T> gather(dfield<T, R, F> const& u, int root = 0) {
  return detail::gather_buffer(u, u.data(), root, "ctg::mpi::gather");
}
// The global gradient on `root`. Collective.
template <class T, int R, flags F>
std::vector<T> gather_grad(dfield<T, R, F> const& u, int root = 0) {
  static_assert(has_flag(F, flags::grad), "CTG-FIELD-004 gather_grad on a decomposed field without ctg::grad");
  return detail::gather_buffer(u, u.grad().data(), root, "ctg::mpi::gather_grad");
}

// Each rank takes its owned rows from the global values (the same vector on
// every rank, row-major, global shape); ghost rows need an exchange after.
template <class T, int R, flags F>
void copy_from_global(dfield<T, R, F> const& u, std::vector<T> const& global) {
  if (std::int64_t(global.size()) != u.global_size())
    throw launch_error("copy_from_global: decomposed field '" + u.name() + "' holds " +
                       std::to_string(u.global_size()) + " elements globally, the vector " +
                       std::to_string(global.size()) + " (rank " + std::to_string(u.decomposition().rank()) + ")");
  std::int64_t const row = u.row_elements();
  std::copy(global.begin() + (u.owned_lo() * row), global.begin() + (u.owned_hi() * row),
            u.data() + std::int64_t(u.ghost()) * row);
  u.note_write();
}

}  // namespace ctg::mpi
