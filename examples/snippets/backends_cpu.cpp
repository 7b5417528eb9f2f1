// docs/03-backends.md, "CPU": the thread pool and the errors a launch raises.
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
