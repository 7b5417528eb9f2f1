// ctg::field: the typed, shared-ownership storage kernels read and write.
//
// A field is a handle: copying it is cheap (a reference count) and the memory
// lives until the last handle goes. The element type, the rank and whether the
// field carries a gradient or a tangent buffer are part of the type, so that
// kernels and the autodiff checks see them at compile time; the extents, the
// memory space and the name are run-time values.
#pragma once
#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "config.hpp"
#include "element.hpp"
#include "errors.hpp"

#if defined(CTG_HAS_CUDA)
#  include "backend/cuda/memory.hpp"
#endif

namespace ctg {

// Which buffers a field carries besides its values.
enum class flags : unsigned { none = 0, grad = 1, dual = 2 };
constexpr flags operator|(flags a, flags b) { return flags(unsigned(a) | unsigned(b)); }
constexpr bool has_flag(flags set, flags bit) { return (unsigned(set) & unsigned(bit)) != 0; }

// ctg::field<float, 1, ctg::grad>: allocate a gradient buffer of the same shape.
inline constexpr flags grad = flags::grad;
// ctg::field<float, 1, ctg::dual>: allocate a tangent buffer for forward-mode AD.
inline constexpr flags dual = flags::dual;

enum class memory_space { host, device };
inline constexpr memory_space host = memory_space::host;
inline constexpr memory_space device = memory_space::device;

struct field_options {
  std::string_view name{};
  memory_space space = memory_space::host;
};

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

  // Row-major linear offset; 64-bit so that fields beyond 2^31 elements work.
  template <class... I>
  CTG_HOST_DEVICE constexpr std::int64_t offset(I... idx) const {
    static_assert(sizeof...(I) == Rank);
    std::int64_t off = 0;
    int axis = 0;
    ((off = off * extent[axis++] + std::int64_t(idx)), ...);
    return off;
  }
  template <class... I>
  CTG_HOST_DEVICE constexpr bool in_bounds(I... idx) const {
    int axis = 0;
    bool ok = true;
    ((ok = ok && idx >= 0 && idx < extent[axis++]), ...);
    return ok;
  }
  CTG_HOST_DEVICE constexpr std::int64_t size() const {
    std::int64_t n = 1;
    for (int a = 0; a < Rank; ++a) n *= extent[a];
    return n;
  }
};

namespace detail {

inline std::string describe_index(std::initializer_list<std::int64_t> idx) {
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

// What has happened to one buffer of a field, for the tape and k.grad (see
// tape.hpp). Every write bumps `version`: a kernel launch that writes the
// buffer, a whole-field host operation (fill, copy_from, zero_*), an element
// written through at(). `bulk_version` counts launches and whole-field
// operations only: it is what k.grad, called alone, compares with the
// forward launch (element access is checked on a tape).
//
// at() on a non-const handle may be a read or a write: it only marks the
// buffer touched. The next launch or tape operation settles the touch: when a
// live tape needs the current values, a copy taken at the first touch tells
// whether the contents really changed; otherwise the touch counts as a
// write.
struct buffer_state {
  static constexpr std::uint64_t none = ~std::uint64_t(0);
  std::uint64_t version = 0;
  std::uint64_t bulk_version = 0;
  std::uint64_t watched = none;  // a version some live tape needs
  bool touched = false;
  std::vector<unsigned char> snapshot;  // host contents at the first touch of a watched version
};

// One allocation holding the values and, when the type asks, the gradient and
// tangent buffers. Zero-initialised, 64-byte aligned on the host.
struct field_storage {
  memory_space space = memory_space::host;
  std::size_t bytes = 0;
  void* primal = nullptr;
  void* grad = nullptr;
  void* dual = nullptr;
  std::string name;
  buffer_state state[3];  // primal, grad, dual

  static constexpr std::size_t alignment = 64;

  void* buffer(int which) const { return which == 0 ? primal : which == 1 ? grad : dual; }

  void* allocate() const {
    std::size_t const n = bytes ? bytes : 1;
    if (space == memory_space::host) {
      void* p = ::operator new(n, std::align_val_t{alignment});
      std::memset(p, 0, n);
      return p;
    }
#if defined(CTG_HAS_CUDA)
    return cuda::device_malloc(n, "field '" + name + "'");
#else
    throw launch_error("field '" + name +
                       "': device memory requested, but this program was built without "
                       "CUDA (link ctgrad::cuda)");
#endif
  }
  void release(void* p) noexcept {
    if (!p) return;
    if (space == memory_space::host) {
      ::operator delete(p, std::align_val_t{alignment});
      return;
    }
#if defined(CTG_HAS_CUDA)
    cuda::device_free(p);
#endif
  }
  // Copies `bytes` between two buffers of this storage's memory space.
  void copy_within_space(void* dst, void const* src) const {
    if (bytes == 0) return;
    if (space == memory_space::host) {
      std::memcpy(dst, src, bytes);
      return;
    }
#if defined(CTG_HAS_CUDA)
    cuda::copy_on_device(dst, src, bytes, "field '" + name + "'");
#endif
  }

  // ---- write tracking ---------------------------------------------------------------------------
  void note_write(int which, bool bulk = true) {
    buffer_state& b = state[which];
    b.touched = false;
    b.snapshot.clear();
    ++b.version;
    if (bulk) ++b.bulk_version;
  }
  void touch(int which) {
    buffer_state& b = state[which];
    if (b.touched) return;
    b.touched = true;
    if (b.watched == b.version && space == memory_space::host) {
      auto const* p = static_cast<unsigned char const*>(buffer(which));
      b.snapshot.assign(p, p + bytes);
    }
  }
  // Turns a touch into a write, unless a snapshot shows nothing changed.
  void settle(int which) {
    buffer_state& b = state[which];
    if (!b.touched) return;
    bool const unchanged = b.snapshot.size() == bytes && (bytes == 0 || std::memcmp(b.snapshot.data(), buffer(which), bytes) == 0);
    b.touched = false;
    b.snapshot.clear();
    if (!unchanged || bytes == 0) {
      if (bytes != 0) ++b.version;
    }
  }

  ~field_storage() {
    release(primal);
    release(grad);
    release(dual);
  }
};

}  // namespace detail

template <class T, int Rank, flags Flags = flags::none>
class field {
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
  using view_type = field_view<T, Rank, has_grad, has_dual>;

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

  explicit field(shape_type shape, field_options opts = {}) : shape_(shape) {
    for (int a = 0; a < Rank; ++a)
      if (shape_[a] < 0)
        throw launch_error("field '" + std::string(opts.name) + "': negative extent " +
                           std::to_string(shape_[a]) + " on axis " + std::to_string(a));
    auto s = std::make_shared<detail::field_storage>();
    s->space = opts.space;
    s->name = opts.name.empty() ? std::string("<unnamed>") : std::string(opts.name);
    s->bytes = std::size_t(size()) * sizeof(T);
    s->primal = s->allocate();
    if constexpr (has_grad) s->grad = s->allocate();
    if constexpr (has_dual) s->dual = s->allocate();
    data_ = static_cast<T*>(s->primal);
    grad_ = static_cast<T*>(s->grad);
    dual_ = static_cast<T*>(s->dual);
    name_ = s->name;
    space_ = opts.space;
    owner_ = std::move(s);
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
  bool empty() const { return owner_ == nullptr; }
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
    owner_->touch(which_);
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
  std::uint64_t version() const {
    settle();
    return owner_ ? owner_->state[which_].version : 0;
  }
  std::uint64_t bulk_version() const { return owner_ ? owner_->state[which_].bulk_version : 0; }
  // The storage and which of its buffers this handle names (identity for the tape).
  std::shared_ptr<detail::field_storage> const& storage() const { return owner_; }
  int buffer_index() const { return which_; }

  // ---- companion buffers --------------------------------------------------
  // The gradient buffer as a field of the same shape (shares ownership).
  field<T, Rank> grad() const {
    static_assert(has_grad,
                  "CTG-FIELD-004 grad() on a field without a gradient buffer: declare it "
                  "ctg::field<T, Rank, ctg::grad>");
    return companion(grad_, 1, ".grad");
  }
  // The tangent buffer as a field of the same shape (shares ownership).
  field<T, Rank> dual() const {
    static_assert(has_dual,
                  "CTG-FIELD-004 dual() on a field without a tangent buffer: declare it "
                  "ctg::field<T, Rank, ctg::dual>");
    return companion(dual_, 2, ".dual");
  }

  // ---- whole-field operations ---------------------------------------------
  void fill(T const& value) const {
    if (space_ == memory_space::host) {
      std::fill(data_, data_ + size(), value);
      note_write();
    } else {
      std::vector<T> tmp(std::size_t(size()), value);
      copy_from(std::span<T const>(tmp));
    }
  }
  void zero_grad() const {
    static_assert(has_grad, "CTG-FIELD-004 zero_grad() on a field without a gradient buffer");
    zero_buffer(grad_);
    owner_->note_write(1);
  }
  void zero_dual() const {
    static_assert(has_dual, "CTG-FIELD-004 zero_dual() on a field without a tangent buffer");
    zero_buffer(dual_);
    owner_->note_write(2);
  }

  void copy_from(std::span<T const> src) const {
    check_count(src.size(), "copy_from");
    copy_bytes(data_, src.data(), /*to_field=*/true);
    note_write();
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
      throw launch_error("copy_from: field '" + other.name() + "' has shape " +
                         other.shape_string() + ", field '" + name_ + "' has shape " +
                         shape_string());
    if (space_ == memory_space::host && other.space() == memory_space::host) {
      std::copy(other.data(), other.data() + size(), data_);
      note_write();
      return;
    }
    copy_from(other.to_vector());
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
  auto map() const {
    require_host("map()");
    static_assert(std::is_arithmetic_v<T>, "map() views scalar fields; use flat() per coefficient");
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
    require_host("flat()");
    using S = scalar_of_t<T>;
    return Eigen::Map<Eigen::Matrix<S, Eigen::Dynamic, 1>>(reinterpret_cast<S*>(data_),
                                                           Eigen::Index(size()) * coefficients_v<T>);
  }

  // ---- kernel side -----------------------------------------------------------
  view_type view() const {
    view_type v{data_, grad_, dual_, {}};
    for (int a = 0; a < Rank; ++a) v.extent[a] = shape_[a];
    return v;
  }
  // Identity of the buffer this handle's values live in, used to detect two
  // kernel arguments naming the same field (a companion such as x.grad() is a
  // different buffer).
  void const* storage_id() const { return data_; }

  std::string shape_string() const {
    std::ostringstream os;
    os << '(';
    for (int a = 0; a < Rank; ++a) os << (a ? ", " : "") << shape_[a];
    os << ')';
    return os.str();
  }

 private:
  template <class, int, flags>
  friend class field;

  static shape_type to_shape(std::initializer_list<int> list, std::string_view name) {
    if (list.size() != std::size_t(Rank))
      throw launch_error("field '" + std::string(name) + "': " + std::to_string(list.size()) +
                         " extents given for a field of rank " + std::to_string(Rank));
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
      throw index_error("field '" + name_ + "': index " + detail::describe_index({std::int64_t(idx)...}) +
                        " is outside its shape " + shape_string());
#endif
    return data_[view().offset(idx...)];
  }

  field<T, Rank> companion(T* buffer, int which, char const* suffix) const {
    field<T, Rank> c{typename field<T, Rank>::no_allocation{}};
    c.which_ = which;
    c.shape_ = shape_;
    c.data_ = buffer;
    c.name_ = name_ + suffix;
    c.space_ = space_;
    c.owner_ = owner_;
    return c;
  }
  void require_host(char const* what) const {
    if (owner_ == nullptr) throw launch_error(std::string(what) + " on an empty field handle");
    if (space_ != memory_space::host)
      throw launch_error(std::string(what) + " on device field '" + name_ +
                         "': copy it to the host first (to_vector(), copy_to() or clone(ctg::host))");
  }
  void check_count(std::size_t n, char const* what) const {
    if (std::int64_t(n) != size())
      throw launch_error(std::string(what) + ": field '" + name_ + "' holds " +
                         std::to_string(size()) + " elements, the buffer " + std::to_string(n));
  }
  void copy_bytes(void* dst, void const* src, bool to_field) const {
    std::size_t const bytes = std::size_t(size()) * sizeof(T);
    if (space_ == memory_space::host) {
      if (bytes) std::memcpy(dst, src, bytes);
      return;
    }
#if defined(CTG_HAS_CUDA)
    if (to_field)
      cuda::copy_to_device(dst, src, bytes, "field '" + name_ + "'");
    else
      cuda::copy_to_host(dst, src, bytes, "field '" + name_ + "'");
#else
    (void)dst, (void)src, (void)to_field, (void)bytes;
    throw launch_error("field '" + name_ + "' is on the device, but this program was built without CUDA");
#endif
  }
  void zero_buffer(T* buffer) const {
    std::size_t const bytes = std::size_t(size()) * sizeof(T);
    if (space_ == memory_space::host) {
      if (bytes) std::memset(static_cast<void*>(buffer), 0, bytes);
      return;
    }
#if defined(CTG_HAS_CUDA)
    cuda::zero_device(buffer, bytes, "field '" + name_ + "'");
#endif
  }

  std::shared_ptr<detail::field_storage> owner_;
  int which_ = 0;  // the storage buffer this handle's values are: 0 primal, 1 gradient, 2 tangent
  T* data_ = nullptr;
  T* grad_ = nullptr;
  T* dual_ = nullptr;
  shape_type shape_{};
  std::string name_;
  memory_space space_ = memory_space::host;
};

template <class T>
struct is_field : std::false_type {};
template <class T, int R, flags F>
struct is_field<field<T, R, F>> : std::true_type {};
template <class T>
inline constexpr bool is_field_v = is_field<std::remove_cvref_t<T>>::value;

}  // namespace ctg
