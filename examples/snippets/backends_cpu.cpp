// docs/03-backends.md, "CPU": the thread pool, subnormals and the errors a launch raises.
#include <ctgrad/ctgrad.hpp>

#include <cstdio>
#include <string>

#include "check.hpp"

int main() {
  // [snippet: threads]
  // The pool starts with CTG_NUM_THREADS threads (default: one per hardware
  // thread) at the first parallel launch; it can be resized between launches.
  int const before = ctg::num_threads();
  ctg::set_num_threads(1);  // every loop on the calling thread from now on
  ctg::set_num_threads(0);  // back to the default
  // [snippet end]
  check(before >= 1 && ctg::num_threads() == ctg::cpu::thread_pool::default_threads(), "threads");

  // [snippet: subnormals]
  // Host launches flush subnormal floats (below 1.2e-38) to zero from now on,
  // on every thread of the launch; with false, the calling thread's own mode
  // again.
  ctg::field<float, 1> small({4096}), product({4096});
  auto scale = ctg::kernel<"scale">(
      [](auto x, auto y, float s) { return ctg::range(x.size(), [=](auto i) { return y[i] = x[i] * s; }); });
  small.fill(1e-20f);
  if constexpr (ctg::subnormal_flush_available) ctg::set_flush_subnormals(true);
  scale(small, product, 1e-20f);  // 1e-40 is subnormal: 0 here
  ctg::set_flush_subnormals(false);
  // [snippet end]
  check(!ctg::subnormal_flush_available || product.at(0) == 0.0f, "subnormals flushed");
  scale(small, product, 1e-20f);
  check(product.at(0) > 0.0f, "subnormals kept");

  // [snippet: errors]
  ctg::field<double, 1> data(4), unset;  // unset: a default-constructed, empty handle
  auto copy = ctg::kernel<"copy">([](auto from, auto to) {
    return ctg::range(to.size(), [=](auto i) { return to[i] = from[i]; });
  });
  try {
    copy(data, unset);
  } catch (ctg::launch_error const& e) {
    std::printf("%s\n", e.what());  // kernel 'copy': parameter #1 (field '', shape (0)) is an empty field handle
  }
  // [snippet end]
  bool thrown = false;
  try {
    copy(data, unset);
  } catch (ctg::launch_error const& e) {
    thrown = std::string(e.what()).find("empty field handle") != std::string::npos;
  }
  check(thrown, "launch_error");
  return 0;
}
