// A thread that only spins while it lives: on a machine of two cores it
// leaves the benchmark one, as a second process does. A pool whose launches
// wait for a worker to be scheduled then pays for the scheduler's latency.
#pragma once
#include <atomic>
#include <thread>

namespace bench {

struct competing_load {
  std::atomic<bool> stop{false};
  std::thread spinner;
  explicit competing_load(bool on) {
    if (on)
      spinner = std::thread([this] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
  }
  competing_load(competing_load const&) = delete;
  competing_load& operator=(competing_load const&) = delete;
  ~competing_load() {
    stop = true;
    if (spinner.joinable()) spinner.join();
  }
};

}  // namespace bench
