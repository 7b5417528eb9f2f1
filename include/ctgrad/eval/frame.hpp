// The per-thread state of a running offload: the bound arguments, the loop
// indices by level and axis, the locals by slot. The IR tree itself holds only
// what is the same for every thread.
#pragma once
#include "../config.hpp"
#include "../detail/tuple.hpp"
#include "status.hpp"

namespace ctg::eval {

template <class Args, class Locals, int Levels, int Axes, bool Parallel>
struct frame {
  using args_type = Args;
  static constexpr bool parallel = Parallel;
  static constexpr int levels = Levels > 0 ? Levels : 1;
  static constexpr int axes = Axes > 0 ? Axes : 1;

  Args const* args;
  launch_status* status;
  // Whether other threads run iterations of the same offload at the same
  // time: accumulations into shared elements are atomic only then. A CPU
  // offload run entirely by the calling thread clears it.
  bool concurrent = Parallel;
  // Whether this iteration lies within the chunk margin of its chunk's edges
  // (ad::slot_ownership): accumulations into a banded field are atomic only
  // then, when concurrent. Stays true where nothing runs chunks (a device).
  bool near_chunk_edge = true;
  // Bit I: accumulations into field parameter I go to this thread's private
  // copy of the buffer they add into (ad::slot_ownership::only_accumulated
  // and only_read; summed after the launch), so they are plain adds.
  unsigned long long private_params = 0;
  int idx[levels][axes];
  Locals locals;

  // Whether an add into field parameter `param` (not owned by the
  // iteration; `banded`: a banded field) may meet another thread's add to
  // the same element, so that it must be atomic. The one place that reads
  // the three flags above, for the forward and the reverse pass.
  CTG_HOST_DEVICE bool add_may_race(bool banded, int param) const {
    bool const private_copy = param >= 0 && param < 64 && (private_params >> param & 1) != 0;
    return concurrent && (!banded || near_chunk_edge) && !private_copy;
  }
};

}  // namespace ctg::eval
