// ctg::field: the typed, shared-ownership storage kernels read and write.
//
// A field is a handle: copying it is cheap (a reference count) and the memory
// lives until the last handle goes. The element type, the rank and whether the
// field carries a gradient or a tangent buffer are part of the type, so that
// kernels and the autodiff checks see them at compile time; the extents, the
// memory space and the name are run-time values.
#pragma once
#include <algorithm>
#include <atomic>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "config.hpp"
#include "detail/actions.hpp"
#include "detail/rows.hpp"
#include "element.hpp"
#include "errors.hpp"
#include "memory/copy_cache.hpp"
#include "memory/space.hpp"

// k.grad without a tape compares the fields its adjoint reads with what the
// forward launch left, and element writes through at(), map() or flat()
// cannot be told from reads without a copy of the field: with this on, the
// first such access after a forward launch whose adjoint reads the field
// copies it, and the next forward launch reading it, launch writing it, or
// k.grad compares (docs/02, *Versions*).
// It costs a copy and a comparison of the field per touch after a launch;
// on with the index checks (CTG_BOUNDS_CHECK).
#if !defined(CTG_HOST_WRITE_CHECKS)
#  define CTG_HOST_WRITE_CHECKS CTG_BOUNDS_CHECK
#endif

// Checks that cost a look-up per launch on views of user memory (a view
// outliving its memory): on unless NDEBUG, like CTG_BOUNDS_CHECK.
#if !defined(CTG_VIEW_CHECKS)
#  if defined(NDEBUG)
#    define CTG_VIEW_CHECKS 0
#  else
#    define CTG_VIEW_CHECKS 1
#  endif
#endif

namespace ctg {

// Which buffers a field carries besides its values.
enum class flags : unsigned { none = 0, grad = 1, dual = 2, strided = 4 };
constexpr flags operator|(flags a, flags b) { return flags(unsigned(a) | unsigned(b)); }
constexpr flags operator&(flags a, flags b) { return flags(unsigned(a) & unsigned(b)); }
constexpr bool has_flag(flags set, flags bit) { return (unsigned(set) & unsigned(bit)) != 0; }

// ctg::field<float, 1, ctg::grad>: allocate a gradient buffer of the same shape.
inline constexpr flags grad = flags::grad;
// ctg::field<float, 1, ctg::dual>: allocate a tangent buffer for forward-mode AD.
inline constexpr flags dual = flags::dual;
// ctg::field<float, 1, ctg::strided>: elements at arbitrary byte strides (one
// member of an array of structs, a column-major matrix); see view.hpp. Kept
// out of plain fields so that their addressing stays a row-major offset.
inline constexpr flags strided = flags::strided;

struct field_options {
  std::string_view name{};
  memory_space space = memory_space::host;
};

namespace detail {
// Whether an index lies inside a view's extents, and how many elements the
// extents hold: shared by every view type a kernel binds.
template <class... I>
CTG_HOST_DEVICE constexpr bool within_extents(int const* extent, I... idx) {
  int axis = 0;
  bool ok = true;
  ((ok = ok && idx >= 0 && idx < extent[axis++]), ...);
  return ok;
}
template <int Rank>
CTG_HOST_DEVICE constexpr std::int64_t extents_count(int const* extent) {
  std::int64_t n = 1;
  for (int a = 0; a < Rank; ++a) n *= extent[a];
  return n;
}
// The row-major number of an element among the extents' (64-bit, so that
// fields beyond 2^31 elements work).
template <class... I>
CTG_HOST_DEVICE constexpr std::int64_t row_major_number(int const* extent, I... idx) {
  std::int64_t off = 0;
  int axis = 0;
  ((off = off * extent[axis++] + std::int64_t(idx)), ...);
  return off;
}
}  // namespace detail

// What a kernel sees of a field: raw pointers and extents, trivially copyable
// so that it can be passed to a device kernel by value.
template <class T, int Rank, bool HasGrad, bool HasDual>
struct field_view {
  using value_type = T;
  static constexpr int rank = Rank;
  static constexpr bool has_grad = HasGrad;
  static constexpr bool has_dual = HasDual;

  T* data;
  T* grad;
  T* dual;
  int extent[Rank > 0 ? Rank : 1];

  // Row-major linear offset.
  template <class... I>
  CTG_HOST_DEVICE constexpr std::int64_t offset(I... idx) const {
    static_assert(sizeof...(I) == Rank);
    return detail::row_major_number(extent, idx...);
  }
  template <class... I>
  CTG_HOST_DEVICE constexpr bool in_bounds(I... idx) const {
    return detail::within_extents(extent, idx...);
  }
  CTG_HOST_DEVICE constexpr std::int64_t size() const { return detail::extents_count<Rank>(extent); }
};

// A position in a strided buffer, in bytes. `pointer + byte_offset` moves by
// bytes, so that the evaluators' `base + view.offset(i...)` addresses strided
// and row-major views alike; there is no conversion to an integer, so a byte
// offset is never mistaken for an element count.
struct byte_offset {
  std::int64_t bytes;
};
template <class T>
CTG_HOST_DEVICE T* operator+(T* p, byte_offset o) {
  using byte = std::conditional_t<std::is_const_v<T>, unsigned char const, unsigned char>;
  return reinterpret_cast<T*>(reinterpret_cast<byte*>(p) + o.bytes);
}

// One buffer of a strided view: its address, and the layout again, so that
// launch-time analyses that index a field by a row-major element number
// (integer fields read as loop bounds) find the right element.
template <class T, int Rank>
struct strided_pointer {
  T* address;
  std::int64_t stride[Rank > 0 ? Rank : 1];  // bytes
  int extent[Rank > 0 ? Rank : 1];

  CTG_HOST_DEVICE constexpr operator T*() const { return address; }
  CTG_HOST_DEVICE T& operator[](byte_offset o) const { return *(address + o); }
  // The element at an index, by this buffer's own strides.
  template <class... I>
  CTG_HOST_DEVICE T* at(I... idx) const {
    static_assert(sizeof...(I) == Rank);
    std::int64_t off = 0;
    int axis = 0;
    ((off += std::int64_t(idx) * stride[axis++]), ...);
    return address + byte_offset{off};
  }
  CTG_HOST_DEVICE T& operator[](std::int64_t row_major) const {
    std::int64_t bytes = 0;
    for (int a = Rank - 1; a >= 0; --a) {
      bytes += (row_major % extent[a]) * stride[a];
      row_major /= extent[a];
    }
    return *(address + byte_offset{bytes});
  }
  // A contiguous row-major copy put in its place (host mirrors of device
  // fields).
  CTG_HOST_DEVICE strided_pointer& operator=(T* contiguous) {
    address = contiguous;
    std::int64_t s = std::int64_t(sizeof(T));
    for (int a = Rank - 1; a >= 0; --a) {
      stride[a] = s;
      s *= extent[a];
    }
    return *this;
  }
};

// What a kernel sees of a ctg::strided field: like field_view, with byte
// strides per axis; offset() is a byte_offset into the values. Each buffer
// carries its own strides: a gradient or tangent buffer that ctgrad
// allocated for a view is packed row-major, whatever the values' layout, so
// that an adjoint moves packed gradients (address elements with
// detail::buffer_element).
template <class T, int Rank, bool HasGrad, bool HasDual>
struct strided_field_view {
  using value_type = T;
  static constexpr int rank = Rank;
  static constexpr bool has_grad = HasGrad;
  static constexpr bool has_dual = HasDual;

  strided_pointer<T, Rank> data;
  strided_pointer<T, Rank> grad;
  strided_pointer<T, Rank> dual;
  int extent[Rank > 0 ? Rank : 1];
  std::int64_t stride[Rank > 0 ? Rank : 1];  // bytes, of the values (data.stride)

  template <class... I>
  CTG_HOST_DEVICE constexpr byte_offset offset(I... idx) const {
    static_assert(sizeof...(I) == Rank);
    std::int64_t off = 0;
    int axis = 0;
    ((off += std::int64_t(idx) * stride[axis++]), ...);
    return {off};
  }
  template <class... I>
  CTG_HOST_DEVICE constexpr bool in_bounds(I... idx) const {
    return detail::within_extents(extent, idx...);
  }
  CTG_HOST_DEVICE constexpr std::int64_t size() const { return detail::extents_count<Rank>(extent); }
};

namespace detail {

// The address of the element at `idx` in buffer `which` of a view (0 the
// values, 1 the gradient, 2 the tangent): by that buffer's own strides on a
// strided view, by the shared row-major offset otherwise.
template <class View, class... I>
CTG_HOST_DEVICE auto* buffer_element(View const& v, int which, I... idx) {
  if constexpr (requires { v.data.address; }) {
    auto const& buffer = which == 0 ? v.data : which == 1 ? v.grad : v.dual;
    return buffer.at(idx...);
  } else {
    typename View::value_type* base = which == 0 ? v.data : which == 1 ? v.grad : v.dual;
    return base + v.offset(idx...);
  }
}

// How messages of the memory layer name a field's buffer: "field 'x'".
inline std::string field_what(std::string const& name) { return "field '" + name + "'"; }

CTG_RUNTIME_INLINE std::string describe_index(std::initializer_list<std::int64_t> idx);

// The stamp of a write: a process-wide count, so that writes to any buffer
// can be ordered against a launch (k.grad compares them with its forward
// launch's stamp).
inline std::uint64_t next_write_stamp() {
  static std::atomic<std::uint64_t> count{0};
  return ++count;
}

// What has happened to one buffer of a field, for the tape and k.grad (see
// tape.hpp). Every write bumps `version`: a kernel launch that writes the
// buffer, a whole-field host operation (fill, copy_from, zero_*), an element
// written through at(). k.grad, called alone, asks whether launches, host
// operations and (with CTG_HOST_WRITE_CHECKS) host element writes wrote the
// rows its adjoint reads after the forward launch: `bulk_stamp` is the stamp
// of the last write to the whole buffer, `row_stamps` that of the last
// write of each row of its first axis by a launch that wrote only some rows
// or by the host (fields of at most max_tracked_rows rows; wider ones count
// every write as whole).
//
// at() on a non-const handle may be a read or a write: it only marks the
// buffer touched. The next launch or tape operation settles the touch: when a
// live tape or a forward launch's adjoint needs the current values, a copy
// taken at the first touch tells whether the contents really changed (and
// which rows, for k.grad's check); otherwise the touch counts as a write of
// the version only.
struct buffer_state {
  static constexpr std::uint64_t none = ~std::uint64_t(0);
  static constexpr std::int64_t max_tracked_rows = 1 << 16;
  std::uint64_t version = 0;
  std::uint64_t bulk_stamp = 0;
  std::vector<std::uint64_t> row_stamps;
  std::uint64_t latest_row_stamp = 0;
  std::uint64_t watched = none;  // a version some live tape needs
  // A version a forward launch left whose values its adjoint reads, for k.grad
  // without a tape (CTG_HOST_WRITE_CHECKS).
  std::uint64_t forward_watched = none;
  // The version the last launch to write the buffer left, its write stamp,
  // and the tape recording on the thread that launched it (none: null). A
  // tape that reads a version some other launch wrote while it recorded
  // could not chain the gradient through that launch (tape.hpp).
  std::uint64_t launch_version = none;
  std::uint64_t launch_stamp = 0;
  void const* launch_recorder = nullptr;
  bool touched = false;
  std::int64_t first_axis_extent = 0;  // of the handle that touched it (0 for rank 0)
  std::vector<unsigned char> snapshot;  // host contents at the first touch of a watched version
  // With the host-write checks, what that forward launch left in the rows
  // its adjoint reads (forward_digest_rows; all: one digest of the whole
  // buffer), valid while forward_watched is the version. k.grad compares the
  // rows it reads, to find writes that left no version.
  row_set forward_digest_rows;
  std::vector<std::uint64_t> forward_digests;
};

// Where the elements of a buffer lie: extents and byte strides. Row-major
// packed buffers (every owning field) have the strides packed_strides gives.
struct element_layout {
  int rank = 0;
  std::size_t element_bytes = 0;
  std::int64_t extent[4] = {};
  std::int64_t stride[4] = {};  // bytes

  std::int64_t count() const {
    std::int64_t n = 1;
    for (int a = 0; a < rank; ++a) n *= extent[a];
    return n;
  }
  // The same elements at the same places (unused axes hold zeros).
  friend bool operator==(element_layout const&, element_layout const&) = default;
  // Bytes from the first element to one past the last (strides are never
  // negative); 0 for an empty layout.
  std::int64_t span() const {
    if (count() == 0) return 0;
    std::int64_t last = 0;
    for (int a = 0; a < rank; ++a) last += (extent[a] - 1) * stride[a];
    return last + std::int64_t(element_bytes);
  }
  bool packed() const {
    std::int64_t s = std::int64_t(element_bytes);
    for (int a = rank - 1; a >= 0; --a) {
      if (extent[a] != 1 && stride[a] != s) return false;
      s *= extent[a];
    }
    return true;
  }
  void pack() {
    std::int64_t s = std::int64_t(element_bytes);
    for (int a = rank - 1; a >= 0; --a) {
      stride[a] = s;
      s *= extent[a];
    }
  }
};

// Blocks of contiguous bytes a layout is made of: the element grown by the
// axes that continue it without a gap, and the strides of the other axes.
struct block_form {
  std::int64_t block = 0;
  int axes = 0;
  std::int64_t stride[4] = {};
  std::int64_t extent[4] = {};
};
CTG_RUNTIME_INLINE block_form blocks_of(element_layout const& l);

// The byte ranges of every block, sorted.
CTG_RUNTIME_INLINE std::vector<std::pair<std::uintptr_t, std::uintptr_t>> block_ranges(std::uintptr_t base,
                                                                                       block_form const& f);

// Whether two buffers share a byte. Exact for the layouts views have in
// practice (members of one array of structs, sub-blocks of a matrix): the
// bytes of each lie at fixed residues modulo the gcd of all strides; other
// cases list the blocks, or, beyond a few million of them, count as
// overlapping.
CTG_RUNTIME_INLINE bool layouts_overlap(void const* a, element_layout const& la, void const* b,
                                        element_layout const& lb);

// Copies every element of `from` (laid out as `src`) to `to` (laid out as
// `dst`, same extents), one copy_rows of `space` per row of the innermost
// axis (on the device either side may be device memory).
CTG_RUNTIME_INLINE void copy_elements(void* to, element_layout const& dst, void const* from, element_layout const& src,
                                      memory_space space, std::string const& what);

// One allocation holding the values and, when the type asks, the gradient and
// tangent buffers. Zero-initialised, 64-byte aligned on the host.
//
// A view of user memory (view.hpp) is a storage too, one per viewed layout,
// shared by every handle on that memory so that they share its versions: its
// buffers are the user's (owned[k] false), laid out as the values, or a
// gradient or tangent buffer allocated here, packed row-major; `layout` says
// where the values are (layout_of(k) where buffer k is), and copies of a
// buffer (the tape's, at() snapshots) hold its elements packed, `bytes` of
// them.
struct field_storage {
  memory_space space = memory_space::host;
  std::size_t bytes = 0;
  void* primal = nullptr;
  void* grad = nullptr;
  void* dual = nullptr;
  std::string name;
  buffer_state state[3];  // primal, grad, dual
  bool owned[3] = {true, true, true};
  bool strided = false;  // the values are not packed row-major: copies gather and scatter
  element_layout layout;  // of the values
  bool packed_companion[3] = {false, false, false};  // buffer k allocated packed, whatever `layout` is
  void const* element_type = nullptr;       // views: the element type's tag (see view.hpp)
  std::shared_ptr<void> keep_alive;         // views: what owns the memory, when ctgrad may hold it (DLPack)
  std::weak_ptr<void const> memory_owner;   // views: what owns the memory, watched (CTG_VIEW_CHECKS)
  bool watch_owner = false;
  // Touching, settling and watching for an adjoint change `state`, and
  // launches on several threads (and the host) may do them on one field
  // they all read.
  std::mutex settle_mutex;

  static constexpr std::size_t alignment = memory::host_alignment;  // of host buffers, copies included

  void* buffer(int which) const { return which == 0 ? primal : which == 1 ? grad : dual; }
  // Where buffer `which`'s elements lie, and whether they are not packed.
  element_layout layout_of(int which) const;
  bool strided_buffer(int which) const { return strided && !packed_companion[which]; }

  void* allocate() const { return allocate_bytes(bytes); }
  // Zeroed memory in this storage's space (what release() frees). When the
  // allocation fails, the blocks cached for copies are freed and it runs once
  // more.
  void* allocate_bytes(std::size_t requested) const;
  // Where copies of this storage's values (a tape's saved versions) take
  // their blocks from and give them back to.
  detail::copy_cache& copy_blocks() const { return detail::copy_cache::of(space == memory_space::device); }
  void release(void* p) noexcept;
  // Copies `bytes` between two buffers of this storage's memory space. With a
  // strided layout one side is a buffer of this storage and the other a
  // packed copy: the copy gathers from it or scatters into it.
  void copy_within_space(void* dst, void const* src) const;

  // ---- write tracking ---------------------------------------------------------------------------
  // A write of the whole buffer (bulk) or of some rows of it (a launch,
  // noted after it ran; note_rows_write stamps its rows). For the latter a
  // pending touch is compared first, so that a host write to other rows is
  // not lost (the launch's own rows differ too, and get its stamp right
  // after); and the other rows still hold what a forward launch left.
  //
  // `host_write_checks` (of note_rows_write, note_launch_write and touch)
  // is the calling translation unit's CTG_HOST_WRITE_CHECKS: a default
  // argument of the functions launches and host writes call, so spelled
  // where the call is. With the runtime compiled once
  // (CTG_SEPARATE_COMPILATION) these functions are compiled in one unit,
  // which must not decide the checks for the units that launch.
  void note_write(int which, bool bulk = true);
  // A launch wrote `rows` of the first axis (of `extent`) and nothing else.
  void note_rows_write(int which, row_set const& rows, std::int64_t extent, bool host_write_checks);
  // Whether writes of a buffer whose first axis has `extent` rows are
  // stamped row by row (otherwise each counts as a write of the whole).
  static bool tracks_rows(std::int64_t extent) { return extent > 0 && extent <= buffer_state::max_tracked_rows; }
  // A stamp for a write of some of those rows: the table of row stamps
  // sized to them, the stamp noted as the latest.
  static std::uint64_t new_row_stamp(buffer_state& b, std::int64_t extent);
  // A launch wrote `rows` (as note_rows_write), recorded by `recorder`, the
  // tape recording on the launching thread (or none).
  void note_launch_write(int which, row_set const& rows, std::int64_t extent, void const* recorder,
                         bool host_write_checks = CTG_HOST_WRITE_CHECKS);

  // Whether a launch, a whole-buffer operation or a host write of elements
  // (CTG_HOST_WRITE_CHECKS) wrote any of `rows` after the write stamped
  // `stamp`.
  bool rows_written_after(int which, row_set const& rows, std::uint64_t stamp) const;
  // `extent`: the extent of the first axis of the handle that touched it (0
  // for rank 0), by whose rows a snapshot that differs is compared.
  // The copy is taken under settle_mutex: a launch on another thread that
  // reads the field may be settling or watching it.
  void touch(int which, std::int64_t extent, bool host_write_checks = CTG_HOST_WRITE_CHECKS);
  // The host buffer's elements, packed.
  void gather(int which, std::vector<unsigned char>& out) const;
  // A 64-bit digest of the host buffer's elements, packed: two contents
  // that differ give different digests but with a chance of 2^-64.
  std::uint64_t contents_digest(int which) const;
  // The digests of rows `rows` of the first axis (`extent` rows) of the host
  // buffer, in their order; of the whole buffer when `rows` is all, or the
  // rows cannot be told apart (rows_digestible is false).
  bool rows_digestible(std::int64_t extent, row_set const& rows) const;
  void row_digests(int which, std::int64_t extent, row_set const& rows, std::vector<std::uint64_t>& out) const;
  // Whether the rows `rows` hold what the forward launch that last watched
  // the buffer left, as far as its digests tell (true when they cannot:
  // another version since, rows it did not digest, device memory).
  bool rows_as_forward_left(int which, std::int64_t extent, row_set const& rows);
  // Turns a touch into a write, unless a snapshot shows nothing changed. A
  // snapshot that differs also stamps the rows that differ (all of them past
  // max_tracked_rows), as a launch writing them would, so that k.grad sees
  // the host's write among the launches'.
  void settle(int which);
  void settle_locked(int which);
  void stamp_changed_rows(buffer_state& b, unsigned char const* now) const;
  // The current values are those the adjoint of the forward launch just run
  // reads (k.grad without a tape): a touch from now on is compared.
  // Launches on several threads may read one field at once, and each
  // watches it: under settle_mutex, as settling is.
  void watch_for_adjoint(int which, std::int64_t extent, row_set const& rows);

  // Views: throws CTG-FIELD-009 when the memory is known to be gone.
  void check_alive(std::string const& field_name) const;

  ~field_storage();
};

// What a tape recording on this thread (tape.hpp) is told of a whole-buffer
// host write of a field's values (fill, copy_from), so that it can keep the
// values an adjoint needs and place the write among the launches it
// records: the write runs inside the call; `adjoint` is what it does in the
// reverse sweep (the values written are constants, so their gradient stops
// there; copied from a field with a gradient, it passes to that field).
struct host_write {
  char const* what = "";  // "fill", "copy_from"
  std::shared_ptr<field_storage> const* target = nullptr;
  std::string const* target_name = nullptr;
  std::shared_ptr<field_storage> const* source = nullptr;  // copied from another field
  std::string const* source_name = nullptr;
  unique_action adjoint;
  // backward() zeroes the gradients of the target and of a source with one
  // first, as it does a launch argument's (field::zero_grad_for_backward).
  std::function<std::function<void()>(bool)> clear_target_gradient, clear_source_gradient;
};
struct host_write_observer {
  virtual void observe(host_write&& w, action_ref write) = 0;

 protected:
  ~host_write_observer() = default;
};
inline host_write_observer*& host_write_observer_of_thread() {
  thread_local host_write_observer* observer = nullptr;
  return observer;
}

// What every field type does alike, written once instead of once per
// element type, rank and flags: a program instantiates field<T, Rank, F>
// for many combinations, and each used to carry its own copy of these
// messages and of the storage's set-up.

// "(4, 3)": the extents of a shape.
CTG_RUNTIME_INLINE std::string shape_string(int const* extents, int rank);

// The storage of a new field: its buffers of `element_bytes` times the
// shape's size, zeroed, in `space`; the values always, the gradient and the
// tangent when asked.
CTG_RUNTIME_INLINE std::shared_ptr<field_storage> new_field_storage(std::string_view name, memory_space space,
                                                                    int const* extents, int rank,
                                                                    std::size_t element_bytes, bool grad, bool dual);

[[noreturn]] CTG_RUNTIME_INLINE void raise_extent_count(std::string_view name, std::size_t given, int rank);

[[noreturn]] CTG_RUNTIME_INLINE void raise_not_on_host(char const* what, std::string const& name, bool empty);

[[noreturn]] CTG_RUNTIME_INLINE void raise_count_mismatch(char const* what, std::string const& name, std::int64_t size,
                                                          std::size_t given);

[[noreturn]] CTG_RUNTIME_INLINE void raise_index_outside(std::string const& name,
                                                         std::initializer_list<std::int64_t> idx, int const* extents,
                                                         int rank);

[[noreturn]] CTG_RUNTIME_INLINE void raise_shape_mismatch(char const* what, std::string const& source,
                                                          int const* source_extents, std::string const& target,
                                                          int const* target_extents, int rank);

// Zeroes a packed buffer of `space` (the memory layer's call is generic in
// the space, so a field type calling it would instantiate its own).
CTG_RUNTIME_INLINE void zero_packed(memory_space space, void* buffer, std::size_t bytes, std::string const& name);

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE std::string describe_index(std::initializer_list<std::int64_t> idx) {
  std::ostringstream os;
  os << '(';
  bool first = true;
  for (auto i : idx) {
    os << (first ? "" : ", ") << i;
    first = false;
  }
  os << ')';
  return os.str();
}

CTG_RUNTIME_INLINE block_form blocks_of(element_layout const& l) {
  int order[4] = {0, 1, 2, 3};
  int const rank = std::clamp(l.rank, 0, 4);
  for (int k = 1; k < rank; ++k)  // insertion sort by stride (at most 4 axes)
    for (int j = k; j > 0 && l.stride[order[j]] < l.stride[order[j - 1]]; --j) std::swap(order[j], order[j - 1]);
  block_form f;
  f.block = std::int64_t(l.element_bytes);
  for (int k = 0; k < rank; ++k) {
    int const a = order[k];
    if (l.extent[a] == 1) continue;
    if (f.axes == 0 && l.stride[a] == f.block) {
      f.block *= l.extent[a];
    } else {
      f.stride[f.axes] = l.stride[a];
      f.extent[f.axes] = l.extent[a];
      ++f.axes;
    }
  }
  return f;
}

CTG_RUNTIME_INLINE std::vector<std::pair<std::uintptr_t, std::uintptr_t>> block_ranges(std::uintptr_t base,
                                                                                       block_form const& f) {
  std::int64_t n = 1;
  for (int a = 0; a < f.axes; ++a) n *= f.extent[a];
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> out;
  out.reserve(std::size_t(n));
  std::int64_t idx[4] = {};
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t off = 0;
    for (int a = 0; a < f.axes; ++a) off += idx[a] * f.stride[a];
    out.emplace_back(base + std::uintptr_t(off), base + std::uintptr_t(off + f.block));
    for (int a = 0; a < f.axes; ++a) {
      if (++idx[a] < f.extent[a]) break;
      idx[a] = 0;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

CTG_RUNTIME_INLINE bool layouts_overlap(void const* a, element_layout const& la, void const* b,
                                        element_layout const& lb) {
  if (a == b && la.count() > 0 && lb.count() > 0) return true;
  std::int64_t const span_a = la.span(), span_b = lb.span();
  if (span_a == 0 || span_b == 0) return false;
  auto const pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  if (pa + std::uintptr_t(span_a) <= pb || pb + std::uintptr_t(span_b) <= pa) return false;
  block_form const fa = blocks_of(la), fb = blocks_of(lb);
  std::int64_t g = 0;
  for (int k = 0; k < fa.axes; ++k) g = std::gcd(g, fa.stride[k]);
  for (int k = 0; k < fb.axes; ++k) g = std::gcd(g, fb.stride[k]);
  if (g == 0) return true;  // two single blocks whose ranges meet
  if (fa.block <= g && fb.block <= g) {
    std::uintptr_t const low = std::min(pa, pb);
    std::int64_t const ra = std::int64_t((pa - low) % std::uintptr_t(g)), rb = std::int64_t((pb - low) % std::uintptr_t(g));
    bool const meet = ((rb - ra) % g + g) % g < fa.block || ((ra - rb) % g + g) % g < fb.block;
    if (!meet) return false;
  }
  std::int64_t const blocks = la.count() + lb.count();
  if (blocks > (std::int64_t(1) << 22)) return true;
  auto const ra = block_ranges(pa, fa), rb = block_ranges(pb, fb);
  std::size_t i = 0, j = 0;
  while (i < ra.size() && j < rb.size()) {
    if (ra[i].second <= rb[j].first)
      ++i;
    else if (rb[j].second <= ra[i].first)
      ++j;
    else
      return true;
  }
  return false;
}

CTG_RUNTIME_INLINE void copy_elements(void* to, element_layout const& dst, void const* from, element_layout const& src,
                                      memory_space space, std::string const& what) {
  std::int64_t const n = src.count();
  if (n == 0) return;
  int const inner = src.rank - 1;
  std::int64_t const rows = inner >= 0 ? src.extent[inner] : 1;
  std::int64_t idx[4] = {};
  for (std::int64_t done = 0; done < n; done += rows) {
    std::int64_t d = 0, s = 0;
    for (int a = 0; a < inner; ++a) d += idx[a] * dst.stride[a], s += idx[a] * src.stride[a];
    auto* out = static_cast<unsigned char*>(to) + d;
    auto const* in = static_cast<unsigned char const*>(from) + s;
    std::size_t const e = src.element_bytes;
    std::int64_t const ds = inner >= 0 ? dst.stride[inner] : 0, ss = inner >= 0 ? src.stride[inner] : 0;
    memory::in_space(space, [&](auto tag) { tag.copy_rows(out, ds, in, ss, e, rows, what); });
    for (int a = inner - 1; a >= 0; --a) {
      if (++idx[a] < src.extent[a]) break;
      idx[a] = 0;
    }
  }
}

CTG_RUNTIME_INLINE element_layout field_storage::layout_of(int which) const {
  element_layout l = layout;
  if (packed_companion[which]) l.pack();
  return l;
}

CTG_RUNTIME_INLINE void* field_storage::allocate_bytes(std::size_t requested) const {
  std::size_t const n = requested ? requested : 1;
  std::string const what = field_what(name);
  return memory::in_space(space, [&](auto tag) {
    void* p = detail::copy_cache::after_trim_if_needed(tag.space == memory_space::device,
                                                       [&] { return tag.allocate(n, what); });
    tag.zero(p, n, what);
    return p;
  });
}

CTG_RUNTIME_INLINE void field_storage::release(void* p) noexcept {
  memory::in_space(space, [p](auto tag) { tag.release(p); });
}

CTG_RUNTIME_INLINE void field_storage::copy_within_space(void* dst, void const* src) const {
  if (bytes == 0) return;
  bool const into_buffer = dst == primal || dst == grad || dst == dual;
  void const* const buffer_side = into_buffer ? dst : src;
  int const which = buffer_side == primal ? 0 : buffer_side == grad ? 1 : 2;
  if (strided_buffer(which)) {
    element_layout packed_layout = layout;
    packed_layout.pack();
    if (into_buffer)
      copy_elements(dst, layout, src, packed_layout, space, field_what(name));
    else
      copy_elements(dst, packed_layout, src, layout, space, field_what(name));
    return;
  }
  memory::in_space(space, [&](auto tag) { tag.copy(dst, src, bytes, field_what(name)); });
}

CTG_RUNTIME_INLINE void field_storage::note_write(int which, bool bulk) {
  buffer_state& b = state[which];
  b.touched = false;
  b.snapshot.clear();
  std::uint64_t const before = b.version++;
  if (bulk)
    b.bulk_stamp = next_write_stamp();
  else if (b.forward_watched == before)
    b.forward_watched = b.version;
}

CTG_RUNTIME_INLINE CTG_NOINLINE void field_storage::note_rows_write(int which, row_set const& rows, std::int64_t extent,
                                                                    bool host_write_checks) {
  buffer_state& b = state[which];
  bool in_range = !rows.all() && tracks_rows(extent);
  for (int k = 0; in_range && k < rows.count; ++k) in_range = rows.rows[k] >= 0 && rows.rows[k] < extent;
  if (host_write_checks && in_range && b.touched) settle(which);
  note_write(which, !in_range);
  if (!in_range) return;
  std::uint64_t const stamp = new_row_stamp(b, extent);
  for (int k = 0; k < rows.count; ++k) b.row_stamps[std::size_t(rows.rows[k])] = stamp;
}

CTG_RUNTIME_INLINE std::uint64_t field_storage::new_row_stamp(buffer_state& b, std::int64_t extent) {
  if (b.row_stamps.size() != std::size_t(extent)) b.row_stamps.assign(std::size_t(extent), 0);
  b.latest_row_stamp = next_write_stamp();
  return b.latest_row_stamp;
}

CTG_RUNTIME_INLINE CTG_NOINLINE void field_storage::note_launch_write(int which, row_set const& rows,
                                                                      std::int64_t extent, void const* recorder,
                                                                      bool host_write_checks) {
  note_rows_write(which, rows, extent, host_write_checks);
  buffer_state& b = state[which];
  b.launch_version = b.version;
  b.launch_stamp = next_write_stamp();
  b.launch_recorder = recorder;
}

CTG_RUNTIME_INLINE CTG_NOINLINE bool field_storage::rows_written_after(int which, row_set const& rows,
                                                                       std::uint64_t stamp) const {
  buffer_state const& b = state[which];
  if (b.bulk_stamp > stamp) return true;
  if (b.latest_row_stamp <= stamp) return false;
  if (rows.all()) return true;
  for (int k = 0; k < rows.count; ++k) {
    std::size_t const r = std::size_t(rows.rows[k]);
    if (rows.rows[k] < 0 || r >= b.row_stamps.size() || b.row_stamps[r] > stamp) return true;
  }
  return false;
}

CTG_RUNTIME_INLINE CTG_NOINLINE void field_storage::touch(int which, std::int64_t extent, bool host_write_checks) {
  buffer_state& b = state[which];
  if (b.touched) return;
  std::lock_guard lock(settle_mutex);
  if (b.touched) return;
  b.touched = true;
  b.first_axis_extent = extent;
  bool const needed = b.watched == b.version || (host_write_checks && b.forward_watched == b.version);
  if (needed && space == memory_space::host) gather(which, b.snapshot);
}

// Eight bytes at a time, each word multiplied into the running value (odd
// multipliers, a rotation between words), the tail zero-padded, the length
// mixed in last.
inline std::uint64_t digest_bytes(unsigned char const* p, std::size_t n) {
  std::uint64_t h = 0x243f6a8885a308d3ull;
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + k, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h = (h << 29) | (h >> 35);
  }
  if (k < n) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + k, n - k);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
  }
  h ^= std::uint64_t(n);
  h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

CTG_RUNTIME_INLINE std::uint64_t field_storage::contents_digest(int which) const {
  row_set all;
  all.add_all();
  std::vector<std::uint64_t> one;
  row_digests(which, 0, all, one);
  return one[0];
}

CTG_RUNTIME_INLINE bool field_storage::rows_digestible(std::int64_t extent, row_set const& rows) const {
  if (rows.all() || !tracks_rows(extent) || bytes % std::size_t(extent) != 0) return false;
  for (int k = 0; k < rows.count; ++k)
    if (rows.rows[k] < 0 || rows.rows[k] >= extent) return false;
  return true;
}

CTG_RUNTIME_INLINE void field_storage::row_digests(int which, std::int64_t extent, row_set const& rows,
                                                   std::vector<std::uint64_t>& out) const {
  std::vector<unsigned char> gathered;
  auto const* p = static_cast<unsigned char const*>(buffer(which));
  if (strided_buffer(which)) {
    gather(which, gathered);
    p = gathered.data();
  }
  if (!rows_digestible(extent, rows)) {
    out.assign(1, digest_bytes(p, bytes));
    return;
  }
  std::size_t const row_bytes = bytes / std::size_t(extent);
  out.resize(std::size_t(rows.count));
  for (int k = 0; k < rows.count; ++k)
    out[std::size_t(k)] = digest_bytes(p + std::size_t(rows.rows[k]) * row_bytes, row_bytes);
}

CTG_RUNTIME_INLINE bool field_storage::rows_as_forward_left(int which, std::int64_t extent, row_set const& rows) {
  // Under settle_mutex: a forward launch on another thread may be watching.
  std::lock_guard lock(settle_mutex);
  buffer_state const& b = state[which];
  if (b.forward_watched != b.version || space != memory_space::host || b.forward_digests.empty()) return true;
  std::vector<std::uint64_t> now;
  row_digests(which, extent, b.forward_digest_rows, now);
  if (now.size() != b.forward_digests.size()) return true;  // digested with another extent
  if (b.forward_digest_rows.all()) return now == b.forward_digests;
  for (int k = 0; k < b.forward_digest_rows.count; ++k) {
    bool asked = rows.all();
    for (int l = 0; l < rows.count && !asked; ++l) asked = rows.rows[l] == b.forward_digest_rows.rows[k];
    if (asked && now[std::size_t(k)] != b.forward_digests[std::size_t(k)]) return false;
  }
  return true;
}

CTG_RUNTIME_INLINE void field_storage::gather(int which, std::vector<unsigned char>& out) const {
  auto const* p = static_cast<unsigned char const*>(buffer(which));
  if (!strided_buffer(which)) {
    out.assign(p, p + bytes);
    return;
  }
  out.resize(bytes);
  element_layout packed_layout = layout;
  packed_layout.pack();
  copy_elements(out.data(), packed_layout, p, layout, memory_space::host, name);
}

CTG_RUNTIME_INLINE CTG_NOINLINE void field_storage::settle(int which) {
  std::lock_guard lock(settle_mutex);
  settle_locked(which);
}

CTG_RUNTIME_INLINE void field_storage::settle_locked(int which) {
  buffer_state& b = state[which];
  if (!b.touched) return;
  b.touched = false;
  if (bytes == 0) return;
  if (b.snapshot.size() != bytes) {  // nothing to compare: a write of the version only
    b.snapshot.clear();
    ++b.version;
    return;
  }
  std::vector<unsigned char> gathered;
  unsigned char const* now = static_cast<unsigned char const*>(buffer(which));
  if (strided_buffer(which)) {
    gather(which, gathered);
    now = gathered.data();
  }
  if (std::memcmp(b.snapshot.data(), now, bytes) != 0) {
    // The rows the host did not write still hold what a forward launch
    // left: its adjoint keeps watching them.
    std::uint64_t const before = b.version++;
    if (b.forward_watched == before) b.forward_watched = b.version;
    stamp_changed_rows(b, now);
  }
  b.snapshot.clear();  // keeps its memory for the next touch
}

CTG_RUNTIME_INLINE void field_storage::stamp_changed_rows(buffer_state& b, unsigned char const* now) const {
  std::int64_t const rows = b.first_axis_extent;
  if (!tracks_rows(rows) || bytes % std::size_t(rows) != 0) {
    b.bulk_stamp = next_write_stamp();
    return;
  }
  std::uint64_t const stamp = new_row_stamp(b, rows);
  std::size_t const row_bytes = bytes / std::size_t(rows);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::size_t const at = std::size_t(r) * row_bytes;
    if (std::memcmp(b.snapshot.data() + at, now + at, row_bytes) != 0) b.row_stamps[std::size_t(r)] = stamp;
  }
}

CTG_RUNTIME_INLINE void field_storage::watch_for_adjoint(int which, std::int64_t extent, row_set const& rows) {
  std::lock_guard lock(settle_mutex);
  settle_locked(which);
  buffer_state& b = state[which];
  b.forward_watched = b.version;
  // Again at every forward launch, the version alone cannot say: the launch
  // may have run on values written behind ctgrad, and k.grad will read those.
  if (space != memory_space::host) return;
  row_digests(which, extent, rows, b.forward_digests);
  b.forward_digest_rows = rows;
  if (!rows_digestible(extent, rows)) b.forward_digest_rows.add_all();
}

CTG_RUNTIME_INLINE void field_storage::check_alive(std::string const& field_name) const {
  if (watch_owner && memory_owner.expired())
    throw launch_error("CTG-FIELD-009 field '" + field_name +
                       "' views memory whose owner is gone (the object given as .owner expired): the view "
                       "outlived its memory. Fix: keep the memory alive while any handle on the view is, or "
                       "view it again");
  if (space == memory_space::device && primal && memory::device_space::compiled) {
    memory::pointer_kind const kind = memory::device_space::kind_of(primal);
    if (kind != memory::pointer_kind::device && kind != memory::pointer_kind::managed)
      throw launch_error("CTG-FIELD-009 field '" + field_name +
                         "' views device memory that is no longer allocated (cudaFree'd?): the view outlived its "
                         "memory. Fix: free the memory only after the last handle on the view is gone");
  }
}

CTG_RUNTIME_INLINE field_storage::~field_storage() {
  if (owned[0]) release(primal);
  if (owned[1]) release(grad);
  if (owned[2]) release(dual);
}

CTG_RUNTIME_INLINE std::string shape_string(int const* extents, int rank) {
  std::ostringstream os;
  os << '(';
  for (int a = 0; a < rank; ++a) os << (a ? ", " : "") << extents[a];
  os << ')';
  return os.str();
}

CTG_RUNTIME_INLINE std::shared_ptr<field_storage> new_field_storage(std::string_view name, memory_space space,
                                                                    int const* extents, int rank,
                                                                    std::size_t element_bytes, bool grad, bool dual) {
  std::size_t count = 1;
  for (int a = 0; a < rank; ++a) {
    if (extents[a] < 0)
      throw launch_error("field '" + std::string(name) + "': negative extent " + std::to_string(extents[a]) +
                         " on axis " + std::to_string(a));
    count *= std::size_t(extents[a]);
  }
  auto s = std::make_shared<field_storage>();
  s->space = space;
  s->name = name.empty() ? std::string("<unnamed>") : std::string(name);
  s->bytes = count * element_bytes;
  s->primal = s->allocate();
  if (grad) s->grad = s->allocate();
  if (dual) s->dual = s->allocate();
  return s;
}

CTG_RUNTIME_INLINE void raise_extent_count(std::string_view name, std::size_t given, int rank) {
  throw launch_error("field '" + std::string(name) + "': " + std::to_string(given) +
                     " extents given for a field of rank " + std::to_string(rank));
}

CTG_RUNTIME_INLINE void raise_not_on_host(char const* what, std::string const& name, bool empty) {
  if (empty) throw launch_error(std::string(what) + " on an empty field handle");
  throw launch_error(std::string(what) + " on device field '" + name +
                     "': copy it to the host first (to_vector(), copy_to() or clone(ctg::host))");
}

CTG_RUNTIME_INLINE void raise_count_mismatch(char const* what, std::string const& name, std::int64_t size,
                                             std::size_t given) {
  throw launch_error(std::string(what) + ": field '" + name + "' holds " + std::to_string(size) +
                     " elements, the buffer " + std::to_string(given));
}

CTG_RUNTIME_INLINE void raise_index_outside(std::string const& name, std::initializer_list<std::int64_t> idx,
                                            int const* extents, int rank) {
  throw index_error("field '" + name + "': index " + describe_index(idx) + " is outside its shape " +
                    shape_string(extents, rank));
}

CTG_RUNTIME_INLINE void raise_shape_mismatch(char const* what, std::string const& source, int const* source_extents,
                                             std::string const& target, int const* target_extents, int rank) {
  throw launch_error(std::string(what) + ": field '" + source + "' has shape " + shape_string(source_extents, rank) +
                     ", field '" + target + "' has shape " + shape_string(target_extents, rank));
}

CTG_RUNTIME_INLINE void zero_packed(memory_space space, void* buffer, std::size_t bytes, std::string const& name) {
  memory::in_space(space, [&](auto tag) { tag.zero(buffer, bytes, field_what(name)); });
}
#endif  // CTG_RUNTIME_DEFINITIONS

// A field handle on memory ctgrad does not own (view.hpp builds these).
struct adopt_memory_t {};
template <class T, int Rank>
struct adopted_memory {
  std::shared_ptr<field_storage> storage;
  T* data = nullptr;
  T* grad = nullptr;
  T* dual = nullptr;
  std::array<int, Rank> shape{};
  std::array<std::int64_t, Rank> stride{};  // bytes, of the values
  std::array<std::int64_t, Rank> grad_stride{}, dual_stride{};  // bytes, of the companions
  std::string name;
  memory_space space = memory_space::host;
};

// What a field handle owns: a share of its storage, and its name (a view's
// may differ from its storage's). Copied, moved and destroyed out of line,
// by functions that are the same for every field type. Inline, each field
// type's copies and destructions spelled out a reference count and a
// string's buffer again, wherever handles are copied: the arguments a tape
// keeps for each launch's adjoint, a kernel's launches, the examples' state.
// In a namespace of its own: a base class's namespace joins its derived
// class's argument-dependent lookup, and one that holds no functions adds
// none to a call with a field argument (ctg::detail's make_tuple would make
// a user's unqualified make_tuple(f, 1) ambiguous).
namespace ownership {
class field_ownership {
 protected:
  field_ownership() = default;
  explicit field_ownership(std::shared_ptr<field_storage> storage)
      : owner_(std::move(storage)), name_(owner_->name) {}
  field_ownership(std::shared_ptr<field_storage> storage, std::string name) noexcept
      : owner_(std::move(storage)), name_(std::move(name)) {}
  CTG_NOINLINE field_ownership(field_ownership const&) = default;
  CTG_NOINLINE field_ownership(field_ownership&&) noexcept = default;
  CTG_NOINLINE field_ownership& operator=(field_ownership&&) noexcept = default;
  CTG_NOINLINE ~field_ownership() = default;
  field_ownership& operator=(field_ownership const& other);

  std::shared_ptr<field_storage> owner_;
  std::string name_;
};

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE CTG_NOINLINE field_ownership& field_ownership::operator=(field_ownership const& other) {
  // The name first: if copying it throws, the handle still describes the
  // storage it holds.
  std::string name = other.name_;
  owner_ = other.owner_;
  name_ = std::move(name);
  return *this;
}
#endif  // CTG_RUNTIME_DEFINITIONS

}  // namespace ownership
using ownership::field_ownership;

}  // namespace detail

template <class T, int Rank, flags Flags = flags::none>
class field : detail::field_ownership {
  static_assert(Rank >= 0 && Rank <= 4, "CTG-FIELD-003 a field's rank must be between 0 and 4");
  static_assert(is_element_type_v<T>,
                "CTG-FIELD-002 unsupported element type: a field holds float, double, "
                "integers, bool, or a fixed-size Eigen matrix of those");
  static_assert(!has_flag(Flags, flags::grad) || is_differentiable_v<T>,
                "CTG-FIELD-001 ctg::grad on a field whose element type is not floating-point: "
                "integer and boolean values carry no gradient; drop ctg::grad or store the "
                "value as float/double");
  static_assert(!has_flag(Flags, flags::dual) || is_differentiable_v<T>,
                "CTG-FIELD-001 ctg::dual on a field whose element type is not floating-point: "
                "integer and boolean values carry no tangent; drop ctg::dual or store the "
                "value as float/double");

 public:
  using value_type = T;
  using shape_type = std::array<int, Rank>;
  static constexpr int rank = Rank;
  static constexpr flags field_flags = Flags;
  static constexpr bool has_grad = has_flag(Flags, flags::grad);
  static constexpr bool has_dual = has_flag(Flags, flags::dual);
  static constexpr bool is_strided = has_flag(Flags, flags::strided);
  using view_type = std::conditional_t<is_strided, strided_field_view<T, Rank, has_grad, has_dual>,
                                       field_view<T, Rank, has_grad, has_dual>>;
  // What grad() and dual() return: a field of the same type (a buffer ctgrad
  // allocated for a strided view is packed; strides() says where it lies).
  using companion_type = field<T, Rank, Flags & flags::strided>;

  // A rank-0 field always holds one value; a default-constructed field of
  // higher rank is an empty handle to be assigned later.
  field() requires(Rank == 0) : field(shape_type{}, field_options{}) {}
  field() requires(Rank > 0) = default;

  template <std::integral... E>
    requires(sizeof...(E) == Rank && Rank > 0)
  explicit field(E... extents) : field(shape_type{int(extents)...}, field_options{}) {}

  explicit field(field_options opts) requires(Rank == 0) : field(shape_type{}, opts) {}

  // field<float, 2> f({rows, cols}, {.name = "f", .space = ctg::device}).
  field(std::initializer_list<int> shape, field_options opts = {}) : field(to_shape(shape, opts.name), opts) {}

  explicit field(shape_type shape, field_options opts = {})
      : field_ownership(
            detail::new_field_storage(opts.name, opts.space, shape.data(), Rank, sizeof(T), has_grad, has_dual)),
        data_(static_cast<T*>(owner_->primal)),
        grad_(static_cast<T*>(owner_->grad)),
        dual_(static_cast<T*>(owner_->dual)),
        shape_(shape),
        space_(opts.space) {
    if constexpr (is_strided) pack_strides();
  }

  // A handle on memory described by `m` (ctg::view and the adoptions of
  // view.hpp build it, after checking the layout).
  field(detail::adopt_memory_t, detail::adopted_memory<T, Rank> m)
      : field_ownership(std::move(m.storage), std::move(m.name)),
        data_(m.data),
        grad_(m.grad),
        dual_(m.dual),
        shape_(m.shape),
        space_(m.space) {
    if constexpr (is_strided) {
      stride_ = m.stride;
      grad_stride_ = m.grad_stride;
      dual_stride_ = m.dual_stride;
    } else
      for (int a = 0; a < Rank; ++a)
        if (shape_[a] != 1 && m.stride[a] != packed_stride(a))
          throw launch_error("CTG-FIELD-007 field '" + name_ +
                             "': the memory is not packed row-major; declare the field ctg::strided");
  }

  // ---- shape -------------------------------------------------------------
  shape_type const& shape() const { return shape_; }
  int extent(int axis) const { return shape_[std::size_t(axis)]; }
  std::int64_t size() const {
    std::int64_t n = 1;
    for (int a = 0; a < Rank; ++a) n *= shape_[a];
    return n;
  }
  std::string const& name() const { return name_; }
  memory_space space() const { return space_; }
  // Byte strides per axis (row-major packed unless the field views strided
  // memory).
  std::array<std::int64_t, Rank> strides() const {
    if constexpr (is_strided) {
      return stride_;
    } else {
      std::array<std::int64_t, Rank> out{};
      for (int a = 0; a < Rank; ++a) out[std::size_t(a)] = packed_stride(a);
      return out;
    }
  }
  // Where this handle's elements lie (the aliasing check compares layouts).
  detail::element_layout layout() const { return layout_of(0); }
  bool empty() const { return owner_ == nullptr; }
  // The elements' memory. Writes through it leave no trace in the versions:
  // only digests find them (a tape's, CTG-TAPE-014; with the host-write
  // checks, k.grad's, CTG-TAPE-003).
  T* data() const { return data_; }
  // How many handles share this storage (the storage lives until the last goes).
  long use_count() const { return owner_.use_count(); }

  // ---- element access (host fields) ---------------------------------------
  // On a non-const handle the element may be written through the reference:
  // the buffer is marked touched (see detail::buffer_state). Reads through a
  // const handle (std::as_const(f).at(i)) never count as writes.
  template <std::integral... I>
    requires(sizeof...(I) == Rank)
  T& at(I... idx) {
    T& e = element(idx...);
    owner_->touch(which_, first_extent());
    return e;
  }
  template <std::integral... I>
    requires(sizeof...(I) == Rank)
  T const& at(I... idx) const {
    return element(idx...);
  }

  // ---- write tracking (see detail::buffer_state and tape.hpp) ----------------
  // Records that something wrote this handle's buffer (kernels call it for
  // the fields they write; host operations of this class call it themselves).
  void note_write() const {
    if (owner_) owner_->note_write(which_);
  }
  // Turns an at() touch into a write when the contents changed (or when no
  // copy can tell); called before versions are compared.
  void settle() const {
    if (owner_) owner_->settle(which_);
  }
  // The extent of the first axis, whose rows writes are tracked by (0 for
  // rank 0).
  std::int64_t first_extent() const {
    if constexpr (Rank == 0)
      return 0;
    else
      return shape_[0];
  }
  // The forward launch just run left the values its adjoint reads (see
  // CTG_HOST_WRITE_CHECKS).
  void watch_for_adjoint(detail::row_set const& rows) const {
    if (owner_) owner_->watch_for_adjoint(which_, first_extent(), rows);
  }
  // Whether the rows `rows` hold what the last forward launch that watched
  // the field left, as far as digests tell (CTG_HOST_WRITE_CHECKS).
  bool rows_as_forward_left(detail::row_set const& rows) const {
    return owner_ == nullptr || owner_->rows_as_forward_left(which_, first_extent(), rows);
  }
  std::uint64_t version() const {
    settle();
    return owner_ ? owner_->state[which_].version : 0;
  }
  // The same for a launch that wrote only `rows` of the first axis, under
  // the tape `recorder` (the one recording on the launching thread, or none).
  void note_launch_write(detail::row_set const& rows, void const* recorder) const {
    if (owner_) owner_->note_launch_write(which_, rows, first_extent(), recorder);
  }
  // Whether a launch or a whole-field operation wrote `rows` of the first
  // axis after the write stamped `stamp` (detail::next_write_stamp).
  bool rows_written_after(detail::row_set const& rows, std::uint64_t stamp) const {
    return owner_ && owner_->rows_written_after(which_, rows, stamp);
  }
  // The storage and which of its buffers this handle names (identity for the tape).
  std::shared_ptr<detail::field_storage> const& storage() const { return owner_; }
  int buffer_index() const { return which_; }

  // ---- companion buffers --------------------------------------------------
  // The gradient buffer as a field of the same shape (shares ownership).
  companion_type grad() const {
    static_assert(has_grad,
                  "CTG-FIELD-004 grad() on a field without a gradient buffer: declare it "
                  "ctg::field<T, Rank, ctg::grad>");
    return companion(grad_, 1, ".grad");
  }
  // The tangent buffer as a field of the same shape (shares ownership).
  companion_type dual() const {
    static_assert(has_dual,
                  "CTG-FIELD-004 dual() on a field without a tangent buffer: declare it "
                  "ctg::field<T, Rank, ctg::dual>");
    return companion(dual_, 2, ".dual");
  }

  // ---- whole-field operations ---------------------------------------------
  // Under a tape, these are recorded (detail::host_write_observer): the
  // values they write are constants to the adjoints, and a field copied from
  // another passes its gradient back to it.
  void fill(T const& value) const {
    observed_write("fill", nullptr, [&] {
      if (space_ == memory_space::host && !is_strided) {
        std::fill(data_, data_ + size(), value);
        note_write();
      } else {
        std::vector<T> tmp(std::size_t(size()), value);
        copy_values(std::span<T const>(tmp));
      }
    });
  }
  void zero_grad() const {
    static_assert(has_grad, "CTG-FIELD-004 zero_grad() on a field without a gradient buffer");
    zero_buffer(grad_, 1);
    owner_->note_write(1);
  }
  // Zeroes the gradient before a tape's backward(); with `keep`
  // (ctg::keep_gradients) copies it first and returns what adds the copy
  // back once backward() is done, so that the gradient is added to what was
  // there, and none of it flows through the adjoints as if it were theirs.
  std::function<void()> zero_grad_for_backward(bool keep) const {
    if constexpr (has_grad) {
      std::function<void()> add_back;
      if (keep) {
        auto kept = std::make_shared<std::vector<T>>(grad().to_vector());
        add_back = [target = *this, kept] { target.add_to_gradient(*kept); };
      }
      zero_grad();
      return add_back;
    } else {
      (void)keep;
      return {};
    }
  }
  void zero_dual() const {
    static_assert(has_dual, "CTG-FIELD-004 zero_dual() on a field without a tangent buffer");
    zero_buffer(dual_, 2);
    owner_->note_write(2);
  }

  void copy_from(std::span<T const> src) const {
    check_count(src.size(), "copy_from");
    observed_write("copy_from", nullptr, [&] { copy_values(src); });
  }
  void copy_from(std::vector<T> const& src) const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits
      std::unique_ptr<bool[]> tmp(new bool[src.size()]);
      std::copy(src.begin(), src.end(), tmp.get());
      copy_from(std::span<bool const>(tmp.get(), src.size()));
    } else {
      copy_from(std::span<T const>(src));
    }
  }
  void copy_to(std::span<T> dst) const {
    check_count(dst.size(), "copy_to");
    copy_bytes(dst.data(), data_, /*to_field=*/false);
  }
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits
      std::unique_ptr<bool[]> tmp(new bool[std::size_t(size())]);
      copy_to(std::span<bool>(tmp.get(), std::size_t(size())));
      return std::vector<bool>(tmp.get(), tmp.get() + size());
    } else {
      std::vector<T> out(static_cast<std::size_t>(size()));
      copy_to(std::span<T>(out));
      return out;
    }
  }
  // Copies values (not gradients) from another field of the same shape, in
  // either memory space.
  template <flags F2>
  void copy_from(field<T, Rank, F2> const& other) const {
    if (other.shape() != shape_)
      detail::raise_shape_mismatch("copy_from", other.name(), other.shape().data(), name_, shape_.data(), Rank);
    // A field copied into itself (the same buffer) is left as it is: a write
    // would be a change to a tape, and an adjoint the identity.
    if (other.storage() == owner_ && other.buffer_index() == which_) return;
    auto write = [&] {
      if (space_ == memory_space::host && other.space() == memory_space::host && !is_strided &&
          !field<T, Rank, F2>::is_strided) {
        std::copy(other.data(), other.data() + size(), data_);
        note_write();
      } else {
        std::vector<T> const values = other.to_vector();
        copy_values(std::span<T const>(values));
      }
    };
    if constexpr (field<T, Rank, F2>::has_grad) {
      if (other.buffer_index() == 0) {
        observed_write("copy_from", &other, write, [target = *this, source = other] {
          source.add_gradient(target);
          target.clear_gradient();
        }, [source = other](bool keep) { return source.zero_grad_for_backward(keep); });
        return;
      }
    }
    observed_write("copy_from", nullptr, write);
  }
  // A new field of the same type and shape in `space`, holding a copy of the
  // values (gradient and tangent buffers start at zero).
  field clone(memory_space space) const {
    field out(shape_, field_options{name_, space});
    out.copy_from(*this);
    return out;
  }

  // ---- Eigen views (host, scalar element types) ----------------------------
  // Rank 1: a column vector; rank 2: a row-major matrix; rank 0: a 1x1 matrix.
  // The views are writable (w.map() -= rate * w.grad().map()), so taking one
  // marks the buffer touched, as at() does: a write through it between a
  // tape's recording and its backward() is caught (CTG-TAPE-003). A view
  // kept across a launch is not watched after that launch; take it again.
  auto map() const {
    static_assert(!is_strided, "map() views packed fields; a ctg::strided field is read with to_vector() or at()");
    require_host("map()");
    static_assert(std::is_arithmetic_v<T>, "map() views scalar fields; use flat() per coefficient");
    if (owner_) owner_->touch(which_, first_extent());
    if constexpr (Rank == 0)
      return Eigen::Map<Eigen::Matrix<T, 1, 1>>(data_);
    else if constexpr (Rank == 1)
      return Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>>(data_, shape_[0]);
    else if constexpr (Rank == 2)
      return Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          data_, shape_[0], shape_[1]);
    else
      return flat();
  }
  // All coefficients in row-major order as one column vector.
  auto flat() const {
    static_assert(!is_strided, "flat() views packed fields; a ctg::strided field is read with to_vector() or at()");
    require_host("flat()");
    if (owner_) owner_->touch(which_, first_extent());  // writable: see map()
    using S = scalar_of_t<T>;
    return Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>(reinterpret_cast<S*>(data_),
                                                           Eigen::Index(size()) * coefficients_v<T>);
  }

  // ---- kernel side -----------------------------------------------------------
  view_type view() const {
#if CTG_VIEW_CHECKS
    if (owner_ && !owner_->owned[0]) owner_->check_alive(name_);
#endif
    if constexpr (is_strided) {
      view_type v{{data_, {}, {}}, {grad_, {}, {}}, {dual_, {}, {}}, {}, {}};
      for (int a = 0; a < Rank; ++a) {
        v.extent[a] = v.data.extent[a] = v.grad.extent[a] = v.dual.extent[a] = shape_[a];
        v.stride[a] = v.data.stride[a] = stride_[a];
        v.grad.stride[a] = grad_stride_[a];
        v.dual.stride[a] = dual_stride_[a];
      }
      return v;
    } else {
      view_type v{data_, grad_, dual_, {}};
      for (int a = 0; a < Rank; ++a) v.extent[a] = shape_[a];
      return v;
    }
  }
  // A field passed to one launch under two parameter names and read under
  // both: the adjoint gathers the second name's share of the gradient in a
  // zeroed buffer of its own (`share`, from gradient_share()), bound in place
  // of this gradient, and adds it in once the launch has run
  // (kernel_t::launch), so that the shares never meet in one buffer within a
  // launch that was planned for two.
  companion_type gradient_share() const {
    static_assert(has_grad, "gradient_share() on a field without a gradient buffer");
    return companion_type(shape_, field_options{name_ + ".grad (second name)", space_});
  }
  view_type view_with_gradient(companion_type const& share) const {
    view_type v = view();
    v.grad = share.view().data;
    return v;
  }
  void add_gradient_share(companion_type const& share) const { add_to_gradient(share.to_vector()); }

  // Identity of the buffer this handle's values live in, used to detect two
  // kernel arguments naming the same field (a companion such as x.grad() is a
  // different buffer).
  void const* storage_id() const { return data_; }

  std::string shape_string() const { return detail::shape_string(shape_.data(), Rank); }

 private:
  template <class, int, flags>
  friend class field;

  // Adds the gradient of `other` (same shape) into this field's gradient:
  // the adjoint of this field's values copied into `other`.
  template <flags F2>
  void add_gradient(field<T, Rank, F2> const& other) const {
    if constexpr (has_grad && field<T, Rank, F2>::has_grad) add_to_gradient(other.grad().to_vector());
  }
  // Adds packed values (one per element) into the gradient, in its space.
  void add_to_gradient(std::vector<T> const& more) const {
    std::vector<T> sum = grad().to_vector();
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] = sum[k] + more[k];
    grad().copy_from(sum);
  }
  // Zeroes the gradient, if there is one: the adjoint of an overwrite.
  void clear_gradient() const {
    if constexpr (has_grad) zero_grad();
  }

  // Copies packed values into the buffer (in its memory space, through its
  // strides) and marks the write.
  void copy_values(std::span<T const> src) const {
    copy_bytes(data_, src.data(), /*to_field=*/true);
    note_write();
  }
  // Runs `write`, a whole-buffer write of this handle's values, where a tape
  // recording on this thread sees it (detail::host_write_observer). Writes
  // to a gradient or tangent buffer are the tape's own business.
  // `write` is erased (detail::action_ref), so that the closures built here
  // are one type per field type, not one per kind of write.
  void observed_write(char const* what, std::nullptr_t, detail::action_ref write) const {
    observed_write(what, static_cast<field const*>(nullptr), write, [target = *this] { target.clear_gradient(); },
                   nullptr);
  }
  template <class Source, class Adjoint, class ClearSource>
  void observed_write(char const* what, Source const* source, detail::action_ref write, Adjoint&& adjoint,
                      ClearSource&& clear_source) const {
    detail::host_write_observer* const observer = detail::host_write_observer_of_thread();
    if (observer == nullptr || owner_ == nullptr || which_ != 0) {
      write();
      return;
    }
    detail::host_write w;
    w.what = what;
    w.target = &owner_;
    w.target_name = &name_;
    if (source) {
      w.source = &source->storage();
      w.source_name = &source->name();
    }
    w.adjoint = std::forward<Adjoint>(adjoint);
    if constexpr (has_grad)
      w.clear_target_gradient = [target = *this](bool keep) { return target.zero_grad_for_backward(keep); };
    w.clear_source_gradient = std::forward<ClearSource>(clear_source);
    observer->observe(std::move(w), write);
  }

  static shape_type to_shape(std::initializer_list<int> list, std::string_view name) {
    if (list.size() != std::size_t(Rank)) detail::raise_extent_count(name, list.size(), Rank);
    shape_type s{};
    std::size_t a = 0;
    for (int e : list) s[a++] = e;
    return s;
  }

  struct no_allocation {};
  explicit field(no_allocation) {}

  template <class... I>
  T& element(I... idx) const {
    require_host("at()");
#if CTG_BOUNDS_CHECK
    if (!view().in_bounds(idx...))
      detail::raise_index_outside(name_, {std::int64_t(idx)...}, shape_.data(), Rank);
#endif
    return *(data_ + view().offset(idx...));
  }

  companion_type companion(T* buffer, int which, char const* suffix) const {
    companion_type c{typename companion_type::no_allocation{}};
    if constexpr (is_strided) c.stride_ = which == 1 ? grad_stride_ : dual_stride_;
    c.which_ = which;
    c.shape_ = shape_;
    c.data_ = buffer;
    c.name_ = name_ + suffix;
    c.space_ = space_;
    c.owner_ = owner_;
    return c;
  }
  void require_host(char const* what) const {
    if (owner_ == nullptr || space_ != memory_space::host) detail::raise_not_on_host(what, name_, owner_ == nullptr);
  }
  void check_count(std::size_t n, char const* what) const {
    if (std::int64_t(n) != size()) detail::raise_count_mismatch(what, name_, size(), n);
  }
  std::int64_t packed_stride(int axis) const {
    std::int64_t s = std::int64_t(sizeof(T));
    for (int a = Rank - 1; a > axis; --a) s *= shape_[a];
    return s;
  }
  // Where the elements of this handle's buffer `which` lie (0 its values, 1
  // its gradient, 2 its tangent).
  detail::element_layout layout_of(int which) const {
    detail::element_layout l;
    l.rank = Rank;
    l.element_bytes = sizeof(T);
    for (int a = 0; a < Rank; ++a) {
      l.extent[a] = shape_[std::size_t(a)];
      if constexpr (is_strided)
        l.stride[a] = (which == 0 ? stride_ : which == 1 ? grad_stride_ : dual_stride_)[std::size_t(a)];
      else
        l.stride[a] = packed_stride(a);
    }
    return l;
  }
  void pack_strides() {
    for (int a = 0; a < Rank; ++a)
      stride_[std::size_t(a)] = grad_stride_[std::size_t(a)] = dual_stride_[std::size_t(a)] = packed_stride(a);
  }
  // Between the elements of this handle's buffer `which` (0 its values) and a
  // packed buffer (either memory space).
  void copy_strided(void* dst, void const* src, bool to_field, int which = 0) const {
    detail::element_layout const mine = layout_of(which);
    detail::element_layout packed_layout = mine;
    packed_layout.pack();
    if (to_field)
      detail::copy_elements(dst, mine, src, packed_layout, space_, detail::field_what(name_));
    else
      detail::copy_elements(dst, packed_layout, src, mine, space_, detail::field_what(name_));
  }
  void copy_bytes(void* dst, void const* src, bool to_field) const {
    if constexpr (is_strided) {
      if (!layout().packed()) return copy_strided(dst, src, to_field);
    }
    std::size_t const bytes = std::size_t(size()) * sizeof(T);
    if (to_field)
      memory::write_from_host(space_, dst, src, bytes, detail::field_what(name_));
    else
      memory::read_to_host(space_, dst, src, bytes, detail::field_what(name_));
  }
  void zero_buffer(T* buffer, int which) const {
    if constexpr (is_strided) {
      if (!layout_of(which).packed()) {
        std::vector<unsigned char> zeros(std::size_t(size()) * sizeof(T), 0);
        return copy_strided(buffer, zeros.data(), true, which);
      }
    }
    detail::zero_packed(space_, buffer, std::size_t(size()) * sizeof(T), name_);
  }

  int which_ = 0;  // the storage buffer this handle's values are: 0 primal, 1 gradient, 2 tangent
  T* data_ = nullptr;
  T* grad_ = nullptr;
  T* dual_ = nullptr;
  shape_type shape_{};
  memory_space space_ = memory_space::host;
  // Byte strides of a ctg::strided field's values and of its gradient and
  // tangent buffers (unused otherwise: plain fields are packed row-major).
  std::array<std::int64_t, is_strided ? Rank : 0> stride_{}, grad_stride_{}, dual_stride_{};
};

template <class T>
struct is_field : std::false_type {};
template <class T, int R, flags F>
struct is_field<field<T, R, F>> : std::true_type {};
template <class T>
inline constexpr bool is_field_v = is_field<std::remove_cvref_t<T>>::value;

}  // namespace ctg
