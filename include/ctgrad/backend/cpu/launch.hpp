// Runs offloads on the host: a parallel offload over the thread pool, a serial
// offload on the calling thread.
#pragma once
#include <cstdint>

#include "../../eval/analysis.hpp"
#include "../../eval/forward.hpp"
#include "../../ad/tangent.hpp"
#include "thread_pool.hpp"

namespace ctg::cpu {

using namespace ctg::ir;

template <class Offload>
struct offload_root;
template <class S>
struct offload_root<parallel_offload<S>> {
  using type = S;
};
template <class B>
struct offload_root<serial_offload<B>> {
  using type = B;
};

// The frame type of one offload for a pass: its own locals, loop levels and axes.
template <class Pass, class Args, class Offload, int Slots>
struct frame_for {
  using shape = eval::loop_shape<Offload>;
  using locals = typename eval::slot_storage<typename offload_root<Offload>::type, Slots>::type;
  template <bool Parallel>
  using type = typename Pass::template frame<Args, locals, shape::levels, shape::axes, Parallel>;
  template <bool Parallel>
  static type<Parallel> make(Args const* args, eval::launch_status* status) {
    type<Parallel> f;
    f.args = args;
    f.status = status;
    return f;
  }
};

// Decomposes a linear iteration number into the indices of an A-axis box.
template <int A, class Fr>
inline void set_offload_indices(Fr& f, std::int64_t it, int const (&lo)[A], int const (&hi)[A]) {
  for (int a = A - 1; a >= 0; --a) {
    std::int64_t const n = hi[a] - lo[a];
    f.idx[0][a] = lo[a] + int(it % n);
    it /= n;
  }
}

template <int A>
inline std::int64_t box_count(int const (&lo)[A], int const (&hi)[A]) {
  std::int64_t n = 1;
  for (int a = 0; a < A; ++a) n *= hi[a] > lo[a] ? std::int64_t(hi[a] - lo[a]) : 0;
  return n;
}

// The evaluator calls for one offload; Eval supplies run_body(body, frame).
template <int Slots, class Eval, class Args, class S>
void run_offload(parallel_offload<S> const& o, Args const& args, eval::launch_status& status) {
  using frames = frame_for<Eval, Args, parallel_offload<S>, Slots>;
  auto const& loop = unwrap_funcs<S>::get(o.stmt);
  using L = std::remove_cvref_t<decltype(loop)>;
  constexpr int A = L::op_type::axes;
  auto host = frames::template make<false>(&args, &status);
  int lo[A], hi[A];
  eval::forward::bounds(loop, host, lo, hi);
  std::int64_t const count = box_count<A>(lo, hi);
  auto const& body = detail::get<2 * A>(loop.kids);
  thread_pool::instance().parallel_for(count, [&](std::int64_t b, std::int64_t e) {
    auto f = frames::template make<true>(&args, &status);
    for (std::int64_t it = b; it < e; ++it) {
      if constexpr (A == 1)
        f.idx[0][0] = lo[0] + int(it);
      else
        set_offload_indices<A>(f, it, lo, hi);
      Eval::run_body(body, f);
    }
  });
}

template <int Slots, class Eval, class Args, class B>
void run_offload(serial_offload<B> const& o, Args const& args, eval::launch_status& status) {
  using frames = frame_for<Eval, Args, serial_offload<B>, Slots>;
  auto f = frames::template make<false>(&args, &status);
  Eval::run_body(o.body, f);
}

struct forward_pass {
  template <class Args, class Locals, int Levels, int Axes, bool Parallel>
  using frame = eval::frame<Args, Locals, Levels, Axes, Parallel>;
  template <class Body, class Fr>
  static void run_body(Body const& body, Fr& f) {
    eval::forward::eval(body, f);
  }
};

struct tangent_pass {
  template <class Args, class Locals, int Levels, int Axes, bool Parallel>
  using frame = ad::tangent_frame<Args, Locals, Levels, Axes, Parallel>;
  template <class Body, class Fr>
  static void run_body(Body const& body, Fr& f) {
    ad::tangent::run_body(body, f);
  }
};

}  // namespace ctg::cpu

#include <memory>
#include <string>

#include "../../ad/offload.hpp"

namespace ctg::cpu {

// Raised by the launcher when a thread's adstack overflowed.
struct adstack_report {
  int site = -1;
  long long required = 0;
  long long available = 0;
};

template <class Plan, class Fr>
void prepare_reverse_frame(Fr& f, unsigned char* stack, long long capacity) {
  ad::zero_all(f.adj);
  f.stack = ad::adstack{stack, capacity, 0, 0, -1};
}

template <class Plan, class Fr>
void note_overflow(Fr const& f, adstack_report& report, std::mutex& m) {
  if (!f.stack.overflowed()) return;
  std::lock_guard lock(m);
  if (report.site < 0) report.site = f.stack.overflow_site;
  report.required = std::max<long long>(report.required, f.stack.high);
  report.available = f.stack.capacity;
}

// Runs the adjoint of one offload. `iterations` is adstack_capacity<N> (or -1).
template <int Slots, class Args, class S>
adstack_report run_reverse_offload(parallel_offload<S> const& o, Args const& args, eval::launch_status& status,
                                   long long iterations, std::string& unsized) {
  using plan = ad::reverse_plan<Args, parallel_offload<S>, Slots>;
  auto const& loop = unwrap_funcs<S>::get(o.stmt);
  constexpr int A = plan::parts::axes;
  auto host = eval::make_frame<Args, typename plan::locals, plan::shape::levels, plan::shape::axes, false>(&args,
                                                                                                          &status);
  int lo[A], hi[A];
  eval::forward::bounds(loop, host, lo, hi);
  std::int64_t const count = box_count<A>(lo, hi);
  auto const& body = detail::get<2 * A>(loop.kids);

  long long capacity = 0;
  if constexpr (plan::demand.uses_stack) {
    typename plan::capacity walk{{&args}, iterations};
    ad::bound_env<plan::shape::levels, plan::shape::axes> env{};
    for (int a = 0; a < A; ++a) env.idx[0][a] = {lo[a], hi[a] - 1, true};
    walk.visit(body, env);
    if (walk.unsized_site >= 0) {
      ad::describe_site(&body, walk.unsized_site, 1, "", unsized);
      return {};
    }
    capacity = walk.bytes;
  }

  adstack_report report;
  std::mutex report_mutex;
  thread_pool::instance().parallel_for(count, [&](std::int64_t b, std::int64_t e) {
    std::unique_ptr<unsigned char[]> stack(capacity > 0 ? new unsigned char[std::size_t(capacity)] : nullptr);
    typename plan::template frame<true> f;
    f.args = &args;
    f.status = &status;
    prepare_reverse_frame<plan>(f, stack.get(), capacity);
    for (std::int64_t it = b; it < e; ++it) {
      if constexpr (A == 1)
        f.idx[0][0] = lo[0] + int(it);
      else
        set_offload_indices<A>(f, it, lo, hi);
      plan::evaluator::run_body(body, f);
      if (f.stack.overflowed()) {
        note_overflow<plan>(f, report, report_mutex);
        f.stack = ad::adstack{stack.get(), capacity, 0, 0, -1};
        ad::zero_all(f.adj);
      }
    }
  });
  return report;
}

template <int Slots, class Args, class B>
adstack_report run_reverse_offload(serial_offload<B> const& o, Args const& args, eval::launch_status& status,
                                   long long iterations, std::string& unsized) {
  using plan = ad::reverse_plan<Args, serial_offload<B>, Slots>;
  long long capacity = 0;
  if constexpr (plan::demand.uses_stack) {
    typename plan::capacity walk{{&args}, iterations};
    ad::bound_env<plan::shape::levels, plan::shape::axes> env{};
    walk.visit(o.body, env);
    if (walk.unsized_site >= 0) {
      ad::describe_site(&o.body, walk.unsized_site, 0, "", unsized);
      return {};
    }
    capacity = walk.bytes;
  }
  std::unique_ptr<unsigned char[]> stack(capacity > 0 ? new unsigned char[std::size_t(capacity)] : nullptr);
  typename plan::template frame<false> f;
  f.args = &args;
  f.status = &status;
  prepare_reverse_frame<plan>(f, stack.get(), capacity);
  plan::evaluator::run_body(o.body, f);
  adstack_report report;
  std::mutex m;
  note_overflow<plan>(f, report, m);
  return report;
}

}  // namespace ctg::cpu
