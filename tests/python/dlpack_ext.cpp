// A Python extension (nanobind) that takes a tensor from any DLPack producer
// (NumPy, PyTorch, JAX) as a ctgrad field without a copy, runs a kernel and
// its gradient on it, and hands the gradient back as DLPack: what a
// simulator exposing ctgrad to Python does. tests/python/test_dlpack.py
// drives it.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/dlpack.hpp>
#include <stdexcept>
#include <string>
#include <utility>

namespace nb = nanobind;
using namespace ctg::literals;

namespace {

using grid = ctg::field<float, 2, ctg::grad | ctg::strided>;

// loss = sum of x^3 over a rank-2 tensor; its gradient is 3 x^2.
constexpr auto cube_sum = ctg::kernel<"cube_sum">([](auto x, auto loss) {
  return ctg::ndrange(x.shape(0_c), x.shape(1_c), [=](auto i, auto j) { return loss() += x(i, j) * x(i, j) * x(i, j); });
});

// The capsule a producer's __dlpack__() returns. Taking the tensor renames
// it, so that the capsule's destructor leaves the tensor to its new owner.
DLManagedTensor* take_tensor(nb::handle producer) {
  nb::object capsule = producer.attr("__dlpack__")();
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!tensor) throw nb::python_error();
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  return tensor;
}

// A ctgrad field handed out: a Python object with __dlpack__ and
// __dlpack_device__, as numpy.from_dlpack and torch.from_dlpack ask.
struct exported {
  DLManagedTensor* tensor = nullptr;
  explicit exported(DLManagedTensor* t) : tensor(t) {}
  exported(exported&& o) noexcept : tensor(std::exchange(o.tensor, nullptr)) {}
  exported(exported const&) = delete;
  ~exported() {
    if (tensor && tensor->deleter) tensor->deleter(tensor);
  }
  nb::object dlpack(nb::kwargs) {
    if (!tensor) throw std::runtime_error("the tensor was already taken");
    DLManagedTensor* t = std::exchange(tensor, nullptr);
    PyObject* capsule = PyCapsule_New(t, "dltensor", [](PyObject* self) {
      // Not taken by a consumer: the tensor is still ours to release.
      if (!PyCapsule_IsValid(self, "dltensor")) return;
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(self, "dltensor"));
      if (m && m->deleter) m->deleter(m);
    });
    if (!capsule) {
      tensor = t;  // still ours: released with this object
      throw nb::python_error();
    }
    return nb::steal(capsule);
  }
  nb::tuple device() const { return nb::make_tuple(int(kDLCPU), 0); }
};

// The loss and its gradient with respect to the tensor, which the field
// views in place (any strides): the tensor's own memory is read, and the
// gradient is a buffer ctgrad allocated, packed row-major (its DLPack strides say so).
nb::tuple cube_sum_and_gradient(nb::handle producer) {
  grid x = ctg::from_dlpack<float, 2, ctg::grad | ctg::strided>(take_tensor(producer), {.name = "x"});
  ctg::field<float, 0, ctg::grad> loss({.name = "loss"});
  ctg::tape tape(loss);
  cube_sum(x, loss);
  tape.backward();
  return nb::make_tuple(double(loss.at()), exported(ctg::to_dlpack(x.grad())));
}

// Writes value into element (i, j) of the tensor through a field view: the
// caller sees the write, which shows that nothing was copied.
void write_through(nb::handle producer, int i, int j, float value) {
  auto x = ctg::from_dlpack<float, 2, ctg::strided>(take_tensor(producer), {.name = "x"});
  x.at(i, j) = value;
}

// The same import, asked for doubles: the dtype check's message.
void import_as_double(nb::handle producer) {
  (void)ctg::from_dlpack<double, 2>(take_tensor(producer), {.name = "positions"});
}

}  // namespace

NB_MODULE(ctgrad_dlpack_ext, m) {
  nb::class_<exported>(m, "exported")
      .def("__dlpack__", &exported::dlpack)
      .def("__dlpack_device__", &exported::device);
  m.def("cube_sum_and_gradient", &cube_sum_and_gradient);
  m.def("write_through", &write_through);
  m.def("import_as_double", &import_as_double);
}
