// What k.grad, called alone, compares against: a kernel's latest forward
// launches (kernel.hpp). Nothing here depends on the kernel, so every kernel
// type shares these classes and their containers' member functions: nested
// in kernel_t, each kernel instantiated its own vector of records and all
// that erasing, searching and growing it takes (and g++ 12's -ftime-report
// stopped with an internal error instantiating them).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

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

  bool same_launch(buffer_list const& b, std::uint64_t n) const { return numbers == n && buffers == b; }
};

// One kernel's latest forward launches, the latest last; safe to use from
// several threads.
class forward_records {
 public:
  void remember(buffer_list buffers, std::uint64_t numbers, std::uint64_t stamp) {
    std::lock_guard lock(mutex_);
    for (auto it = records_.begin(); it != records_.end(); ++it)
      if (it->same_launch(buffers, numbers)) {
        records_.erase(it);  // moved to the back: the latest launch last
        break;
      }
    if (records_.size() == kept) records_.erase(records_.begin());
    records_.push_back({std::move(buffers), numbers, stamp});
  }

  // The stamp of the latest launch on these buffers with these numbers;
  // failing that (numbers the forward launch did not use), of the latest
  // on these buffers; nothing when no launch was on them.
  std::optional<std::uint64_t> stamp_of(buffer_list const& buffers, std::uint64_t numbers) const {
    std::lock_guard lock(mutex_);
    std::optional<std::uint64_t> on_buffers;
    for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
      if (it->same_launch(buffers, numbers)) return it->stamp;
      if (!on_buffers && it->buffers == buffers) on_buffers = it->stamp;
    }
    return on_buffers;
  }

 private:
  static constexpr std::size_t kept = 32;
  mutable std::mutex mutex_;
  std::vector<forward_record> records_;
};

}  // namespace ctg::detail
