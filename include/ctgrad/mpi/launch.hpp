// The launch-time checks of kernels on decomposed fields, and the record of
// the steps each rank takes on a tape.
//
// A kernel launched on a dfield reaches here through ctg_launch_hook, which
// the kernel finds by argument-dependent lookup before each pass. From the
// lowered IR it takes the exact affine form of every access to a decomposed
// field along axis 0 (check/dependence.hpp): `u(i + 2, j)` is coefficient 1
// on the parallel loop's first index and offset 2. A launch whose offsets
// exceed a field's ghost width, that writes outside the owned rows, whose
// split-axis index is not the loop index plus a constant, that mixes
// decompositions, or that reads ghost rows no exchange has filled since the
// last write, throws naming the kernel, the field, the offset and the rank.
#pragma once
#include <mpi.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../check/dependence.hpp"
#include "dfield.hpp"

namespace ctg::mpi {
namespace detail {

// ---- the steps of one tape, compared across ranks at backward() --------------------------------------
// Every rank must record the same collective steps (exchanges, sums) and
// launches on decomposed fields in the same order: otherwise the adjoints'
// messages would pair up wrongly, or wait forever. Each rank keeps a running
// hash of what it recorded; the tape's before_backward hook compares them
// on every rank before any adjoint runs.
struct sequence {
  explicit sequence(grid const& on) : g(on) {}
  grid g;
  std::vector<std::uint64_t> prefix;  // hash of steps [0, k]
  std::vector<std::string> what;

  void add(std::string step) {
    std::uint64_t h = prefix.empty() ? 1469598103934665603ull : prefix.back();
    for (unsigned char c : step) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xffu) * 1099511628211ull;  // the end of one step
    prefix.push_back(h);
    what.push_back(std::move(step));
  }

  void compare() const {
    long long const n = (long long)prefix.size();
    int const ranks = g.size();
    std::vector<long long> counts(static_cast<std::size_t>(ranks), 0);
    g.check(MPI_Allgather(&n, 1, MPI_LONG_LONG, counts.data(), 1, MPI_LONG_LONG, g.comm()), "MPI_Allgather",
            "ctg::tape::backward()", "");
    long long lo = n, hi = n;
    for (long long c : counts) lo = c < lo ? c : lo, hi = c > hi ? c : hi;
    std::vector<std::uint64_t> all(std::size_t(lo) * std::size_t(ranks));
    g.check(MPI_Allgather(prefix.data(), int(lo), MPI_UINT64_T, all.data(), int(lo), MPI_UINT64_T, g.comm()),
            "MPI_Allgather", "ctg::tape::backward()", "");
    // The first step where some rank differs from rank 0, and that rank.
    long long first = lo;
    int other = -1;
    for (long long k = 0; k < lo && other < 0; ++k)
      for (int r = 1; r < ranks && other < 0; ++r)
        if (all[std::size_t(r * lo + k)] != all[std::size_t(k)]) first = k, other = r;
    for (int r = 1; r < ranks && other < 0; ++r)
      if (counts[std::size_t(r)] != counts[0]) other = r;
    if (other < 0) return;
    std::string const mine = first < n ? what[std::size_t(first)] : std::string("nothing (its last step was before)");
    throw mpi_error("CTG-MPI-005 ranks recorded different steps on one ctg::tape (found at backward(), before any "
                    "adjoint ran): step #" + std::to_string(first + 1) + " differs between rank 0 and rank " +
                    std::to_string(other) + "; on this rank (rank " + std::to_string(g.rank()) + ") it is " + mine +
                    "; the ranks recorded between " + std::to_string(lo) + " and " + std::to_string(hi) +
                    " steps. Fix: every rank launches the same kernels on the same decomposed fields, and makes the "
                    "same exchanges and sums, in the same order");
  }
};

inline std::map<tape const*, std::weak_ptr<sequence>>& sequences() {
  thread_local std::map<tape const*, std::weak_ptr<sequence>> m;
  return m;
}
// Notes one step on the tape recording now, if any.
inline void record_step(grid const& g, std::string step) {
  tape* const t = ctg::detail::active_tape();
  if (t == nullptr) return;
  auto& m = sequences();
  std::erase_if(m, [](auto const& kv) { return kv.second.expired(); });
  std::shared_ptr<sequence> s;
  if (auto const found = m.find(t); found != m.end()) s = found->second.lock();
  if (!s) {
    s = std::make_shared<sequence>(g);
    m[t] = s;
    // The tape owns the sequence through its hook: it goes with the tape.
    t->before_backward([s] { s->compare(); });
  }
  s->add(std::move(step));
}

// ---- what a kernel's IR does to its decomposed fields ------------------------------------------------
struct offsets {
  long long up = 0, down = 0;  // largest offsets above and below the loop index
};
struct scan_result {
  std::array<offsets, 64> reach{};
  int opaque = -1;          // a parameter whose split-axis index is not i + c
  bool opaque_serial = false;
  int write = -1;           // a parameter written at a nonzero offset
  long long write_offset = 0;
};

template <class Op>
inline constexpr bool is_atomic_op = false;
template <ir::atomic_kind K>
inline constexpr bool is_atomic_op<ir::op::atomic<K>> = true;

template <unsigned long long Decomposed, class Bound>
struct scanner {
  Bound const* bound;
  scan_result& out;
  bool serial = false;

  template <class Op, class... K>
  void visit(ir::node<Op, K...> const& n, bool target) const {
    if constexpr (ir::is_access_op<Op>) {
      if constexpr (sizeof...(K) > 0 && Op::param < 64 && (Decomposed & ir::param_bit(Op::param)) != 0) {
        check::affine_form const f = check::form_eval<Bound>{bound, ~0ull}(&ctg::detail::get<0>(n.kids));
        bool const plain = f.exact() && f.count == 1 && f.level[0] == 0 && f.axis[0] == 0 && f.coeff[0] == 1;
        if ((!plain || serial) && out.opaque < 0) {
          out.opaque = Op::param;
          out.opaque_serial = serial;
        }
        if (plain) {
          auto& r = out.reach[std::size_t(Op::param)];
          if (f.constant > r.up) r.up = f.constant;
          if (-f.constant > r.down) r.down = -f.constant;
          if (target && f.constant != 0 && out.write < 0) {
            out.write = Op::param;
            out.write_offset = f.constant;
          }
        }
      }
      kids(n, false);
    } else if constexpr (std::is_same_v<Op, ir::op::store> || is_atomic_op<Op>) {
      visit(ctg::detail::get<0>(n.kids), true);
      visit(ctg::detail::get<1>(n.kids), false);
    } else if constexpr (std::is_same_v<Op, ir::op::component>) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        (visit(ctg::detail::get<Is>(n.kids), Is == 0 && target), ...);
      }(std::index_sequence_for<K...>{});
    } else {
      kids(n, false);
    }
  }
  template <class Op, class... K>
  void kids(ir::node<Op, K...> const& n, bool target) const {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (visit(ctg::detail::get<Is>(n.kids), target), ...);
    }(std::index_sequence_for<K...>{});
  }
  template <class O>
  void offload(O const& o) {
    if constexpr (requires { o.stmt; }) {
      serial = false;
      visit(o.stmt, false);
    } else {
      serial = true;
      visit(o.body, false);
    }
  }
};

template <class... A, std::size_t... Is>
constexpr unsigned long long decomposed_mask(std::index_sequence<Is...>) {
  return ((is_dfield_v<A> ? ir::param_bit(int(Is)) : 0ull) | ... | 0ull);
}

// The decomposition, name and block of one argument (null for plain ones).
struct arg_view {
  decomposition* d = nullptr;
  std::string name, block;
  bool fresh = false;
};
template <class X>
arg_view view_of(X const& x) {
  if constexpr (is_dfield_v<X>)
    return {&x.state(), x.name(), x.describe_block(), x.ghosts_fresh()};
  else
    return {};
}

}  // namespace detail

// Called by every pass of a kernel launched on decomposed fields (the
// forward launch, its adjoint, k.grad, k.fwd) with the lowered IR and the
// bound views.
template <class Kir, class Bound, class... A>
  requires(is_dfield_v<A> || ...)
void ctg_launch_hook(std::string_view kernel, bool forward, Kir const& kir, Bound const& bound, A const&... args) {
  static_assert(sizeof...(A) <= 64, "CTG-MPI-007 a kernel on decomposed fields takes at most 64 parameters");
  constexpr unsigned long long mask = detail::decomposed_mask<A...>(std::index_sequence_for<A...>{});
  std::array<detail::arg_view, sizeof...(A)> const info{detail::view_of(args)...};
  auto const k = "kernel '" + std::string(kernel) + "'";
  int first = -1;
  for (int p = 0; p < int(sizeof...(A)); ++p) {
    auto const& a = info[std::size_t(p)];
    if (!a.d) continue;
    if (first < 0) {
      first = p;
      continue;
    }
    auto const& f = info[std::size_t(first)];
    if (!a.d->g.same_as(f.d->g) || a.d->rows != f.d->rows)
      throw launch_error("CTG-MPI-003 " + k + ": decomposed fields '" + f.name + "' (" + f.block + ") and '" + a.name +
                         "' (" + a.block + ") are split differently; the launch runs over one block of rows. Fix: "
                         "decompose every field of a launch over the same grid with the same number of rows");
  }
  int const rank = info[std::size_t(first)].d->g.rank();

  detail::scan_result scan;
  detail::scanner<mask, Bound> s{&bound, scan};
  [&]<std::size_t... Os>(std::index_sequence<Os...>) {
    (s.offload(ctg::detail::get<Os>(kir.offloads)), ...);
  }(std::make_index_sequence<std::remove_cvref_t<decltype(kir.offloads)>::size>{});

  if (scan.opaque >= 0) {
    auto const& a = info[std::size_t(scan.opaque)];
    throw launch_error(
        "CTG-MPI-007 " + k + " on rank " + std::to_string(rank) + ": field '" + a.name + "' (" + a.block + ") is " +
        (scan.opaque_serial ? std::string("accessed outside a parallel loop")
                            : std::string("indexed along axis 0 by something other than the parallel loop's first "
                                          "index plus a constant")) +
        ", so no rank can tell which rows it needs. Fix: index decomposed fields along axis 0 as u(i + c, ...), i the "
        "first index of the kernel's range/ndrange/each, c a constant; keep other data in plain fields");
  }
  if (scan.write >= 0) {
    auto const& a = info[std::size_t(scan.write)];
    throw launch_error("CTG-MPI-002 " + k + " on rank " + std::to_string(rank) + " writes field '" + a.name +
                       "' at offset " + std::to_string(scan.write_offset) + " along axis 0 (" + a.block +
                       "): rows at other offsets may belong to another rank, and ghost rows are read-only. Fix: write "
                       "u(i, ...) only, i the loop's first index");
  }
  for (int p = 0; p < int(sizeof...(A)); ++p) {
    auto const& a = info[std::size_t(p)];
    if (!a.d) continue;
    auto const& r = scan.reach[std::size_t(p)];
    long long const worst = r.up >= r.down ? r.up : -r.down;
    if (r.up > a.d->ghost || r.down > a.d->ghost)
      throw launch_error("CTG-MPI-001 " + k + " on rank " + std::to_string(rank) + " reads field '" + a.name +
                         "' at offset " + (worst > 0 ? "+" : "") + std::to_string(worst) +
                         " along axis 0, past its " + std::to_string(a.d->ghost) + " ghost layer" +
                         (a.d->ghost == 1 ? "" : "s") + " (" + a.block + "). Fix: decompose '" + a.name +
                         "' with ghost width " + std::to_string(r.up > r.down ? r.up : r.down) + " or more");
    if (forward && (r.up > 0 || r.down > 0) && !a.fresh)
      throw launch_error("CTG-MPI-004 " + k + " on rank " + std::to_string(rank) + " reads the ghost rows of field '" +
                         a.name + "' (offset up to " + std::to_string(worst) + "), but they are stale: '" + a.name +
                         "' was written after its last exchange, or never exchanged (" + a.block +
                         "). Fix: call ctg::mpi::exchange(" + a.name + ") after the last write and before this launch");
  }
  if (forward) {
    std::string step = "kernel '" + std::string(kernel) + "' on";
    for (auto const& a : info)
      if (a.d) step += " '" + a.name + "'";
    detail::record_step(info[std::size_t(first)].d->g, std::move(step));
  }
}

}  // namespace ctg::mpi
