// Views of memory the program owns, in one memory space: a strided view of
// integers (one member of an array of structs) bounds a nested loop, so the
// adstack is sized on the host from those elements (from a copy of them when
// they are in device memory). Values and gradients are the recurrence's, by
// hand. A field goes out as a DLPack tensor and comes back as a view of the
// same memory, in its memory space (kDLCUDA for device memory).
#pragma once
#include <ctgrad/dlpack.hpp>
#include <ctgrad/view.hpp>

#include "backend_support.hpp"

namespace backend_tests {

struct cell {
  int steps;     // iterations of the recurrence for this element
  float weight;  // beside it: what a packed copy of `steps` would read as an integer
};

inline void strided_view_bounds_nested_loop(ctg::memory_space space) {
  int const n = 1024;
  std::vector<cell> cells(n);
  for (int i = 0; i < n; ++i) cells[std::size_t(i)] = {1 + i % 9, 0.5f + 0.001f * float(i)};
  owned_array<cell> memory(space, cells);
  auto steps = ctg::strided_view(&memory.data()->steps, {n}, {std::int64_t(sizeof(cell))},
                                 {.name = "steps", .space = space});
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x", .space = space}), y({n}, {.name = "y", .space = space});
  std::vector<double> xs(n);
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.3 + 0.4 * std::sin(0.21 * i);
  x.copy_from(xs);
  y.grad().fill(1.0);
  auto k = ctg::kernel<"recurrence">([](auto x, auto y, auto steps) {
    return ctg::range(x.size(), [=](auto i) {
      return y[i] = ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(steps[i], [=](auto) { return v = ctg::sin(v) * 1.2 + 0.1; }), ctg::result(v));
      });
    });
  });
  k(x, y, steps);
  k.grad(x, y, steps);
  // By hand: v <- 1.2 sin(v) + 0.1 steps[i] times; the gradient is the
  // product over the steps of 1.2 cos(v).
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double v = xs[std::size_t(i)], g = 1.0;
    for (int s = 0; s < cells[std::size_t(i)].steps; ++s) {
      g *= 1.2 * std::cos(v);
      v = std::sin(v) * 1.2 + 0.1;
    }
    want_y[std::size_t(i)] = v, want_grad[std::size_t(i)] = g;
  }
  check_close(y.to_vector(), want_y, 1e-12);
  check_close(x.grad().to_vector(), want_grad, 1e-12);
  // The view read the integers in place, and left them as they were.
  std::vector<int> want_steps(n);
  for (int i = 0; i < n; ++i) want_steps[std::size_t(i)] = cells[std::size_t(i)].steps;
  CHECK(steps.to_vector() == want_steps);
}


#if CTGRAD_HAS_DLPACK
inline void dlpack_round_trip(ctg::memory_space space) {
  int const n = 777;
  DLDeviceType const device_type = space == ctg::device ? kDLCUDA : kDLCPU;
  ctg::field<float, 1> f({n}, {.name = "f", .space = space});
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[std::size_t(i)] = 0.25f + 0.001f * float(i);
  f.copy_from(xs);
  DLManagedTensor* out = ctg::to_dlpack(f);
  CHECK(out->dl_tensor.device.device_type == device_type);
  CHECK(out->dl_tensor.data == f.data());
  auto x = ctg::from_dlpack<float, 1, ctg::grad>(out, {.name = "x"});
  CHECK(x.data() == f.data());
  CHECK(x.space() == space);
  ctg::field<float, 1, ctg::grad> y({n}, {.name = "y", .space = space});
  y.grad().fill(1.0f);
  auto cube = ctg::kernel<"cube">(
      [](auto x, auto y) { return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * x[i] * x[i]; }); });
  cube(x, y);
  cube.grad(x, y);
  std::vector<double> want_y(n), want_grad(n);
  for (int i = 0; i < n; ++i) {
    double const v = xs[std::size_t(i)];
    want_y[std::size_t(i)] = v * v * v, want_grad[std::size_t(i)] = 3 * v * v;
  }
  check_close(y.to_vector(), want_y, 1e-6);
  check_close(x.grad().to_vector(), want_grad, 1e-6);

  // One member of an array of structs: DLPack strides count scalars, two
  // floats per cell here; the packed field type refuses the tensor.
  std::vector<cell> cells(n);
  for (int i = 0; i < n; ++i) cells[std::size_t(i)] = {i, 1.0f + float(i)};
  owned_array<cell> memory(space, cells);
  auto weights = ctg::strided_view(&memory.data()->weight, {n}, {std::int64_t(sizeof(cell))},
                                   {.name = "weights", .space = space});
  DLManagedTensor* strided_out = ctg::to_dlpack(weights);
  CHECK(strided_out->dl_tensor.device.device_type == device_type);
  CHECK(strided_out->dl_tensor.strides[0] == std::int64_t(sizeof(cell) / sizeof(float)));
  auto back = ctg::from_dlpack<float, 1, ctg::strided>(strided_out, {.name = "weights back"});
  ctg::field<float, 1> doubled({n}, {.name = "doubled", .space = space});
  auto twice = ctg::kernel<"twice">(
      [](auto w, auto out) { return ctg::range(out.size(), [=](auto i) { return out[i] = w[i] * 2.0f; }); });
  twice(back, doubled);
  std::vector<double> want_doubled(n);
  for (int i = 0; i < n; ++i) want_doubled[std::size_t(i)] = 2.0 * (1.0 + i);
  check_close(doubled.to_vector(), want_doubled, 0.0);
  CHECK_THROWS_WITH_AS((ctg::from_dlpack<float, 1>(ctg::to_dlpack(weights), {.name = "packed"})),
                       doctest::Contains("not packed row-major"), ctg::launch_error);
}
#endif

}  // namespace backend_tests

#define CTGRAD_VIEW_TESTS(REGISTER, space) \
  REGISTER(space, strided_view_bounds_nested_loop, "a strided view of integers bounds a nested loop: adstack sizing") \
  CTGRAD_DLPACK_TEST(REGISTER, space)

#if CTGRAD_HAS_DLPACK
#  define CTGRAD_DLPACK_TEST(REGISTER, space) \
    REGISTER(space, dlpack_round_trip, "DLPack out and back in the field's memory space; a kernel on the view")
#else
#  define CTGRAD_DLPACK_TEST(REGISTER, space)
#endif
