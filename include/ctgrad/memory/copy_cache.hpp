// Blocks for copies of field values: the versions a tape saves before a
// launch overwrites them, and the snapshots of a checkpointed rollout.
//
// A copy is written in full before anything reads it, so its block needs no
// zeroing; and the same sizes come back every step of a rollout and every
// iteration of an optimisation loop. A block given back is therefore kept,
// up to a limit per memory space, for the next copy of about its size: saving
// then costs the copy, not a fresh allocation whose pages fault in on first
// touch (on the host) or a cudaMalloc that synchronises the device.
//
// Device blocks are kept per CUDA device (the one current when the copy is
// made). An allocation that fails, for a copy or for a field, frees the
// blocks of its memory space and tries once more.
#pragma once
#include <cstddef>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "../config.hpp"
#include "../errors.hpp"
#include "space.hpp"

namespace ctg {

// What the cache of one memory space holds, and what it has done since the
// program began.
struct copy_cache_info {
  std::size_t cached_bytes = 0;  // in blocks given back, ready for the next copies
  std::size_t limit_bytes = 0;   // at most this much is kept; more is freed when given back
  long long reused = 0;          // copies that took a cached block
  long long allocated = 0;       // copies that needed a new block
};

namespace detail {

class copy_cache {
 public:
  // A block may serve a copy of at least size - size / (slack_divisor + 1)
  // bytes (a block at most an eighth larger than the copy).
  static constexpr std::size_t slack_divisor = 8;
  // A default that holds the copies of a few large rollouts: what one tape
  // freed serves the next without page faults, and a program that is done
  // with its tapes gives the memory back with ctg::trim_copy_cache().
  static constexpr std::size_t default_limit = std::size_t(1) << 30;

  // The cache of host memory, or of the current CUDA device's. Never
  // destroyed: a tape or field with static storage duration may give a
  // block back after every function-local static is gone; what is cached at
  // exit stays reachable from here, and the system reclaims it.
  static copy_cache& of(bool device);

  // Every device cache made so far, and the limit new ones start with.
  template <class F>
  static void for_each_device(F&& f) {
    registry& r = devices();
    std::lock_guard lock(r.mutex);
    for (copy_cache* c : r.caches)
      if (c) f(*c);
  }
  static void set_device_default_limit(std::size_t bytes);

  copy_cache(copy_cache const&) = delete;
  copy_cache& operator=(copy_cache const&) = delete;

  // A block of at least `bytes` (its contents undefined) for a copy of the
  // named field. `size` receives the block's true size, which give_back needs.
  void* take(std::size_t bytes, std::size_t& size, std::string_view field);

  void give_back(void* p, std::size_t size) noexcept;

  // Frees cached blocks until at most `keep` bytes remain, largest first.
  void trim(std::size_t keep) noexcept;

  void set_limit(std::size_t bytes) noexcept;

  copy_cache_info info() const;

  // Runs an allocation of this memory space; when it fails, frees the cached
  // blocks of the space (host, or every device's) and runs it once more.
  template <class Allocate>
  static auto after_trim_if_needed(bool device, Allocate&& allocate) -> decltype(allocate()) {
    try {
      return allocate();
    } catch (std::bad_alloc const&) {
    } catch (cuda_error const&) {  // cudaMalloc: out of memory, or a failure a retry reports again
      if (!device) throw;
    }
    if (device)
      for_each_device([](copy_cache& c) { c.trim(0); });
    else
      of(false).trim(0);
    return allocate();
  }

 private:
  struct registry {
    std::mutex mutex;
    std::vector<copy_cache*> caches;
    std::size_t limit = default_limit;
  };
  static registry& devices();
  static int current_device() { return memory::device_space::current_device(); }

  explicit copy_cache(bool device, std::size_t limit = default_limit) : device_(device), limit_(limit) {}

  memory_space space() const { return device_ ? memory_space::device : memory_space::host; }
  void* allocate(std::size_t n, std::string_view field) const;
  void release(void* p) const noexcept {
    memory::in_space(space(), [p](auto tag) { tag.release(p); });
  }

  bool const device_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
  std::size_t limit_;
  long long reused_ = 0, allocated_ = 0;
};

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE copy_cache& copy_cache::of(bool device) {
  static copy_cache& host = *new copy_cache(false);
  if (!device) return host;
  registry& r = devices();
  int const id = current_device();
  std::lock_guard lock(r.mutex);
  if (std::size_t(id) >= r.caches.size()) r.caches.resize(std::size_t(id) + 1, nullptr);
  copy_cache*& c = r.caches[std::size_t(id)];
  if (!c) c = new copy_cache(true, r.limit);
  return *c;
}

CTG_RUNTIME_INLINE void copy_cache::set_device_default_limit(std::size_t bytes) {
  registry& r = devices();
  std::lock_guard lock(r.mutex);
  r.limit = bytes;
}

CTG_RUNTIME_INLINE void* copy_cache::take(std::size_t bytes, std::size_t& size, std::string_view field) {
  std::size_t const n = bytes ? bytes : 1;
  {
    std::lock_guard lock(mutex_);
    auto const it = free_.lower_bound(n);
    if (it != free_.end() && it->first <= n + n / slack_divisor) {
      size = it->first;
      void* p = it->second;
      cached_ -= it->first;
      free_.erase(it);
      ++reused_;
      return p;
    }
    ++allocated_;
  }
  size = n;
  return after_trim_if_needed(device_, [&] { return allocate(n, field); });
}

CTG_RUNTIME_INLINE void copy_cache::give_back(void* p, std::size_t size) noexcept {
  if (!p) return;
  {
    std::lock_guard lock(mutex_);
    if (cached_ + size <= limit_) {
      try {
        free_.emplace(size, p);
        cached_ += size;
        return;
      } catch (...) {  // no memory for the entry: free the block instead
      }
    }
  }
  release(p);
}

CTG_RUNTIME_INLINE void copy_cache::trim(std::size_t keep) noexcept {
  std::lock_guard lock(mutex_);
  while (cached_ > keep && !free_.empty()) {
    auto const last = std::prev(free_.end());
    cached_ -= last->first;
    release(last->second);
    free_.erase(last);
  }
}

CTG_RUNTIME_INLINE void copy_cache::set_limit(std::size_t bytes) noexcept {
  {
    std::lock_guard lock(mutex_);
    limit_ = bytes;
  }
  trim(bytes);
}

CTG_RUNTIME_INLINE copy_cache_info copy_cache::info() const {
  std::lock_guard lock(mutex_);
  return {cached_, limit_, reused_, allocated_};
}

CTG_RUNTIME_INLINE copy_cache::registry& copy_cache::devices() {
  static registry& r = *new registry;
  return r;
}

CTG_RUNTIME_INLINE void* copy_cache::allocate(std::size_t n, std::string_view field) const {
  std::string const what = "a copy of field '" + std::string(field) + "'";
  return memory::in_space(space(), [&](auto tag) { return tag.allocate(n, what); });
}
#endif  // CTG_RUNTIME_DEFINITIONS

}  // namespace detail

// The blocks kept for copies of field values (the tape's saved versions, a
// rollout's snapshots) in host memory (device = false) or in the current CUDA
// device's memory.
inline copy_cache_info copy_cache_state(bool device = false) { return detail::copy_cache::of(device).info(); }
// Keeps at most `bytes` of given-back blocks in host memory and on each
// device (0: keeps none, every copy allocates and frees its own block).
inline void set_copy_cache_limit(std::size_t bytes) noexcept {
  detail::copy_cache::of(false).set_limit(bytes);
  detail::copy_cache::set_device_default_limit(bytes);
  detail::copy_cache::for_each_device([bytes](detail::copy_cache& c) { c.set_limit(bytes); });
}
// Frees every cached block (the limit stays).
inline void trim_copy_cache() noexcept {
  detail::copy_cache::of(false).trim(0);
  detail::copy_cache::for_each_device([](detail::copy_cache& c) { c.trim(0); });
}

}  // namespace ctg
