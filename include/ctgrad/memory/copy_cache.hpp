// Blocks for copies of field values: the versions a tape saves before a
// launch overwrites them, and the snapshots of a checkpointed rollout.
//
// A copy is written in full before anything reads it, so its block needs no
// zeroing; and the same sizes come back every step of a rollout and every
// iteration of an optimisation loop. A block given back is therefore kept,
// up to a limit per memory space, for the next copy of about its size: saving
// then costs the copy, not a fresh allocation whose pages fault in on first
// touch (on the host) or a cudaMalloc that synchronises the device.
#pragma once
#include <cstddef>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <string_view>

#include "../errors.hpp"

#if defined(CTG_HAS_CUDA)
#  include "cuda.hpp"
#endif

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
  static constexpr std::size_t alignment = 64;  // of every host buffer of a field (field_storage uses it)
  // A block at most this much larger than asked for may serve a copy.
  static constexpr std::size_t slack_divisor = 8;

  // Never destroyed: a tape or field with static storage duration may give
  // a block back after every function-local static is gone. What is cached
  // at exit stays reachable from here, and the system reclaims it.
  static copy_cache& of(bool device) {
    static copy_cache& host = *new copy_cache(false);
    static copy_cache& gpu = *new copy_cache(true);
    return device ? gpu : host;
  }

  copy_cache(copy_cache const&) = delete;
  copy_cache& operator=(copy_cache const&) = delete;

  // A block of at least `bytes` (its contents undefined) for a copy of the
  // named field. `size` receives the block's true size, which give_back needs.
  void* take(std::size_t bytes, std::size_t& size, std::string_view field) {
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
    return allocate(n, field);
  }

  void give_back(void* p, std::size_t size) noexcept {
    if (!p) return;
    {
      std::lock_guard lock(mutex_);
      if (cached_ + size <= limit_) {
        free_.emplace(size, p);
        cached_ += size;
        return;
      }
    }
    release(p);
  }

  // Frees cached blocks until at most `keep` bytes remain, largest first.
  void trim(std::size_t keep) noexcept {
    std::multimap<std::size_t, void*> freed;
    {
      std::lock_guard lock(mutex_);
      while (cached_ > keep && !free_.empty()) {
        auto const last = std::prev(free_.end());
        cached_ -= last->first;
        freed.insert(*last);
        free_.erase(last);
      }
    }
    for (auto const& [size, p] : freed) release(p);
  }

  void set_limit(std::size_t bytes) noexcept {
    {
      std::lock_guard lock(mutex_);
      limit_ = bytes;
    }
    trim(bytes);
  }

  copy_cache_info info() const {
    std::lock_guard lock(mutex_);
    return {cached_, limit_, reused_, allocated_};
  }

 private:
  explicit copy_cache(bool device) : device_(device) {}

  void* allocate(std::size_t n, std::string_view field) const {
    if (!device_) return ::operator new(n, std::align_val_t{alignment});
    std::string const what = "a copy of field '" + std::string(field) + "'";
#if defined(CTG_HAS_CUDA)
    return cuda::device_malloc_uninitialized(n, what);
#else
    throw launch_error(what + ": device memory requested, but this program was built without CUDA (link ctgrad::cuda)");
#endif
  }
  void release(void* p) const noexcept {
    if (!device_) {
      ::operator delete(p, std::align_val_t{alignment});
      return;
    }
#if defined(CTG_HAS_CUDA)
    cuda::device_free(p);
#endif
  }

  bool const device_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
  // A default that holds the copies of a few large rollouts: what one tape
  // freed serves the next without page faults, and a program that is done
  // with its tapes gives the memory back with ctg::trim_copy_cache().
  std::size_t limit_ = std::size_t(1) << 30;
  long long reused_ = 0, allocated_ = 0;
};

}  // namespace detail

// The blocks kept for copies of field values (the tape's saved versions, a
// rollout's snapshots) in host memory (device = false) or device memory.
inline copy_cache_info copy_cache_state(bool device = false) { return detail::copy_cache::of(device).info(); }
// Keeps at most `bytes` of given-back blocks per memory space (0: keeps none,
// every copy allocates and frees its own block).
inline void set_copy_cache_limit(std::size_t bytes) noexcept {
  detail::copy_cache::of(false).set_limit(bytes);
  detail::copy_cache::of(true).set_limit(bytes);
}
// Frees every cached block (the limit stays).
inline void trim_copy_cache() noexcept {
  detail::copy_cache::of(false).trim(0);
  detail::copy_cache::of(true).trim(0);
}

}  // namespace ctg
