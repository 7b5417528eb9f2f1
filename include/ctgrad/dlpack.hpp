// DLPack exchange: a field as a DLManagedTensor (ctg::to_dlpack) and a
// DLManagedTensor as a field (ctg::from_dlpack), without a copy, on the host
// or a CUDA device, so that a PyTorch, JAX or CuPy tensor can be a kernel
// argument. Compiled when dlpack/dlpack.h is found (Debian: libdlpack-dev);
// otherwise this header declares nothing and CTGRAD_HAS_DLPACK is 0.
//
// A field of Eigen elements is a tensor with the element's shape appended
// (a field<Eigen::Vector3f, 1> of n elements: a float tensor n x 3; a matrix
// element's two axes in Eigen's column-major order).
#pragma once
#if __has_include(<dlpack/dlpack.h>)
#  define CTGRAD_HAS_DLPACK 1
#  include <dlpack/dlpack.h>

#  include <cstdint>
#  include <memory>
#  include <string>
#  include <type_traits>
#  include <vector>

#  include "errors.hpp"
#  include "field.hpp"
#  include "view.hpp"

namespace ctg {

namespace detail {

template <class S>
DLDataType dlpack_dtype() {
  static_assert(std::is_arithmetic_v<S>, "DLPack exchange: scalar element types only (or Eigen matrices of them)");
  DLDataType t{};
  t.lanes = 1;
  t.bits = std::uint8_t(sizeof(S) * 8);
  if constexpr (std::is_same_v<S, bool>)
    t.code = kDLUInt;  // one byte per value, as DLPack 0.6 exporters give booleans
  else if constexpr (std::is_floating_point_v<S>)
    t.code = kDLFloat;
  else if constexpr (std::is_signed_v<S>)
    t.code = kDLInt;
  else
    t.code = kDLUInt;
  return t;
}

inline std::string describe_dtype(DLDataType t) {
  char const* code = t.code == kDLFloat ? "float" : t.code == kDLInt ? "int" : t.code == kDLUInt ? "uint" : "code ";
  std::string out = code;
  if (t.code != kDLFloat && t.code != kDLInt && t.code != kDLUInt) out += std::to_string(int(t.code)) + " ";
  out += std::to_string(int(t.bits));
  if (t.lanes != 1) out += "x" + std::to_string(int(t.lanes));
  return out;
}

// The element's own axes (none for scalars), in scalar units.
template <class T>
struct element_axes {
  static constexpr int count = 0;
  static void shape(std::int64_t*) {}
  static void strides(std::int64_t*) {}
};
template <class T>
  requires is_eigen_fixed_v<T>
struct element_axes<T> {
  static constexpr bool vector = T::ColsAtCompileTime == 1;
  static constexpr int count = vector ? 1 : 2;
  static void shape(std::int64_t* out) {
    out[0] = T::RowsAtCompileTime;
    if constexpr (!vector) out[1] = T::ColsAtCompileTime;
  }
  static void strides(std::int64_t* out) {  // Eigen's fixed-size storage is column-major
    out[0] = 1;
    if constexpr (!vector) out[1] = T::RowsAtCompileTime;
  }
};

template <class T, int Rank, flags F>
struct dlpack_export {
  field<T, Rank, F> keep;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor tensor{};
};

}  // namespace detail

// The field as a DLManagedTensor that holds a handle on it until its deleter
// runs (the consumer calls it). Values only: export x.grad() for the gradient.
template <class T, int Rank, flags F>
DLManagedTensor* to_dlpack(field<T, Rank, F> const& f) {
  using S = scalar_of_t<T>;
  using axes = detail::element_axes<T>;
  if (f.empty()) throw launch_error("ctg::to_dlpack: an empty field handle");
  auto out = std::make_unique<detail::dlpack_export<T, Rank, F>>();
  out->keep = f;
  int const ndim = Rank + axes::count;
  out->shape.resize(std::size_t(ndim));
  out->strides.resize(std::size_t(ndim));
  auto const st = f.strides();
  for (int a = 0; a < Rank; ++a) {
    out->shape[std::size_t(a)] = f.extent(a);
    if (st[std::size_t(a)] % std::int64_t(sizeof(S)) != 0)
      throw launch_error("CTG-FIELD-010 field '" + f.name() + "': byte stride " + std::to_string(st[std::size_t(a)]) +
                         " on axis " + std::to_string(a) + " is not a whole number of " + std::to_string(sizeof(S)) +
                         "-byte scalars, which DLPack strides count");
    out->strides[std::size_t(a)] = st[std::size_t(a)] / std::int64_t(sizeof(S));
  }
  axes::shape(out->shape.data() + Rank);
  axes::strides(out->strides.data() + Rank);
  DLTensor& t = out->tensor.dl_tensor;
  t.data = f.data();
  t.device = {f.space() == memory_space::device ? kDLCUDA : kDLCPU, 0};
  if (f.space() == memory_space::device) {
    if (int const id = memory::device_space::device_of(f.data()); id >= 0) t.device.device_id = id;
  }
  t.ndim = ndim;
  t.dtype = detail::dlpack_dtype<S>();
  t.shape = out->shape.data();
  t.strides = out->strides.data();
  t.byte_offset = 0;
  out->tensor.manager_ctx = out.get();
  out->tensor.deleter = [](DLManagedTensor* self) {
    delete static_cast<detail::dlpack_export<T, Rank, F>*>(self->manager_ctx);
  };
  return &out.release()->tensor;
}

// The tensor as a field, without a copy. The field takes the tensor: its
// deleter runs when the last handle on the view goes (also when this throws).
// Rank counts the field's axes; an Eigen element type takes the last axes of
// the tensor, which must match its shape with unit stride on the rows. A
// field type without ctg::strided requires a packed row-major tensor.
template <class T, int Rank, flags F = flags::none>
field<T, Rank, F> from_dlpack(DLManagedTensor* tensor, view_options<T> opts = {}) {
  using S = scalar_of_t<T>;
  using axes = detail::element_axes<T>;
  std::string const name = opts.name.empty() ? std::string("<dlpack tensor>") : std::string(opts.name);
  if (tensor == nullptr) detail::view_error("CTG-FIELD-005", name, "null DLManagedTensor");
  std::shared_ptr<void> const owner(tensor, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  DLTensor const& t = tensor->dl_tensor;
  auto mismatch = [&](std::string const& what) { detail::view_error("CTG-FIELD-010", name, what); };
  DLDataType const want = detail::dlpack_dtype<S>();
  if (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes)
    mismatch("the tensor's dtype is " + detail::describe_dtype(t.dtype) + ", the field's scalar is " +
             detail::describe_dtype(want) + ". Fix: convert the tensor (e.g. .to(torch.float32)) or change T");
  memory_space space = memory_space::host;
  if (t.device.device_type == kDLCUDA)
    space = memory_space::device;
  else if (t.device.device_type != kDLCPU)
    mismatch("the tensor is on DLPack device type " + std::to_string(int(t.device.device_type)) +
             "; a field views CPU (kDLCPU) or CUDA device (kDLCUDA) memory");
  if (opts.space != space && opts.space != memory_space::host)
    mismatch("the view asks for device memory, the tensor is on the host");
  opts.space = space;
  if (space == memory_space::device && memory::device_space::compiled) {
    int const current = memory::device_space::current_device();
    if (current != t.device.device_id)
      mismatch("the tensor is on CUDA device " + std::to_string(t.device.device_id) + ", the current device is " +
               std::to_string(current) + ". Fix: cudaSetDevice to the tensor's device first");
  }
  if (t.ndim != Rank + axes::count)
    mismatch("the tensor has " + std::to_string(t.ndim) + " axes, a field of rank " + std::to_string(Rank) +
             (axes::count ? " with " + std::to_string(axes::count) + " element axes" : std::string()) + " needs " +
             std::to_string(Rank + axes::count));
  // DLPack strides count scalars; null strides mean packed row-major.
  std::vector<std::int64_t> strides(std::size_t(t.ndim));
  {
    std::int64_t s = 1;
    for (int a = t.ndim - 1; a >= 0; --a) {
      strides[std::size_t(a)] = t.strides ? t.strides[a] : s;
      s *= t.shape[a];
    }
  }
  std::int64_t element_shape[2] = {}, element_strides[2] = {};
  axes::shape(element_shape);
  axes::strides(element_strides);
  for (int k = 0; k < axes::count; ++k) {
    int const a = Rank + k;
    if (t.shape[a] != element_shape[k] || (t.shape[a] > 1 && strides[std::size_t(a)] != element_strides[k]))
      mismatch("axis " + std::to_string(a) + " (extent " + std::to_string(t.shape[a]) + ", stride " +
               std::to_string(strides[std::size_t(a)]) + ") is not the element's axis (extent " +
               std::to_string(element_shape[k]) + ", stride " + std::to_string(element_strides[k]) +
               "). Fix: make the tensor contiguous (.contiguous())");
  }
  std::array<std::int64_t, Rank> shape{}, byte_strides{};
  for (int a = 0; a < Rank; ++a) {
    shape[std::size_t(a)] = t.shape[a];
    if (strides[std::size_t(a)] < 0)
      mismatch("negative stride on axis " + std::to_string(a) + "; a field views memory with positive strides");
    byte_strides[std::size_t(a)] = strides[std::size_t(a)] * std::int64_t(sizeof(S));
  }
  if constexpr (!has_flag(F, flags::strided)) {
    auto const packed = detail::packed_byte_strides<Rank>(shape, sizeof(T));
    for (int a = 0; a < Rank; ++a)
      if (shape[std::size_t(a)] > 1 && byte_strides[std::size_t(a)] != packed[std::size_t(a)])
        mismatch("the tensor is not packed row-major (axis " + std::to_string(a) + " has stride " +
                 std::to_string(strides[std::size_t(a)]) +
                 "). Fix: declare the field ctg::strided, or pass tensor.contiguous()");
  }
  auto* data = reinterpret_cast<T*>(static_cast<unsigned char*>(t.data) + t.byte_offset);
  opts.keep_alive = owner;
  return detail::make_view<T, Rank, F>(data, shape, byte_strides, opts);
}

}  // namespace ctg

#else
#  define CTGRAD_HAS_DLPACK 0
#endif
