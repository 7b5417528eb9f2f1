// ctg::mpi::dfield: a field split into blocks of rows over the ranks of a
// grid, each rank holding its block plus `ghost` layers of rows on either
// side.
//
//   ctg::mpi::grid world;                                   // MPI_COMM_WORLD
//   ctg::mpi::dfield<double, 2, ctg::grad> u(world, {n, m}, /*ghost=*/1, {.name = "u"});
//   heat(u, v);            // the kernel of a plain field, unchanged
//   ctg::mpi::exchange(u); // fills the ghost rows from the neighbours
//
// What a kernel sees: the global field. Its indices are global, its extents
// (u.shape(0_c), each(u, ...)) the global extents, so boundary conditions at
// i == 0 and i == n - 1 stay as they are. A launch on decomposed fields runs
// the first axis of each parallel loop over the rows this rank owns only
// (the loop's range intersected with [lo, hi)); the loop index along that
// axis must be the row index of the decomposed fields: every access to one
// along axis 0 is the loop index plus a constant, read at most `ghost` rows
// away (CTG-MPI-001, -007) and written at offset 0 (CTG-MPI-002). Kernels are
// checked at each launch against the lowered IR (launch.hpp).
//
// The dfield is also the ctg::field of its local storage: rows
// first_row() ... first_row() + local_rows() - 1 of the global field, the
// ghost rows included (those beyond the global edges stay unused). fill,
// zero_grad, to_vector and grad() act on that storage; shape() and at() are
// global (at() only reaches the rows stored here); copy_from_global and
// gather (halo.hpp) move whole global fields.
//
// On the device ({.space = ctg::device}, a translation unit compiled by nvcc
// linking ctgrad::cuda and ctgrad::mpi) the block lives in GPU memory and
// kernels launch on the CUDA backend over the owned rows; exchanges hand the
// ghost layers to MPI straight from device memory when the MPI library is
// CUDA-aware, and stage them through host buffers otherwise (halo.hpp).
// at() is host-only, as on any device field.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "../ctgrad.hpp"
#include "grid.hpp"

namespace ctg::mpi {

// Bytes that halo exchanges of one field moved on this rank.
struct halo_stats {
  std::int64_t exchanges = 0, adjoint_exchanges = 0;
  std::int64_t bytes_sent = 0, bytes_received = 0;                  // forward: values
  std::int64_t adjoint_bytes_sent = 0, adjoint_bytes_received = 0;  // backward: ghost gradients
  std::int64_t staged_bytes = 0;  // device blocks: copied between device and host for MPI
};

namespace detail {
// What all handles of one decomposed field share.
struct decomposition {
  explicit decomposition(grid const& on) : g(on) {}
  grid g;
  int rows = 0;      // global extent of axis 0
  int lo = 0, hi = 0;
  int ghost = 0;
  std::int64_t row_elements = 1;  // elements per row (product of the other extents)
  std::uint64_t fresh = ~std::uint64_t(0);  // the primal version whose ghosts an exchange filled
  halo_stats stats;
};
}  // namespace detail

// What a kernel binds for a decomposed field: global extents and indices,
// mapped onto the rows stored on this rank.
template <class T, int Rank, bool HasGrad, bool HasDual>
struct block_view {
  using value_type = T;
  static constexpr int rank = Rank;
  static constexpr bool has_grad = HasGrad;
  static constexpr bool has_dual = HasDual;

  T* data;
  T* grad;
  T* dual;
  int extent[Rank];  // global
  int first;         // global row of local row 0
  int stored;        // rows stored (owned and ghosts)
  int own_lo, own_hi;

  template <class I0, class... I>
  CTG_HOST_DEVICE constexpr std::int64_t offset(I0 i0, I... idx) const {
    static_assert(sizeof...(I) + 1 == Rank);
    std::int64_t off = std::int64_t(i0) - first;
    int axis = 1;
    ((off = off * extent[axis++] + std::int64_t(idx)), ...);
    return off;
  }
  // Inside the global shape, as on a plain field, and inside the rows stored here.
  template <class I0, class... I>
  CTG_HOST_DEVICE constexpr bool in_bounds(I0 i0, I... idx) const {
    return ::ctg::detail::within_extents(extent, i0, idx...) && i0 >= first && i0 < first + stored;
  }
  CTG_HOST_DEVICE constexpr std::int64_t size() const { return ::ctg::detail::extents_count<Rank>(extent); }
  // Every backend keeps the first axis of a parallel loop to the owned rows
  // (backend::narrow_to_owned).
  CTG_HOST_DEVICE constexpr void narrow(int& lo, int& hi) const {
    lo = lo > own_lo ? lo : own_lo;
    hi = hi < own_hi ? hi : own_hi;
    if (hi < lo) hi = lo;
  }
};

template <class T, int Rank, flags Flags = flags::none>
class dfield : public field<T, Rank, Flags> {
  static_assert(Rank >= 1 && Rank <= 3, "CTG-MPI-008 a decomposed field has rank 1, 2 or 3");
  static_assert(!std::is_integral_v<scalar_of_t<T>>,
                "CTG-MPI-008 integer and boolean fields are not decomposed (the launch-time checks read their "
                "contents with global indices): keep them as plain fields, the same on every rank");

 public:
  using base = field<T, Rank, Flags>;
  using shape_type = std::array<int, Rank>;
  using view_type = block_view<T, Rank, base::has_grad, base::has_dual>;

  dfield() = default;
  // Every rank of `g` constructs it with the same global shape and ghost width.
  dfield(grid const& g, shape_type global, int ghost, field_options opts = {})
      : base(local_shape(g, global, ghost, opts), opts), global_(global) {
    auto d = std::make_shared<detail::decomposition>(g);
    d->rows = global[0];
    d->lo = g.lo(global[0], g.rank());
    d->hi = g.hi(global[0], g.rank());
    d->ghost = ghost;
    for (int a = 1; a < Rank; ++a) d->row_elements *= global[std::size_t(a)];
    dec_ = std::move(d);
  }
  dfield(grid const& g, std::initializer_list<int> global, int ghost, field_options opts = {})
      : dfield(g, to_shape(global, opts.name), ghost, opts) {}

  // ---- the decomposition ----------------------------------------------------------
  shape_type const& shape() const { return global_; }
  int extent(int axis) const { return global_[std::size_t(axis)]; }
  std::int64_t global_size() const {
    std::int64_t n = 1;
    for (int e : global_) n *= e;
    return n;
  }
  shape_type local_shape() const { return base::shape(); }
  grid const& decomposition() const { return dec_->g; }
  int ghost() const { return dec_->ghost; }
  int owned_lo() const { return dec_->lo; }  // rows [owned_lo, owned_hi) are this rank's
  int owned_hi() const { return dec_->hi; }
  int first_row() const { return dec_->lo - dec_->ghost; }  // the global row of local row 0
  int local_rows() const { return base::shape()[0]; }
  std::int64_t row_elements() const { return dec_->row_elements; }
  halo_stats const& stats() const { return dec_->stats; }
  void reset_stats() const { dec_->stats = {}; }
  // Whether the ghost rows hold the neighbours' current values (an exchange
  // ran after the last write).
  bool ghosts_fresh() const { return dec_->fresh == this->version(); }

  // ---- element access with global indices (rows stored on this rank) ------------------
  template <std::integral I0, std::integral... I>
    requires(sizeof...(I) + 1 == Rank)
  T& at(I0 i0, I... idx) {
    check_stored(i0, idx...);
    return base::at(int(i0) - first_row(), idx...);
  }
  template <std::integral I0, std::integral... I>
    requires(sizeof...(I) + 1 == Rank)
  T const& at(I0 i0, I... idx) const {
    check_stored(i0, idx...);
    return static_cast<base const&>(*this).at(int(i0) - first_row(), idx...);
  }

  view_type view() const {
    auto const v = base::view();
    view_type out{v.data, v.grad, v.dual, {}, first_row(), local_rows(), dec_->lo, dec_->hi};
    for (int a = 0; a < Rank; ++a) out.extent[a] = global_[std::size_t(a)];
    return out;
  }

  std::string shape_string() const {
    std::string s = "(";
    for (int a = 0; a < Rank; ++a) s += (a ? ", " : "") + std::to_string(global_[std::size_t(a)]);
    return s + ")";
  }
  // "rows [lo, hi) of (n, m), 1 ghost layer, rank r of P".
  std::string describe_block() const {
    return "rows [" + std::to_string(dec_->lo) + ", " + std::to_string(dec_->hi) + ") of " + shape_string() + ", " +
           std::to_string(dec_->ghost) + " ghost layer" + (dec_->ghost == 1 ? "" : "s") + ", rank " +
           std::to_string(dec_->g.rank()) + " of " + std::to_string(dec_->g.size());
  }

  detail::decomposition& state() const { return *dec_; }

 private:
  static shape_type to_shape(std::initializer_list<int> list, std::string_view name) {
    if (list.size() != std::size_t(Rank))
      throw launch_error("CTG-MPI-008 decomposed field '" + std::string(name) + "': " + std::to_string(list.size()) +
                         " extents given for a field of rank " + std::to_string(Rank));
    shape_type s{};
    std::size_t a = 0;
    for (int e : list) s[a++] = e;
    return s;
  }
  // The local storage's shape; checks the decomposition first.
  static shape_type local_shape(grid const& g, shape_type global, int ghost, field_options const& opts) {
    std::string const name = opts.name.empty() ? std::string("<unnamed>") : std::string(opts.name);
    auto fail = [&](std::string const& why) {
      throw launch_error("CTG-MPI-008 decomposed field '" + name + "' on rank " + std::to_string(g.rank()) + ": " +
                         why);
    };
    if (ghost < 0) fail("negative ghost width " + std::to_string(ghost));
    for (int e : global)
      if (e < 0) fail("negative extent " + std::to_string(e));
    if (global[0] < g.size())
      fail("axis 0 has " + std::to_string(global[0]) + " rows for " + std::to_string(g.size()) +
           " ranks; every rank needs at least one row");
    int const own = g.hi(global[0], g.rank()) - g.lo(global[0], g.rank());
    // A ghost layer comes from the next rank alone: its block must be as deep.
    int const smallest = global[0] / g.size();
    if (g.size() > 1 && ghost > smallest)
      fail("ghost width " + std::to_string(ghost) + " is deeper than the smallest block (" + std::to_string(smallest) +
           " rows): a ghost layer must come from one neighbour; use fewer ranks or a thinner halo");
    shape_type local = global;
    local[0] = own + 2 * ghost;
    return local;
  }
  template <class I0, class... I>
  void check_stored(I0 i0, I... idx) const {
    bool ok = i0 >= 0 && i0 < global_[0];
    std::size_t a = 1;
    ((ok = ok && idx >= 0 && idx < global_[a++]), ...);
    if (!ok || i0 < first_row() || i0 >= first_row() + local_rows())
      throw index_error("decomposed field '" + this->name() + "': index " +
                        ctg::detail::describe_index({std::int64_t(i0), std::int64_t(idx)...}) +
                        " is not stored on rank " + std::to_string(dec_->g.rank()) + " (" + describe_block() + ")");
  }

  shape_type global_{};
  std::shared_ptr<detail::decomposition> dec_;
};

template <class T>
inline constexpr bool is_dfield_v = false;
template <class T, int R, flags F>
inline constexpr bool is_dfield_v<dfield<T, R, F>> = true;

}  // namespace ctg::mpi

// ---- how the core sees a decomposed field ----------------------------------------------------------
namespace ctg {
template <class T, int R, flags F>
struct is_field<mpi::dfield<T, R, F>> : std::true_type {};

namespace detail {
template <class T, int R, flags F>
inline constexpr bool has_grad_arg<mpi::dfield<T, R, F>> = has_flag(F, flags::grad);
template <class T, int R, flags F>
struct param_info<mpi::dfield<T, R, F>> {
  static std::string describe(int i, mpi::dfield<T, R, F> const& f) {
    return "parameter #" + std::to_string(i) + " (decomposed field '" + f.name() + "', " + f.describe_block() + ")";
  }
};
}  // namespace detail

namespace ir {
template <int I, class T, int R, flags F>
struct arg_traits<I, mpi::dfield<T, R, F>> {
  using handle_type = field_handle<I, T, R, has_flag(F, flags::grad), has_flag(F, flags::dual)>;
  static handle_type handle(mpi::dfield<T, R, F> const&) { return {}; }
  using bound = typename mpi::dfield<T, R, F>::view_type;
  static bound bind(mpi::dfield<T, R, F> const& f) { return f.view(); }
};
}  // namespace ir
}  // namespace ctg
