// Waiting in the unit tests for what another thread does.
#pragma once
#include <chrono>
#include <thread>

namespace wait_support {

// Waits for a condition that another thread makes true, at most 20 s (a
// failing pool would otherwise hang the test).
template <class F>
bool eventually(F&& f) {
  auto const until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace wait_support
