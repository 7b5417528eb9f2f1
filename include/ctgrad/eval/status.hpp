// What a running kernel reports back to its launcher: the first out-of-range
// index of a field or of a vector's or matrix's component (checked builds), an adstack overflow, an element two iterations
// stored (eval/store_claims.hpp). One record per launch, written by the
// first thread that fails; the launcher turns it into an exception naming
// the kernel and the parameter.
#pragma once
#include <atomic>
#include <cstdint>

#include "../config.hpp"

namespace ctg::eval {

enum class failure : int {
  none = 0,
  index_out_of_range = 1,
  adstack_overflow = 2,
  store_conflict = 3,
  component_out_of_range = 4
};

// Which iteration stored each element, for the stores of an adjoint pass on
// the host whose index may repeat (eval/store_claims.hpp); made by the first
// such store, deleted by the launcher.
struct store_claims;

struct launch_status {
  int failed;          // a failure code, set once
  int param;           // field parameter position (index errors)
  int rank;            // number of indices recorded
  int site;            // adstack: the loop site that overflowed
  long long index[4];  // the offending index (a component's: its indices, then the matrix's rows and columns)
  long long required;  // adstack: entries needed by the failing thread
  long long available; // adstack: entries available per thread
  store_claims* claims; // null until a store claims an element
};

CTG_HOST_DEVICE bool claim_failure(launch_status* s, failure what) {
#if CTG_DEVICE_PASS
  return atomicCAS(&s->failed, 0, int(what)) == 0;
#else
  int expected = 0;
  return std::atomic_ref<int>(s->failed).compare_exchange_strong(expected, int(what));
#endif
}

// The failure path of every checked access, out of line: inlined at each
// access (a compare-and-swap and the stores of the index), it made a checked
// kernel's chunk function several times the size of an unchecked one, and
// as many times slower to compile and optimise.
// `stored` entries of `index` are kept (a component's: its rank indices,
// then the matrix's rows and columns), `rank` of them printed.
CTG_HOST_DEVICE CTG_NOINLINE void report_element_at(launch_status* s, failure what, int param, int rank,
                                                    long long const* index, int stored = -1) {
  if (s == nullptr || !claim_failure(s, what)) return;
  s->param = param;
  s->rank = rank;
  for (int k = 0; k < (stored < 0 ? rank : stored); ++k) s->index[k] = index[k];
}

template <class... I>
CTG_HOST_DEVICE void report_index(launch_status* s, int param, I... idx) {
  long long const index[sizeof...(I) + 1] = {(long long)(idx)..., 0};
  report_element_at(s, failure::index_out_of_range, param, int(sizeof...(I)), index);
}

}  // namespace ctg::eval
