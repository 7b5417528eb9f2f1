// What k.grad, called alone, compares against: a kernel's latest forward
// launches (kernel.hpp). Nothing here depends on the kernel, so every kernel
// type shares these classes and their containers' member functions: nested
// in kernel_t, each kernel instantiated its own vector of records and all
// that erasing, searching and growing it takes (and g++ 12's -ftime-report
// stopped with an internal error instantiating them).
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "../config.hpp"

namespace ctg::detail {

// The buffers an adjoint reads: the first eight inline, so that a launch
// allocates nothing for them.
struct buffer_list {
  static constexpr std::size_t inline_capacity = 8;
  std::array<void const*, inline_capacity> first{};
  std::vector<void const*> rest;
  std::size_t count = 0;
  void push(void const* id) {
    if (count < inline_capacity)
      first[count] = id;
    else
      rest.push_back(id);
    ++count;
  }
  void const* operator[](std::size_t k) const { return k < inline_capacity ? first[k] : rest[k - inline_capacity]; }
  std::size_t size() const { return count; }
  friend bool operator==(buffer_list const& a, buffer_list const& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (a[k] != b[k]) return false;
    return true;
  }
};

// A forward launch: the buffers its adjoint reads, its plain-number
// arguments (hashed: launches of one kernel on the same fields at other
// steps, k(u, 0, 1) and k(u, 1, 0), read other rows and are told apart),
// and a write stamp (field.hpp) taken after the launch's own writes.
struct forward_record {
  buffer_list buffers;
  std::uint64_t numbers = 0;
  std::uint64_t stamp = 0;
  std::uint64_t hash = 0;  // of buffers and numbers
  std::uint32_t older = ~std::uint32_t(0), newer = ~std::uint32_t(0);  // the order of use

  bool same_launch(buffer_list const& b, std::uint64_t n) const { return numbers == n && buffers == b; }
};

// One kernel's forward launches, the `kept` distinct ones launched last (a
// launch again on the same buffers with the same numbers updates its record
// and makes it the latest);
// safe to use from several threads. A rollout steps one kernel through
// thousands of launches told apart by the step, and k.grad must find the
// record of each; past `kept`, the oldest are forgotten, and k.grad of a
// launch forgotten has nothing to compare against (docs/04, CTG-TAPE-003).
// Found by a hash table (open addressing, linear probing), so that a
// launch costs the same with 10 records or 4,096; both tables grow with
// the records, then stay, so that a launch allocates nothing once they
// have.
class forward_records {
 public:
  static constexpr std::size_t kept = 4096;

  void remember(buffer_list buffers, std::uint64_t numbers, std::uint64_t stamp);

  // The stamp of the launch on these buffers with these numbers; failing
  // that (numbers the forward launch did not use), of the latest on these
  // buffers; nothing when no remembered launch was on them.
  std::optional<std::uint64_t> stamp_of(buffer_list const& buffers, std::uint64_t numbers) const;

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return records_.size();
  }

  // A launch that wrote values and keeps no record (k.fwd's tangent pass, a
  // launch on fields without gradients): every such launch calls it, so it
  // takes no lock.
  void note_unrecorded_launch() {
    if (!unrecorded_.load(std::memory_order_relaxed)) unrecorded_.store(true, std::memory_order_relaxed);
  }
  // Whether every launch of the kernel that wrote values is among the
  // records (none forgotten, none unrecorded): then buffers no record names
  // are buffers the kernel never ran forward on.
  bool holds_every_launch() const {
    std::lock_guard lock(mutex_);
    return !forgot_ && !unrecorded_.load(std::memory_order_relaxed);
  }

 private:
  static constexpr std::size_t none = ~std::size_t(0);
  static constexpr std::uint32_t empty = ~std::uint32_t(0);

  static std::uint64_t hash_of(buffer_list const& buffers, std::uint64_t numbers);
  std::size_t mask() const { return slots_.size() - 1; }

  // The records in the order of use, oldest first: a list through them.
  void unlink(std::size_t at);
  void link_latest(std::size_t at);
  void make_latest(std::size_t at);

  std::size_t find(buffer_list const& buffers, std::uint64_t numbers, std::uint64_t h) const;
  void index(std::size_t at);
  // Takes record `at` out of the table, moving back the records after it
  // that probing would no longer reach (deletion by backward shift).
  void unindex(std::size_t at);
  // A table of twice the records' capacity (a power of two), filled again.
  void reindex();

  mutable std::mutex mutex_;
  std::vector<forward_record> records_;
  std::vector<std::uint32_t> slots_;
  std::uint32_t oldest_ = empty, newest_ = empty;
  bool forgot_ = false;
  std::atomic<bool> unrecorded_{false};
};

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE CTG_NOINLINE void forward_records::remember(buffer_list buffers, std::uint64_t numbers,
                                                               std::uint64_t stamp) {
  std::lock_guard lock(mutex_);
  std::uint64_t const h = hash_of(buffers, numbers);
  if (std::size_t const found = find(buffers, numbers, h); found != none) {
    records_[found].stamp = stamp;
    make_latest(found);
    return;
  }
  std::size_t at;
  if (records_.size() < kept) {
    at = records_.size();
    records_.push_back({});
    if (2 * records_.size() > slots_.size()) reindex();
  } else {
    at = oldest_;  // forgotten
    forgot_ = true;
    unindex(at);
    unlink(at);
  }
  records_[at] = {std::move(buffers), numbers, stamp, h};
  index(at);
  link_latest(at);
}

CTG_RUNTIME_INLINE CTG_NOINLINE std::optional<std::uint64_t> forward_records::stamp_of(buffer_list const& buffers,
                                                                                       std::uint64_t numbers) const {
  std::lock_guard lock(mutex_);
  if (std::size_t const found = find(buffers, numbers, hash_of(buffers, numbers)); found != none)
    return records_[found].stamp;
  std::optional<std::uint64_t> on_buffers;
  for (auto const& r : records_)
    if (r.buffers == buffers && (!on_buffers || r.stamp > *on_buffers)) on_buffers = r.stamp;
  return on_buffers;
}

CTG_RUNTIME_INLINE std::uint64_t forward_records::hash_of(buffer_list const& buffers, std::uint64_t numbers) {
  std::uint64_t h = numbers ^ 0x9e3779b97f4a7c15ull;
  for (std::size_t k = 0; k < buffers.size(); ++k) {
    h ^= std::uint64_t(reinterpret_cast<std::uintptr_t>(buffers[k]));
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  return h;
}

CTG_RUNTIME_INLINE void forward_records::unlink(std::size_t at) {
  forward_record& r = records_[at];
  (r.older != empty ? records_[r.older].newer : oldest_) = r.newer;
  (r.newer != empty ? records_[r.newer].older : newest_) = r.older;
  r.older = r.newer = empty;
}

CTG_RUNTIME_INLINE void forward_records::link_latest(std::size_t at) {
  forward_record& r = records_[at];
  r.older = newest_;
  r.newer = empty;
  (newest_ != empty ? records_[newest_].newer : oldest_) = std::uint32_t(at);
  newest_ = std::uint32_t(at);
}

CTG_RUNTIME_INLINE void forward_records::make_latest(std::size_t at) {
  if (newest_ == std::uint32_t(at)) return;
  unlink(at);
  link_latest(at);
}

CTG_RUNTIME_INLINE std::size_t forward_records::find(buffer_list const& buffers, std::uint64_t numbers,
                                                     std::uint64_t h) const {
  if (slots_.empty()) return none;
  for (std::size_t s = h & mask(); slots_[s] != empty; s = (s + 1) & mask()) {
    forward_record const& r = records_[slots_[s]];
    if (r.hash == h && r.same_launch(buffers, numbers)) return slots_[s];
  }
  return none;
}

CTG_RUNTIME_INLINE void forward_records::index(std::size_t at) {
  std::size_t s = records_[at].hash & mask();
  while (slots_[s] != empty) s = (s + 1) & mask();
  slots_[s] = std::uint32_t(at);
}

CTG_RUNTIME_INLINE void forward_records::unindex(std::size_t at) {
  std::size_t i = records_[at].hash & mask();
  while (slots_[i] != std::uint32_t(at)) i = (i + 1) & mask();
  for (std::size_t j = (i + 1) & mask(); slots_[j] != empty; j = (j + 1) & mask()) {
    std::size_t const home = records_[slots_[j]].hash & mask();
    bool const reachable = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!reachable) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = empty;
}

CTG_RUNTIME_INLINE void forward_records::reindex() {
  std::size_t size = 16;
  while (size < 2 * records_.capacity()) size *= 2;
  slots_.assign(size, empty);
  for (std::size_t k = 0; k + 1 < records_.size(); ++k) index(k);  // the last is indexed by the caller
}
#endif  // CTG_RUNTIME_DEFINITIONS

}  // namespace ctg::detail
