// Fields over memory the program already owns: a pointer with extents (and
// byte strides), a std::span or std::vector, an Eigen matrix or map, one
// member of an array of structs. No copy is made: kernels, k.grad, k.fwd and
// tapes read and write that memory in place.
//
//   std::vector<Particle> particles(n);
//   auto x = ctg::view_member<ctg::grad>(particles, &Particle::x, {.name = "x"});
//   // x: ctg::field<Eigen::Vector3f, 1, ctg::grad | ctg::strided>
//
// Every view of one memory layout shares one storage record (detail::
// field_storage), found in a registry of live views, so that handles made at
// different times see each other's writes through its versions (the tape
// relies on them). Two views whose elements overlap with different layouts
// would have separate versions and are refused (CTG-FIELD-008). The memory
// must outlive every handle on the view; where that can be checked (an
// .owner given, device memory) launches check it when CTG_VIEW_CHECKS is on
// (CTG-FIELD-009). See docs/01-kernels.md, "Views of your own memory".
#pragma once
#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "errors.hpp"
#include "field.hpp"

namespace ctg {

// How to view memory: the name errors give, where the memory is, and the
// companion buffers. `grad` and `dual`, when given, have the same layout as
// the values (same extents and byte strides); when null and the field type
// asks for them ctgrad allocates them, zeroed and packed row-major (an
// adjoint then moves packed gradients, not elements a struct apart).
template <class T>
struct view_options {
  std::string_view name{};
  memory_space space = memory_space::host;
  T* grad = nullptr;
  T* dual = nullptr;
  // The object owning the memory, watched: with CTG_VIEW_CHECKS a launch (or
  // at()) after it expired raises CTG-FIELD-009 instead of touching freed
  // memory.
  std::weak_ptr<void const> owner{};
  // Held until the last handle on the view goes (e.g. a DLPack tensor).
  std::shared_ptr<void> keep_alive{};
};

namespace detail {

// A tag per element type: two views of one address with different element
// types are different layouts.
template <class T>
inline constexpr char element_tag = 0;

// The registry of live view storages (one per viewed layout).
struct view_registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<field_storage>> live;
  static view_registry& get() {
    static view_registry r;
    return r;
  }
};

[[noreturn]] inline void view_error(std::string const& id, std::string const& name, std::string const& what) {
  throw launch_error(id + " field '" + name + "': " + what);
}

inline bool multiply_overflows(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return __builtin_mul_overflow(a, b, &out);
}

// Checks that `space` is where the pointer lives (with CUDA; without it a
// device view cannot be used at all).
inline void check_space(void const* p, memory_space space, std::string const& name, char const* which) {
  if (!memory::device_space::compiled) {
    if (space == memory_space::device)
      view_error("CTG-FIELD-011", name,
                 "device memory given, but this program was built without CUDA (link ctgrad::cuda)");
    return;
  }
  memory::pointer_kind const kind = memory::device_space::kind_of(p);
  bool const managed = kind == memory::pointer_kind::managed;
  bool const on_device = managed || kind == memory::pointer_kind::device;
  if (space == memory_space::device && !on_device)
    view_error("CTG-FIELD-011", name,
               std::string(which) + " pointer is not device memory, but the view says .space = ctg::device. Fix: "
                                    "pass memory from cudaMalloc (or cudaMallocManaged), or view it on the host");
  if (space == memory_space::host && on_device && !managed)
    view_error("CTG-FIELD-011", name,
               std::string(which) + " pointer is device memory, but the view is on the host. Fix: view it with "
                                    "{.space = ctg::device}");
}

// The one place views are made: checks the layout, then finds the storage of
// this layout or makes it.
template <class T, int Rank, flags F>
field<T, Rank, F> make_view(T* data, std::array<std::int64_t, Rank> const& shape,
                            std::array<std::int64_t, Rank> const& stride, view_options<T> const& opts) {
  std::string const name = opts.name.empty() ? std::string("<unnamed view>") : std::string(opts.name);
  element_layout layout;
  layout.rank = Rank;
  layout.element_bytes = sizeof(T);
  std::int64_t count = 1;
  for (int a = 0; a < Rank; ++a) {
    if (shape[a] < 0 || shape[a] > INT_MAX)
      view_error("CTG-FIELD-006", name,
                 "extent " + std::to_string(shape[a]) + " on axis " + std::to_string(a) +
                     " is negative or beyond what a field holds (2^31 - 1 per axis)");
    if (multiply_overflows(count, shape[a], count))
      view_error("CTG-FIELD-006", name, "the element count overflows 64 bits");
    if (stride[a] < 0)
      view_error("CTG-FIELD-007", name,
                 "negative byte stride " + std::to_string(stride[a]) + " on axis " + std::to_string(a) +
                     "; view the memory from its lowest address with positive strides");
    layout.extent[a] = shape[a];
    layout.stride[a] = stride[a];
  }
  std::int64_t span = count == 0 ? 0 : std::int64_t(sizeof(T));
  for (int a = 0; a < Rank && count != 0; ++a) {
    std::int64_t reach = 0;
    if (multiply_overflows(shape[a] - 1, stride[a], reach) || __builtin_add_overflow(span, reach, &span))
      view_error("CTG-FIELD-006", name, "the extents and strides reach beyond 2^63 bytes");
  }
  if (count > 0 && data == nullptr)
    view_error("CTG-FIELD-005", name,
               "null data pointer for " + std::to_string(count) + " elements. Fix: view memory that exists");
  auto const misaligned = [](void const* p) { return reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0; };
  if (count > 0 && misaligned(data))
    view_error("CTG-FIELD-007", name,
               "data pointer is not aligned to " + std::to_string(alignof(T)) + " bytes, the alignment of its element type");
  for (int a = 0; a < Rank; ++a)
    if (shape[a] > 1 && stride[a] % std::int64_t(alignof(T)) != 0)
      view_error("CTG-FIELD-007", name,
                 "byte stride " + std::to_string(stride[a]) + " on axis " + std::to_string(a) +
                     " is not a multiple of " + std::to_string(alignof(T)) +
                     ", the alignment of its element type: elements would be misaligned");
  {
    block_form const f = blocks_of(layout);
    std::int64_t reach = f.block;
    for (int k = 0; k < f.axes; ++k) {
      if (f.stride[k] < reach)
        view_error("CTG-FIELD-007", name,
                   "byte stride " + std::to_string(f.stride[k]) + " makes elements overlap each other (it is below " +
                       std::to_string(reach) + " bytes, what the element and the inner axes cover)");
      reach = f.stride[k] * f.extent[k];
    }
  }
  // An array, not a braced list: nvcc's host pass mis-parses a range-for over one.
  T* const companions[] = {opts.grad, opts.dual};
  for (T* p : companions)
    if (p && misaligned(p))
      view_error("CTG-FIELD-007", name, "gradient or tangent pointer is not aligned to " + std::to_string(alignof(T)) + " bytes");
  if (opts.grad && count > 0 && layouts_overlap(opts.grad, layout, data, layout))
    view_error("CTG-FIELD-008", name, "the gradient buffer overlaps the values");
  if (count > 0) {
    check_space(data, opts.space, name, "the data");
    if (opts.grad) check_space(opts.grad, opts.space, name, "the gradient");
    if (opts.dual) check_space(opts.dual, opts.space, name, "the tangent");
  }
  bool const owner_given =
      opts.owner.owner_before(std::weak_ptr<void const>{}) || std::weak_ptr<void const>{}.owner_before(opts.owner);
  if (owner_given && opts.owner.expired())
    view_error("CTG-FIELD-009", name, "the owner given for its memory has already expired");

  constexpr bool wants_grad = has_flag(F, flags::grad), wants_dual = has_flag(F, flags::dual);
  std::shared_ptr<field_storage> storage;
  bool created = false;
  {
    auto& registry = view_registry::get();
    std::lock_guard lock(registry.mutex);
    std::erase_if(registry.live, [](auto const& w) { return w.expired(); });
    for (auto const& w : registry.live) {
      auto s = w.lock();
      if (!s || s->space != opts.space) continue;
      bool const same = s->primal == data && s->element_type == &element_tag<T> && s->layout.rank == Rank &&
                        [&] {
                          for (int a = 0; a < Rank; ++a)
                            if (s->layout.extent[a] != layout.extent[a] || s->layout.stride[a] != layout.stride[a])
                              return false;
                          return true;
                        }();
      if (same) {
        storage = std::move(s);
        break;
      }
      if (count > 0 && layouts_overlap(s->primal, s->layout, data, layout))
        view_error("CTG-FIELD-008", name,
                   "its elements overlap those of the live view '" + s->name +
                       "', which lays the memory out differently (other extents, strides or element type): the two "
                       "would not see each other's writes. Fix: view the memory one way, or let the other view go "
                       "first");
      // A gradient or tangent buffer the program gave, on one side or the
      // other, that shares bytes with a buffer of the other view: values
      // and gradients would be added into each other.
      if (count > 0) {
        char const* const buffer_names[] = {"values", "gradient buffer", "tangent buffer"};
        void const* const ours[] = {data, opts.grad, opts.dual};
        for (int mine = 0; mine < 3; ++mine)
          for (int theirs = 0; theirs < 3; ++theirs) {
            if ((mine == 0 && theirs == 0) || !ours[mine] || !s->buffer(theirs)) continue;
            if (mine == 0 && s->owned[theirs]) continue;  // ctgrad's own allocation
            if (layouts_overlap(ours[mine], layout, s->buffer(theirs), s->layout_of(theirs)))
              view_error("CTG-FIELD-008", name,
                         std::string("the ") + buffer_names[mine] + " of this view and the " + buffer_names[theirs] +
                             " of the live view '" + s->name +
                             "' share bytes: gradients and values would be added into each other. Fix: give each view "
                             "gradient and tangent memory of its own, apart from every viewed member");
          }
      }
    }
    if (storage) {
      auto companion = [&](void*& buffer, bool& owned, T* given, char const* what, int which) {
        if (given && buffer && buffer != given)
          view_error("CTG-FIELD-008", name,
                     std::string("this memory is already viewed (as '") + storage->name + "') with another " + what +
                         " buffer. Fix: give the same buffer, or none to share the one it has");
        if (!buffer) {
          buffer = given ? static_cast<void*>(given) : storage->allocate();
          owned = given == nullptr;
          storage->packed_companion[which] = given == nullptr;
        }
      };
      if (wants_grad) companion(storage->grad, storage->owned[1], opts.grad, "gradient", 1);
      if (wants_dual) companion(storage->dual, storage->owned[2], opts.dual, "tangent", 2);
      if (owner_given && !storage->watch_owner) {
        storage->memory_owner = opts.owner;
        storage->watch_owner = true;
      }
    } else {
      storage = std::make_shared<field_storage>();
      created = true;
      storage->space = opts.space;
      storage->name = name;
      storage->bytes = std::size_t(count) * sizeof(T);
      storage->layout = layout;
      storage->strided = !layout.packed();
      storage->element_type = &element_tag<T>;
      storage->primal = data;
      storage->owned[0] = false;
      if (wants_grad) {
        storage->grad = opts.grad ? static_cast<void*>(opts.grad) : storage->allocate();
        storage->owned[1] = storage->packed_companion[1] = opts.grad == nullptr;
      }
      if (wants_dual) {
        storage->dual = opts.dual ? static_cast<void*>(opts.dual) : storage->allocate();
        storage->owned[2] = storage->packed_companion[2] = opts.dual == nullptr;
      }
      storage->memory_owner = opts.owner;
      storage->watch_owner = owner_given;
      registry.live.push_back(storage);
    }
    if (opts.keep_alive) {
      if (created) {
        storage->keep_alive = opts.keep_alive;
      } else {
        // The memory already has a live view, so its owner is kept by that
        // view's maker. What this call was given is kept by this call's
        // handles only: stored in the shared storage it could hold that
        // storage itself (a field exported with to_dlpack and taken back
        // holds its storage), a cycle nothing would free.
        struct held_view {
          std::shared_ptr<field_storage> storage;
          std::shared_ptr<void> keep_alive;
        };
        auto const held = std::make_shared<held_view>(held_view{storage, opts.keep_alive});
        storage = std::shared_ptr<field_storage>(held, held->storage.get());
      }
    }
  }

  adopted_memory<T, Rank> m;
  m.data = data;
  m.grad = static_cast<T*>(storage->grad);
  m.dual = static_cast<T*>(storage->dual);
  element_layout const grad_layout = storage->layout_of(1), dual_layout = storage->layout_of(2);
  for (int a = 0; a < Rank; ++a) {
    m.shape[std::size_t(a)] = int(shape[a]);
    m.stride[std::size_t(a)] = stride[a];
    m.grad_stride[std::size_t(a)] = grad_layout.stride[a];
    m.dual_stride[std::size_t(a)] = dual_layout.stride[a];
  }
  m.name = name;
  m.space = opts.space;
  m.storage = std::move(storage);
  return field<T, Rank, F>(adopt_memory_t{}, std::move(m));
}

template <int Rank>
std::array<std::int64_t, Rank> packed_byte_strides(std::array<std::int64_t, Rank> const& shape, std::size_t element) {
  std::array<std::int64_t, Rank> out{};
  std::int64_t s = std::int64_t(element);
  for (int a = Rank - 1; a >= 0; --a) {
    out[std::size_t(a)] = s;
    // Saturated, not wrapped: extents whose product overflows are reported
    // by the checks of the view (CTG-FIELD-006), which run after this.
    if (__builtin_mul_overflow(s, std::max<std::int64_t>(shape[std::size_t(a)], 1), &s))
      s = std::numeric_limits<std::int64_t>::max();
  }
  return out;
}

template <class T, std::size_t N>
std::array<std::int64_t, N> to_extents(T const (&e)[N]) {
  std::array<std::int64_t, N> out{};
  for (std::size_t a = 0; a < N; ++a) out[a] = std::int64_t(e[a]);
  return out;
}

template <class M>
concept eigen_dense = std::is_base_of_v<Eigen::DenseBase<std::remove_cvref_t<M>>, std::remove_cvref_t<M>> &&
                      requires(M& m) {
                        m.data();
                        m.innerStride();
                        m.outerStride();
                      };

}  // namespace detail

// ---- raw memory ---------------------------------------------------------------------------------------
// ctg::view<ctg::grad>(pointer, {rows, cols}, {.name = "u"}): packed row-major memory.
template <flags F = flags::none, class T, std::size_t Rank>
  requires(!has_flag(F, flags::strided))
field<T, int(Rank), F> view(T* data, std::int64_t const (&shape)[Rank], view_options<T> const& opts = {}) {
  auto const extents = detail::to_extents(shape);
  return detail::make_view<T, int(Rank), F>(data, extents, detail::packed_byte_strides<int(Rank)>(extents, sizeof(T)),
                                            opts);
}
// A rank-0 view: one value.
template <flags F = flags::none, class T>
field<T, 0, F> view(T* data, view_options<T> const& opts = {}) {
  return detail::make_view<T, 0, F>(data, {}, {}, opts);
}
// ctg::strided_view<ctg::grad>(&particles[0].x, {n}, {sizeof(Particle)}, {.name = "x"}):
// element (i, j, ...) at data + i * strides[0] + j * strides[1] + ... bytes.
template <flags F = flags::none, class T, std::size_t Rank>
field<T, int(Rank), F | flags::strided> strided_view(T* data, std::int64_t const (&shape)[Rank],
                                                     std::int64_t const (&byte_strides)[Rank],
                                                     view_options<T> const& opts = {}) {
  return detail::make_view<T, int(Rank), F | flags::strided>(data, detail::to_extents(shape),
                                                             detail::to_extents(byte_strides), opts);
}

// ---- standard containers ------------------------------------------------------------------------------
template <flags F = flags::none, class T, std::size_t E>
field<T, 1, F> view(std::span<T, E> s, view_options<T> const& opts = {}) {
  return view<F>(s.data(), {std::int64_t(s.size())}, opts);
}
template <flags F = flags::none, class T, class A>
  requires(!std::is_same_v<T, bool>)  // std::vector<bool> packs bits
field<T, 1, F> view(std::vector<T, A>& v, view_options<T> const& opts = {}) {
  return view<F>(v.data(), {std::int64_t(v.size())}, opts);
}

// ---- arrays of structs --------------------------------------------------------------------------------
// ctg::view_member<ctg::grad>(particles, &Particle::x): element i is
// particles[i].x, a ctg::strided field with stride sizeof(Particle).
template <flags F = flags::none, class S, std::size_t E, class M>
field<M, 1, F | flags::strided> view_member(std::span<S, E> structs, M S::*member, view_options<M> const& opts = {}) {
  M* first = structs.empty() ? nullptr : &(structs.data()->*member);
  if (structs.empty()) {
    // An empty array still names its type's member: any aligned address does.
    alignas(M) static unsigned char none[sizeof(M)];
    first = reinterpret_cast<M*>(none);
  }
  return strided_view<F>(first, {std::int64_t(structs.size())}, {std::int64_t(sizeof(S))}, opts);
}
template <flags F = flags::none, class S, class A, class M>
field<M, 1, F | flags::strided> view_member(std::vector<S, A>& structs, M S::*member, view_options<M> const& opts = {}) {
  return view_member<F>(std::span<S>(structs), member, opts);
}

// ---- Eigen --------------------------------------------------------------------------------------------
// A vector (compile-time one column or one row): a rank-1 field; a matrix: a
// rank-2 ctg::strided field with f(i, j) = m(i, j) whatever the storage order
// (Eigen's default is column-major: f's axis 0 is then the one with stride 1).
template <flags F = flags::none, class M>
  requires detail::eigen_dense<M>
auto view(M&& m, view_options<typename std::remove_cvref_t<M>::Scalar> const& opts = {}) {
  using D = std::remove_cvref_t<M>;
  using S = typename D::Scalar;
  S* data = const_cast<S*>(m.data());
  constexpr std::int64_t s = std::int64_t(sizeof(S));
  if constexpr (D::IsVectorAtCompileTime) {
    if constexpr (D::InnerStrideAtCompileTime == 1)
      return view<F>(data, {std::int64_t(m.size())}, opts);
    else
      return strided_view<F>(data, {std::int64_t(m.size())}, {std::int64_t(m.innerStride()) * s}, opts);
  } else {
    std::int64_t const inner = std::int64_t(m.innerStride()) * s, outer = std::int64_t(m.outerStride()) * s;
    std::int64_t const rows = m.rows(), cols = m.cols();
    if constexpr (bool(D::IsRowMajor))
      return strided_view<F>(data, {rows, cols}, {outer, inner}, opts);
    else
      return strided_view<F>(data, {rows, cols}, {inner, outer}, opts);
  }
}
// The columns of a column-major matrix with a fixed number of rows K (or the
// rows of a row-major one with K columns) as a rank-1 field of
// Eigen::Matrix<Scalar, K, 1>: a 3 x n matrix of positions is n Vector3s.
template <flags F = flags::none, class M>
  requires detail::eigen_dense<M>
auto view_vectors(M&& m, view_options<Eigen::Matrix<typename std::remove_cvref_t<M>::Scalar,
                                                    bool(std::remove_cvref_t<M>::IsRowMajor)
                                                        ? int(std::remove_cvref_t<M>::ColsAtCompileTime)
                                                        : int(std::remove_cvref_t<M>::RowsAtCompileTime),
                                                    1>> const& opts = {}) {
  using D = std::remove_cvref_t<M>;
  using S = typename D::Scalar;
  constexpr int K = bool(D::IsRowMajor) ? int(D::ColsAtCompileTime) : int(D::RowsAtCompileTime);
  static_assert(K != Eigen::Dynamic,
                "ctg::view_vectors: the vectors' length must be fixed at compile time (Eigen::Matrix<S, 3, "
                "Eigen::Dynamic> for column vectors)");
  static_assert(D::InnerStrideAtCompileTime == 1, "ctg::view_vectors: the vectors' coefficients must be contiguous");
  using V = Eigen::Matrix<S, K, 1>;
  std::int64_t const n = bool(D::IsRowMajor) ? m.rows() : m.cols();
  auto* data = reinterpret_cast<V*>(const_cast<S*>(m.data()));
  return strided_view<F>(data, {n}, {std::int64_t(m.outerStride()) * std::int64_t(sizeof(S))}, opts);
}

}  // namespace ctg
