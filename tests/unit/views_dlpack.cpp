// DLPack exchange: a field out and back in without a copy, a kernel and its
// gradient on the imported tensor, and the mismatches (CTG-FIELD-010).
#include <doctest/doctest.h>

#include <ctgrad/dlpack.hpp>
#if CTGRAD_HAS_DLPACK
#  include <ctgrad/ctgrad.hpp>
#  include <vector>

using namespace ctg::literals;

namespace {

struct counted_tensor {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape, strides;
  int* deleted;
};
// A tensor over `data` as a producer would hand it over; its deleter counts.
DLManagedTensor* make_tensor(void* data, DLDataType dtype, DLDeviceType device, std::vector<std::int64_t> shape,
                             std::vector<std::int64_t> strides, int* deleted) {
  auto* c = new counted_tensor{{}, std::move(shape), std::move(strides), deleted};
  DLTensor& t = c->managed.dl_tensor;
  t.data = data;
  t.device = {device, 0};
  t.ndim = int(c->shape.size());
  t.dtype = dtype;
  t.shape = c->shape.data();
  t.strides = c->strides.empty() ? nullptr : c->strides.data();
  c->managed.manager_ctx = c;
  c->managed.deleter = [](DLManagedTensor* self) {
    auto* me = static_cast<counted_tensor*>(self->manager_ctx);
    ++*me->deleted;
    delete me;
  };
  return &c->managed;
}

}  // namespace

TEST_CASE("a field goes out as DLPack and comes back as a view of the same memory, gradients included") {
  ctg::field<float, 2> f({3, 4}, {.name = "f"});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) f.at(i, j) = float(i + 0.5 * j);
  long const handles = f.use_count();
  DLManagedTensor* out = ctg::to_dlpack(f);
  CHECK(f.use_count() == handles + 1);  // the tensor holds the field
  DLTensor const& t = out->dl_tensor;
  CHECK(t.ndim == 2);
  CHECK(t.shape[0] == 3);
  CHECK(t.shape[1] == 4);
  CHECK(t.strides[0] == 4);
  CHECK(t.strides[1] == 1);
  CHECK(t.dtype.code == kDLFloat);
  CHECK(t.dtype.bits == 32);
  CHECK(t.device.device_type == kDLCPU);
  CHECK(t.data == f.data());
  {
    auto g = ctg::from_dlpack<float, 2, ctg::grad>(out, {.name = "g"});
    CHECK(g.data() == f.data());
    ctg::field<float, 0, ctg::grad> loss({.name = "loss"});
    auto cube = ctg::kernel<"cube">([](auto g, auto loss) {
      return ctg::ndrange(g.shape(0_c), g.shape(1_c), [=](auto i, auto j) { return loss() += g(i, j) * g(i, j) * g(i, j); });
    });
    ctg::tape tape(loss);
    cube(g, loss);
    tape.backward();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        float const x = float(i + 0.5 * j);
        CHECK(g.grad().at(i, j) == doctest::Approx(3.0f * x * x));
      }
    g.at(2, 3) = -1.0f;
    CHECK(f.at(2, 3) == -1.0f);  // no copy
  }
  CHECK(f.use_count() == handles);  // the view's last handle went: the tensor's deleter ran
}

TEST_CASE("a member of an array of structs round-trips through DLPack strides") {
  struct particle {
    Eigen::Vector3d x;
    double m;
  };
  std::vector<particle> p(5, particle{Eigen::Vector3d(1, 2, 3), 4.0});
  auto x = ctg::view_member(p, &particle::x, {.name = "x"});
  long const handles = x.use_count();
  DLManagedTensor* out = ctg::to_dlpack(x);
  CHECK(x.use_count() == handles + 1);  // the tensor holds the view
  CHECK(out->dl_tensor.ndim == 2);
  CHECK(out->dl_tensor.shape[1] == 3);
  CHECK(out->dl_tensor.strides[0] == std::int64_t(sizeof(particle) / sizeof(double)));
  CHECK(out->dl_tensor.strides[1] == 1);
  {
    auto back = ctg::from_dlpack<Eigen::Vector3d, 1, ctg::strided>(out, {.name = "x back"});
    CHECK(back.storage() == x.storage());  // one layout, one storage
    CHECK(back.at(4) == Eigen::Vector3d(1, 2, 3));
    auto copy = back;
    back = decltype(back){};
    CHECK(copy.at(0) == Eigen::Vector3d(1, 2, 3));  // a copy of the handle still holds the tensor
  }
  // The taken-back tensor held x's storage; the last handle made from it
  // went, so its deleter ran and nothing holds the storage in a cycle.
  CHECK(x.use_count() == handles);
}

TEST_CASE("DLPack mismatches are CTG-FIELD-010, and the tensor is released") {
  alignas(16) static float values[12];
  int deleted = 0;
  DLDataType const f32{kDLFloat, 32, 1};
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<double, 1>(make_tensor(values, f32, kDLCPU, {12}, {}, &deleted), {.name = "d"})),
                       doctest::Contains("CTG-FIELD-010 field 'd': the tensor's dtype is float32"), ctg::launch_error);
  CHECK(deleted == 1);
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<float, 2>(make_tensor(values, f32, kDLCPU, {3, 4}, {1, 3}, &deleted))),
                       doctest::Contains("not packed row-major"), ctg::launch_error);
  CHECK(deleted == 2);
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<float, 1>(make_tensor(values, f32, kDLOpenCL, {12}, {}, &deleted))),
                       doctest::Contains("device type"), ctg::launch_error);
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<float, 1>(make_tensor(values, f32, kDLCPU, {3, 4}, {}, &deleted))),
                       doctest::Contains("2 axes"), ctg::launch_error);
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<Eigen::Vector4f, 1>(make_tensor(values, f32, kDLCPU, {4, 3}, {}, &deleted))),
                       doctest::Contains("element's axis"), ctg::launch_error);
  CHECK(deleted == 5);
  // A transposed tensor is fine for a strided field: t(i, j) = values[i + 3 j].
  {
    auto tr = ctg::from_dlpack<float, 2, ctg::strided>(make_tensor(values, f32, kDLCPU, {3, 4}, {1, 3}, &deleted));
    values[1 + 3 * 2] = 7.0f;
    CHECK(tr.at(1, 2) == 7.0f);
  }
  CHECK(deleted == 6);
}
#else
TEST_CASE("DLPack exchange" * doctest::skip()) {}
#endif
