// Runs offloads on the host: a parallel offload over the thread pool, a serial
// offload on the calling thread.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "../plan.hpp"
#include "thread_pool.hpp"
#include "../../lower/vocabulary.hpp"

namespace ctg::cpu {

CTG_IMPL_IR_VOCABULARY;


// Iterations [b, e) of one offload on the calling thread. Everything below is
// inlined into this one function (see CTG_FLATTEN). The frame is a local of
// this function, not a reference from outside, so the compiler can tell that
// stores to fields never modify it and keep its values in registers.
// `margin`: iterations within it of the chunk's edges accumulate atomically
// into banded fields (ad::slot_ownership), the others with plain adds.
template <class Plan, int A, class Body, class Args>
CTG_FLATTEN void run_chunk(backend::loop_box<A> const box, Body const body, Args const& args,
                           eval::launch_status& status, std::uint32_t* stack, long long capacity, bool concurrent,
                           long long margin, std::int64_t b, std::int64_t e) {
  Args const local_args = args;  // a copy of the field views, for the same reason
  // Zeroed once per chunk: the adjoint restores a local from the site slot of
  // an assignment only in the branch that saved it, which GCC cannot follow
  // (-Wmaybe-uninitialized on every kernel with a let inside an if_ arm).
  typename Plan::template frame<true> f{};
  f.args = &local_args;
  f.status = &status;
  f.concurrent = concurrent;
  Plan::prepare(f, stack, 1, capacity);
  for (std::int64_t it = b; it < e; ++it) {
    box.set(f, it);
    if constexpr (Plan::banded) f.near_chunk_edge = it - b < margin || e - it <= margin;
    Plan::iteration(body, f);
  }
  Plan::finish(f);
}
template <class Plan, class Body, class Args>
CTG_FLATTEN void run_serial(Body const& body, Args const& args, eval::launch_status& status, std::uint32_t* stack,
                            long long capacity) {
  Args const local_args = args;
  typename Plan::template frame<false> f{};  // zeroed: see run_chunk
  f.args = &local_args;
  f.status = &status;
  Plan::prepare(f, stack, 1, capacity);
  Plan::iteration(body, f);
  Plan::finish(f);
}

// One parallel offload made ready to run on the host in one pass: its loop's
// bounds evaluated, its box narrowed, its adstack sized. Every host order of
// running it (the thread pool's chunks here, the race checker's orders in
// backend/race) starts from this one description. `iterations` is
// adstack_capacity<N> (or -1).
template <class Pass, int Slots, class Args, class S>
struct prepared_offload {
  using plan = typename Pass::template plan<Args, parallel_offload<S>, Slots>;
  using traits = ir::offload_traits<parallel_offload<S>>;
  static constexpr int axes = traits::axes;
  using body_type = typename traits::body;
  static constexpr int params = int(Args::size);

  Args const& args;
  eval::launch_status& status;
  body_type const& body;
  backend::loop_box<axes> box{};
  long long capacity = 0;  // adstack bytes per thread
  int unsized_site = -1;   // a loop whose adstack no launch can size (nothing runs)
  long long margin = 0;    // the chunk margin of the banded fields (run_chunk)

  prepared_offload(parallel_offload<S> const& o, Args const& a, eval::launch_status& st, long long iterations)
      : args(a), status(st), body(traits::body_of(o)) {
    auto const& loop = traits::loop_of(o);
    typename plan::template frame<false> host;
    host.args = &args;
    host.status = &status;
    eval::forward::bounds(loop, host, box.lo, box.hi);
    backend::narrow_to_owned(box, args);
    capacity = backend::adstack_bytes<plan>(body, args, iterations, unsized_site, &box);
    if constexpr (plan::banded) margin = plan::ownership::template chunk_margin<params>(body, host, box.lo, box.hi);
  }
  std::int64_t count() const { return box.count(); }
  // A thread's adstack, sized for this offload.
  std::unique_ptr<std::uint32_t[]> make_stack() const {
    return std::unique_ptr<std::uint32_t[]>(capacity > 0 ? new std::uint32_t[std::size_t(capacity / 4)] : nullptr);
  }
  // Iterations [b, e) on the calling thread; `concurrent`: other threads run
  // other iterations at the same time (accumulations must be atomic).
  void run(std::int64_t b, std::int64_t e, bool concurrent, std::uint32_t* stack) const {
    run_chunk<plan>(box, body, args, status, stack, capacity, concurrent, margin, b, e);
  }
};

// Runs one offload in one pass over the thread pool. `unsized` receives the
// site of a loop whose adstack no launch can size.
template <class Pass, int Slots, class Args, class S>
void run_offload(parallel_offload<S> const& o, Args const& args, eval::launch_status& status,
                 long long iterations = -1, int* unsized = nullptr) {
  prepared_offload<Pass, Slots, Args, S> const p(o, args, status, iterations);
  if (p.unsized_site >= 0) {
    if (unsized) *unsized = p.unsized_site;
    return;
  }
  auto& pool = thread_pool::instance();
  // Alone on the calling thread, accumulations need no atomics.
  bool const concurrent = !pool.runs_on_caller(p.count());
  pool.parallel_for(p.count(), [&](std::int64_t b, std::int64_t e) {
    auto const stack = p.make_stack();
    p.run(b, e, concurrent, stack.get());
  });
}

template <class Pass, int Slots, class Args, class B>
void run_offload(serial_offload<B> const& o, Args const& args, eval::launch_status& status,
                 long long iterations = -1, int* unsized = nullptr) {
  using plan = typename Pass::template plan<Args, serial_offload<B>, Slots>;
  int site = -1;
  long long const capacity = backend::adstack_bytes<plan>(o.body, args, iterations, site);
  if (site >= 0) {
    if (unsized) *unsized = site;
    return;
  }
  std::unique_ptr<std::uint32_t[]> stack(capacity > 0 ? new std::uint32_t[std::size_t(capacity / 4)] : nullptr);
  run_serial<plan>(o.body, args, status, stack.get(), capacity);
}

}  // namespace ctg::cpu
