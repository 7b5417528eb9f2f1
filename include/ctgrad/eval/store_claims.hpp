// Which iteration wrote each element of a field whose stores may write one
// element in two iterations of a parallel offload (an index read from a
// field, a product, a nested loop's index: ad::body_ownership::claims).
// The checks cannot follow those (check/rules.hpp, D5), and the adjoint of a
// store hands the element's gradient to the one store that ran it and
// clears it: two iterations that stored one element, or one that stored it
// while another added into it, leave a value the adjoint cannot attribute.
// So in the adjoint pass on the host each write of such a field claims its
// element's coefficients for its iteration, and a claim that meets another
// iteration's store fails the launch (CTG-AD-013) instead of handing a
// gradient to a store whose value was overwritten. Host code only: the
// device adjoint does not claim.
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

// A number that differs between the iterations of an offload, from its
// loop indices on `axes` axes: 1 and up, below 2^62. Exact for one axis
// (any int index) and, for more, while every index is within [0, 2^(62 /
// axes)) (2^31 on two axes, 2^20 on three); past that a mix, in which two
// iterations share a number with a chance of about 2^-62 per pair.
inline std::uint64_t iteration_mark(int const* index, int axes) {
  auto const bits = [&](int a) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(index[a])); };
  if (axes == 1) return bits(0) + 1;
  int const width = 62 / axes;
  std::uint64_t packed = 0;
  bool fits = true;
  for (int a = 0; a < axes; ++a) {
    fits = fits && index[a] >= 0 && bits(a) < (std::uint64_t(1) << width);
    packed = packed << width | bits(a);
  }
  if (fits) return packed + 1;
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int a = 0; a < axes; ++a) {
    h ^= bits(a) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  return (h & ((std::uint64_t(1) << 62) - 1)) | 1;
}

// A claim's word: 0, untouched; an iteration's mark, added into by that
// iteration alone; `several`, added into by more than one; a mark with
// `stored`, stored by that iteration (and maybe added into by it).
inline constexpr std::uint64_t stored = std::uint64_t(1) << 63;
inline constexpr std::uint64_t several = stored - 1;

// Claims scalar `at` of the `count` of parameter `param` for the iteration
// marked `who`, for a store or (`store` false) an accumulation: false when
// another iteration stored it, or, for a store, touched it at all. The
// first claim of a launch makes the table, the first of a parameter its
// words.
inline bool claim_scalar(launch_status& s, int param, std::int64_t count, std::int64_t at, std::uint64_t who,
                         bool store) {
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
  std::atomic_ref<std::uint64_t> word(marks[at]);
  std::uint64_t seen = word.load(std::memory_order_relaxed);
  for (;;) {
    std::uint64_t next;
    if (seen == 0 || (seen & ~stored) == who)
      next = store ? (who | stored) : (seen == 0 ? who : seen);  // this iteration's own
    else if (store || (seen & stored) != 0)
      return false;  // another iteration stored it, or a store meets another's addition
    else
      next = several;  // additions of several iterations
    if (next == seen || word.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return true;
  }
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
