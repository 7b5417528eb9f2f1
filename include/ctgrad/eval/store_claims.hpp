// Which iteration stored each element, for the stores of a parallel offload
// whose index may name one element in two iterations (an index read from a
// field, a product, a nested loop's index): the checks cannot follow those
// (check/rules.hpp, D5), and the adjoint of a store hands the element's
// gradient to the one store that ran it. Two iterations that stored one
// element leave a value from one of them, and the adjoint cannot know which:
// so in the adjoint pass on the host each such store claims its element for
// its iteration, and a second iteration's claim fails the launch
// (CTG-AD-013) instead of handing the gradient to a store whose value was
// overwritten. Host code only: the device adjoint does not claim.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "status.hpp"

namespace ctg::eval {

inline constexpr int max_claimed_params = 64;

// One launch's claims: per field parameter, a word per scalar of the field
// (each coefficient of each element), zero until an iteration's mark is set.
struct store_claims {
  std::atomic<std::uint64_t*> marks[max_claimed_params] = {};

  store_claims() = default;
  store_claims(store_claims const&) = delete;
  store_claims& operator=(store_claims const&) = delete;
  ~store_claims() {
    for (auto& m : marks) delete[] m.load(std::memory_order_relaxed);
  }
};

// A nonzero number that differs between the iterations of an offload, from
// its loop indices on `axes` axes: exact for one and two axes (any int
// indices); for more, a mix in which two iterations share a number with a
// chance of 2^-64 per pair.
inline std::uint64_t iteration_mark(int const* index, int axes) {
  auto const bits = [&](int a) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(index[a])); };
  if (axes == 1) return bits(0) + 1;
  if (axes == 2) {
    std::uint64_t const m = (bits(0) << 32 | bits(1)) + 1;
    // (-1, -1) wraps to zero: it takes the number of (INT_MIN, 0) instead, an
    // iteration no loop over a field's indices reaches.
    return m != 0 ? m : (std::uint64_t(1) << 63) | 1;
  }
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int a = 0; a < axes; ++a) {
    h ^= bits(a) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  return h != 0 ? h : 1;
}

// Claims scalar `at` of the `count` of parameter `param` for the iteration
// marked `who`: false when another iteration claimed it first. The first
// claim of a launch makes the table, the first of a parameter its words.
inline bool claim_stored_scalar(launch_status& s, int param, std::int64_t count, std::int64_t at, std::uint64_t who) {
  if (param < 0 || param >= max_claimed_params || at < 0 || at >= count) return true;
  std::atomic_ref<store_claims*> table_ref(s.claims);
  store_claims* table = table_ref.load(std::memory_order_acquire);
  if (table == nullptr) {
    auto* made = new store_claims;
    if (table_ref.compare_exchange_strong(table, made, std::memory_order_acq_rel))
      table = made;
    else
      delete made;
  }
  std::atomic<std::uint64_t*>& slot = table->marks[param];
  std::uint64_t* marks = slot.load(std::memory_order_acquire);
  if (marks == nullptr) {
    auto* made = new std::uint64_t[std::size_t(count)]();
    if (slot.compare_exchange_strong(marks, made, std::memory_order_acq_rel))
      marks = made;
    else
      delete[] made;
  }
  std::uint64_t seen = 0;
  if (std::atomic_ref<std::uint64_t>(marks[at]).compare_exchange_strong(seen, who, std::memory_order_relaxed))
    return true;
  return seen == who;
}

// Deletes a launch's claims when its launcher is done with it, thrown or not.
struct store_claims_release {
  launch_status& status;
  explicit store_claims_release(launch_status& s) : status(s) {}
  store_claims_release(store_claims_release const&) = delete;
  store_claims_release& operator=(store_claims_release const&) = delete;
  ~store_claims_release() {
    delete status.claims;
    status.claims = nullptr;
  }
};

}  // namespace ctg::eval
