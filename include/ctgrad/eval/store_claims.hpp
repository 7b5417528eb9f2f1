// Which iteration wrote each element of a field whose stores may write one
// element in two iterations of a parallel offload (an index read from a
// field, a product, a nested loop's index: ad::body_ownership::claims).
// The checks cannot follow those (check/rules.hpp, D5), and the adjoint of a
// store hands the element's gradient to the one store that ran it and
// clears it: two iterations that stored one element, or one that stored it
// while another added into it, leave a value the adjoint cannot attribute.
// So in the adjoint pass on the host each write of such a field claims its
// element's coefficients for its iteration, and a claim that conflicts with
// another iteration's write (write_kind says which do) fails the launch
// (CTG-AD-013) instead of handing a gradient to a store whose value was
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
  std::uint64_t* marks[max_claimed_params] = {};

  store_claims() = default;
  store_claims(store_claims const&) = delete;
  store_claims& operator=(store_claims const&) = delete;
  ~store_claims() {
    for (std::uint64_t* m : marks) delete[] m;
  }
};

// A number that differs between the iterations of an offload, from its
// loop indices on `axes` axes: 1 and up, at most 2^61. Exact for one axis
// (any int index) and, for more, while every index is within [0, 2^(61 /
// axes)) (2^30 on two axes, 2^20 on three); past that a mix, in which two
// iterations share a number with a chance of about 2^-61 per pair.
inline std::uint64_t iteration_mark(int const* index, int axes) {
  auto const bits = [&](int a) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(index[a])); };
  if (axes == 1) return bits(0) + 1;
  int const width = 61 / axes;
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
  return (h & ((std::uint64_t(1) << 61) - 1)) | 1;
}

// What a write does to an element, as the claims see it. It adds into it
// (a += whose value carries a gradient); it stores a value that carries
// none (y[p[i]] = 0.0), which takes the element's gradient and passes none
// on, so that iterations that all do this may share the element; or it
// stores one that does, which no other iteration may touch.
enum class write_kind : std::uint64_t { adds = 1, clears = 2, exclusive = 3 };

// A claim's word: 0, untouched; else a write_kind in its top two bits and
// below them the mark of the one iteration that wrote the element, or
// `several_iterations` when more than one did, all of one sharing kind. One
// iteration's writes of different kinds make its claim exclusive.
inline constexpr int kind_shift = 62;
inline constexpr std::uint64_t several_iterations = (std::uint64_t(1) << kind_shift) - 1;

// What `slot` points to, made by `make` when it is null. Threads that find
// it null at once each make one, and all but the first delete theirs.
template <class T, class Make, class Drop>
T* made_once(std::atomic_ref<T*> slot, Make make, Drop drop) {
  T* held = slot.load(std::memory_order_acquire);
  if (held != nullptr) return held;
  T* made = make();
  if (slot.compare_exchange_strong(held, made, std::memory_order_acq_rel)) return made;
  drop(made);
  return held;
}

// Claims scalar `at` of the `count` of parameter `param` for the iteration
// marked `who`: false when the element was written by another iteration in
// a way that conflicts (two kinds, or an exclusive one). The first claim of
// a launch makes the table, the first of a parameter its words.
inline bool claim_scalar(launch_status& s, int param, std::int64_t count, std::int64_t at, std::uint64_t who,
                         write_kind kind) {
  if (param < 0 || param >= max_claimed_params || at < 0 || at >= count) return true;
  store_claims* const table = made_once(
      std::atomic_ref<store_claims*>(s.claims), [] { return new store_claims; }, [](store_claims* t) { delete t; });
  std::uint64_t* const marks = made_once(
      std::atomic_ref<std::uint64_t*>(table->marks[param]), [&] { return new std::uint64_t[std::size_t(count)](); },
      [](std::uint64_t* m) { delete[] m; });
  auto const word_of = [](write_kind k, std::uint64_t w) { return std::uint64_t(k) << kind_shift | w; };
  std::atomic_ref<std::uint64_t> word(marks[at]);
  std::uint64_t seen = word.load(std::memory_order_relaxed);
  for (;;) {
    std::uint64_t next;
    auto const seen_kind = write_kind(seen >> kind_shift);
    std::uint64_t const seen_who = seen & several_iterations;
    if (seen == 0)
      next = word_of(kind, who);
    else if (seen_who == who)  // this iteration's own element
      next = seen_kind == kind ? seen : word_of(write_kind::exclusive, who);
    else if (seen_kind == kind && kind != write_kind::exclusive)
      next = word_of(kind, several_iterations);
    else
      return false;
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
