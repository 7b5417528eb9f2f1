// docs/03-backends.md, "CUDA": device fields, launches, synchronisation and
// errors. Built only with the CUDA backend (nvcc); exits 77 (CTest: skipped)
// where no GPU is usable.
#include <ctgrad/ctgrad.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "check.hpp"

int main() {
  std::string why;
  if (!ctg::cuda::device_available(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  // [snippet: device]
  int const n = 1 << 20;
  // Fields in device memory: the same type, another memory space.
  ctg::field<float, 1, ctg::grad> x({n}, {.name = "x", .space = ctg::device});
  ctg::field<float, 1, ctg::grad> y({n}, {.name = "y", .space = ctg::device});
  x.copy_from(std::vector<float>(n, 0.5f));  // host -> device
  auto k = ctg::kernel<"k">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
  });
  k(x, y);                 // device fields: the launch runs on the GPU
  y.grad().fill(1.0f);
  k.grad(x, y);
  std::vector<float> g = x.grad().to_vector();  // device -> host; waits for the launches before it
  auto on_host = y.clone(ctg::host);             // a host copy of the values
  ctg::cuda::synchronize();                      // waits, and raises the first asynchronous error
  // [snippet end]
  check(std::abs(g[7] - (std::cos(0.5f) * 0.5f + std::sin(0.5f))) < 1e-5f, "device gradient");
  check(std::abs(on_host.at(7) - std::sin(0.5f) * 0.5f) < 1e-6f, "clone to host");

  // [snippet: mixed]
  ctg::field<float, 1> h({n}, {.name = "h"});  // on the host
  try {
    k(x, h);
  } catch (ctg::launch_error const& e) {
    // kernel 'k': fields in different memory spaces: 'x' is on the device, 'h' on the host; copy one with clone()
  }
  // [snippet end]
  bool raised = false;
  try {
    k(x, h);
  } catch (ctg::launch_error const& e) {
    raised = std::string(e.what()).find("different memory spaces") != std::string::npos;
  }
  check(raised, "mixed spaces");
  std::printf("cuda snippet: ok\n");
  return 0;
}
