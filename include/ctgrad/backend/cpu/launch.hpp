// Runs offloads on the host: a parallel offload over the thread pool, a serial
// offload on the calling thread.
#pragma once
#include <cstdint>

#include "../../eval/analysis.hpp"
#include "../../eval/forward.hpp"
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

// The frame type of one offload: its own locals, loop levels and axes.
template <class Args, class Offload, int Slots>
struct frame_for {
  using shape = eval::loop_shape<Offload>;
  using locals = typename eval::slot_storage<typename offload_root<Offload>::type, Slots>::type;
  template <bool Parallel>
  using type = eval::frame<Args, locals, shape::levels, shape::axes, Parallel>;
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
  using frames = frame_for<Args, parallel_offload<S>, Slots>;
  auto const& loop = unwrap_funcs<S>::get(o.stmt);
  using L = std::remove_cvref_t<decltype(loop)>;
  constexpr int A = L::op_type::axes;
  auto host = eval::make_frame<Args, typename frames::locals, frames::shape::levels, frames::shape::axes, false>(
      &args, &status);
  int lo[A], hi[A];
  eval::forward::bounds(loop, host, lo, hi);
  std::int64_t const count = box_count<A>(lo, hi);
  auto const& body = detail::get<2 * A>(loop.kids);
  thread_pool::instance().parallel_for(count, [&](std::int64_t b, std::int64_t e) {
    auto f = eval::make_frame<Args, typename frames::locals, frames::shape::levels, frames::shape::axes, true>(
        &args, &status);
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
  using frames = frame_for<Args, serial_offload<B>, Slots>;
  auto f = eval::make_frame<Args, typename frames::locals, frames::shape::levels, frames::shape::axes, false>(
      &args, &status);
  Eval::run_body(o.body, f);
}

struct forward_pass {
  template <class Body, class Fr>
  static void run_body(Body const& body, Fr& f) {
    eval::forward::eval(body, f);
  }
};

}  // namespace ctg::cpu
