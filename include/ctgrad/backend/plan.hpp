// What every backend needs to run one offload in one pass (forward, tangent,
// reverse): the frame type, how to prepare a thread's frame, and what one
// iteration does. Backends only decide where iterations run.
#pragma once
#include <cstdint>

#include "../ad/gather.hpp"
#include "../ad/interleave.hpp"
#include "../ad/offload.hpp"
#include "../ad/tangent.hpp"
#include "../eval/slots.hpp"
#include "../eval/forward.hpp"
#include "../eval/status.hpp"
#include "../lower/vocabulary.hpp"

namespace ctg::backend {

CTG_IMPL_IR_VOCABULARY;

// The index box of a parallel offload.
template <int A>
struct loop_box {
  int lo[A];
  int hi[A];
  CTG_HOST_DEVICE std::int64_t count() const {
    std::int64_t n = 1;
    for (int a = 0; a < A; ++a) n *= hi[a] > lo[a] ? std::int64_t(hi[a] - lo[a]) : 0;
    return n;
  }
  // The offload-level indices of iteration `it` (row-major, last axis fastest).
  CTG_HOST_DEVICE void indices_of(std::int64_t it, int* index) const {
    for (int a = A - 1; a >= 0; --a) {
      std::int64_t const n = hi[a] - lo[a];
      index[a] = lo[a] + int(it % n);
      it /= n;
    }
  }
  // Sets them in the frame.
  template <class Fr>
  CTG_HOST_DEVICE void set(Fr& f, std::int64_t it) const {
    if constexpr (A == 1)
      f.idx[0][0] = lo[0] + int(it);
    else
      indices_of(it, f.idx[0]);
  }
  // Calls visit(index, it) for iterations [b, e) in the order of set, with
  // `index` their offload-level indices. The last axis is the inner loop's
  // own induction variable and the others move once per row: set divides
  // once per axis and iteration, this once per chunk, and the inner loop
  // is one the compiler can vectorise, as a 1-D offload's.
  template <class Visit>
  CTG_HOST_DEVICE void for_each(std::int64_t b, std::int64_t e, Visit&& visit) const {
    if (b >= e) return;
    int index[A];
    indices_of(b, index);
    for (std::int64_t it = b;;) {
      int const first = index[A - 1];
      std::int64_t const row_rest = hi[A - 1] - first;
      int const last = int(first + (row_rest < e - it ? row_rest : e - it));
      for (int j = first; j < last; ++j) {
        index[A - 1] = j;
        visit(index, it + (j - first));
      }
      it += last - first;
      if (it >= e) return;
      index[A - 1] = lo[A - 1];
      for (int a = A - 2; a >= 0 && ++index[a] == hi[a]; --a) index[a] = lo[a];
    }
  }
};

// A bound argument that holds one block of a decomposed field (ctgrad/mpi)
// keeps the first axis of a parallel offload to the rows this process owns.
// Every backend applies it to the box its loop bounds gave, before the
// adstack is sized or anything runs.
template <class V>
void narrow_first_axis(V const& v, int& lo, int& hi) {
  if constexpr (requires { v.narrow(lo, hi); }) v.narrow(lo, hi);
}
template <int A, class Args>
void narrow_to_owned(loop_box<A>& box, Args const& args) {
  ::ctg::detail::apply([&](auto const&... v) { (narrow_first_axis(v, box.lo[0], box.hi[0]), ...); }, args);
}

// The adstack bytes one thread of an offload needs, sized from its loop
// bounds evaluated on the host with `readable` arguments (a device backend
// passes host mirrors of its integer fields) and, for a parallel offload, its
// box. `site` receives a loop whose adstack no launch can size. Every
// backend sizes its adstacks here.
template <class Plan, class Body, class Args, int A = 1>
long long adstack_bytes(Body const& body, Args const& readable, long long iterations, int& site,
                        loop_box<A> const* box = nullptr) {
  if constexpr (!Plan::uses_stack) {
    (void)body, (void)readable, (void)iterations, (void)site, (void)box;
    return 0;
  } else {
    ad::bound_env<Plan::shape::levels, Plan::shape::axes> env{};
    if (box)
      for (int a = 0; a < A; ++a) env.idx[0][a] = {box->lo[a], box->hi[a] - 1, true};
    return Plan::stack_bytes(body, readable, env, iterations, site);
  }
}

// Records an adstack overflow: the first overflowing loop site, and the most
// bytes any thread needed.
CTG_HOST_DEVICE void report_overflow(eval::launch_status* s, int site, long long required, long long available) {
  if (eval::claim_failure(s, eval::failure::adstack_overflow)) {
    s->site = site;
    s->available = available;
  }
#if CTG_DEVICE_PASS
  atomicMax(reinterpret_cast<unsigned long long*>(&s->required), (unsigned long long)required);
#else
  std::atomic_ref<long long> r(s->required);
  long long cur = r.load();
  while (cur < required && !r.compare_exchange_weak(cur, required)) {
  }
#endif
}

// A pass whose frame is prepared by its own construction and whose iteration
// is one evaluator call: the forward pass and forward mode.
template <template <class, class, int, int, bool> class Frame, class Evaluator>
struct stateless_pass {
  template <class Args, class Offload, int Slots>
  struct plan {
    using shape = eval::loop_shape<Offload>;
    using locals = typename eval::slot_storage<typename ir::offload_traits<Offload>::root, Slots>::type;
    template <bool Parallel>
    using frame = Frame<Args, locals, shape::levels, shape::axes, Parallel>;
    static constexpr bool uses_stack = false;
    static constexpr bool banded = false;  // no field whose accumulations depend on the chunk margin
    using gather = ad::no_stencil_gather;  // no adjoint to run as a gather
    static constexpr bool gathers = false;
    // Whether field parameter I's scattered accumulations may go to private
    // per-thread copies of `private_buffer` (cpu::run_offload).
    template <int I>
    static constexpr bool privatizable = false;
    static constexpr ir::buffer private_buffer = ir::buffer::primal;
    template <class Fr>
    CTG_HOST_DEVICE static void prepare(Fr&, std::uint32_t*, long long, long long) {}
    template <class Body, class Fr>
    CTG_HOST_DEVICE static void iteration(Body const& body, Fr& f) {
      Evaluator::run_body(body, f);
    }
    // After a thread's last iteration.
    template <class Fr>
    CTG_HOST_DEVICE static void finish(Fr&) {}
  };
};

struct forward_body {
  template <class Body, class Fr>
  CTG_HOST_DEVICE static void run_body(Body const& body, Fr& f) {
    eval::forward::eval(body, f);
  }
};

// The forward pass: in parallel offloads, accumulations into a fixed element
// go to per-thread partial sums when nothing else touches that field
// (eval/reduction.hpp), added to the element in `finish`.
struct forward_pass {
  template <class Args, class Offload, int Slots>
  struct plan : stateless_pass<eval::frame, forward_body>::plan<Args, Offload, Slots> {
    using base = stateless_pass<eval::frame, forward_body>::plan<Args, Offload, Slots>;
    // A 1-D chunk runs its interior apart, where every index guard holds
    // (cpu::run_chunk; no other pass declares this).
    static constexpr bool splits_at_index_guards = true;
    using dests = eval::privatized_t<typename ir::offload_traits<Offload>::root>;
    // Fields every iteration touches only at its own elements (the proof the
    // reverse pass uses for plain gradient adds): their += and -= need no
    // atomics.
    using parts = ir::offload_traits<Offload>;
    using ownership = ad::slot_ownership<ir::body_name_t<Offload>, parts::axes, parts::parallel>;
    static constexpr bool banded = ownership::template any_banded<int(Args::size)>;
    // A 1-D chunk steps several iterations together where the body carries
    // a value through a nested loop (eval/interleave.hpp; no other pass
    // declares this).
    static constexpr bool interleaves_iterations =
        parts::parallel && parts::axes == 1 && !banded && eval::interleaves_v<typename parts::body>;
    template <class Body, class Fr, int W>
    static void interleaved_iteration(Body const& body, Fr (&lanes)[W]) {
      eval::interleaved<W>::eval(body, lanes);
    }
    // Values only added into (a scatter through an index field): per-thread
    // copies, unless the field is a fixed-element reduction, whose partial
    // sums are in the frame already.
    template <int I>
    static constexpr bool privatizable = [] {
      if constexpr (!ownership::template only_accumulated<I>)
        return false;
      else
        return ![]<class... L>(detail::type_list<L...>*) {
          return ((L::op_type::param == I) || ...);
        }(static_cast<dests*>(nullptr));
    }();
    static constexpr ir::buffer private_buffer = ir::buffer::primal;
    template <bool Parallel>
    using frame = eval::owning_frame<std::conditional_t<Parallel && dests::size != 0,
                                                        eval::reduction_frame<typename base::template frame<true>, dests>,
                                                        typename base::template frame<Parallel>>,
                                     ownership>;
    template <class Fr>
    CTG_HOST_DEVICE static void prepare(Fr& f, std::uint32_t*, long long, long long) {
      if constexpr (requires { f.partials; }) {
        zero_partials(f.partials);
        for (bool& u : f.used) u = false;
      }
    }
    template <class Fr>
    CTG_HOST_DEVICE static void finish(Fr& f) {
      eval::forward::flush_partials(f);
    }

   private:
    template <class... T>
    CTG_HOST_DEVICE static void zero_partials(detail::tuple<T...>& partials) {
      [&]<std::size_t... Is>(std::index_sequence<Is...>) {
        ((detail::get<Is>(partials) = zero_of<T>()), ...);
      }(std::index_sequence_for<T...>{});
    }
  };
};
struct tangent_pass : stateless_pass<ad::tangent_frame, ad::tangent> {};

// The adjoint; WithPrimal: it also writes the values the forward pass
// writes (value_and_gradient_pass, ad/fusion.hpp).
template <bool WithPrimal>
struct adjoint_pass {
  static constexpr bool runs_adjoint = true;
  template <class Args, class Offload, int Slots>
  struct plan : ad::reverse_plan<Args, Offload, Slots, WithPrimal> {
    using base = ad::reverse_plan<Args, Offload, Slots, WithPrimal>;
    static constexpr bool uses_stack = base::demand.uses_stack;
    // The stencil adjoint as a gather (ad/gather.hpp), looked for only where
    // the plain pass adds into elements iterations share (a banded field).
    using gather = std::conditional_t<!WithPrimal && base::parts::parallel && base::banded,
                                      ad::stencil_gather<typename base::analysis, typename base::policy,
                                                         typename base::body_name, base::parts::axes>,
                                      ad::no_stencil_gather>;
    static constexpr bool gathers = gather::eligible;
    using gather_frame = ad::gather_frame<typename base::template frame<true>>;
    // `stack`: the thread's first adstack word; `stride`: words between its
    // consecutive words; `capacity`: the thread's bytes (a multiple of 4).
    template <class Fr>
    CTG_HOST_DEVICE static void prepare(Fr& f, std::uint32_t* stack, long long stride, long long capacity) {
      if constexpr (requires { f.primal_partials; }) {
        ad::zero_all(f.primal_partials);
        for (bool& u : f.primal_used) u = false;
      }
      restart(f, stack, stride, capacity);
    }
    // Also after an overflow, which leaves the iteration's adjoints half done.
    template <class Fr>
    CTG_HOST_DEVICE static void restart(Fr& f, std::uint32_t* stack, long long stride, long long capacity) {
      ad::zero_all(f.adj);
      f.reached = 0;
      base::evaluator::load_seeds(f);
      f.stack = ad::adstack{stack, stride, capacity / 4, 0, 0, -1};
    }
    template <class Fr>
    CTG_HOST_DEVICE static void finish(Fr& f) {
      if constexpr (requires { f.primal_partials; }) eval::forward::flush_sums(f, f.primal_partials, f.primal_used);
    }
    template <class Body, class Fr>
    CTG_HOST_DEVICE static void iteration(Body const& body, Fr& f) {
      base::evaluator::run_body(body, f);
      if (f.stack.overflowed()) restart_after_overflow(f);
    }
    // Reports the frame's overflow, if it had one, and starts it afresh.
    template <class Fr>
    CTG_HOST_DEVICE static void restart_after_overflow(Fr& f) {
      if (f.stack.overflowed())
        report_overflow(f.status, f.stack.overflow_site, 4 * f.stack.high, 4 * f.stack.capacity);
      restart(f, f.stack.base, f.stack.stride, 4 * f.stack.capacity);
    }
    // Several iterations in step on the host (ad/interleave.hpp), each frame
    // with its own adstack.
    static constexpr bool interleaves_iterations = ad::reverse_interleaves_v<base, int(Args::size)>;
    // An overflow in one lane leaves the others' sweeps undone: every lane
    // starts afresh (the launch reports the overflow).
    template <class Body, class Fr, int W>
    static void interleaved_iteration(Body const& body, Fr (&lanes)[W]) {
      ad::interleaved_reverse<typename base::evaluator, W>::run_body(body, lanes);
      bool overflowed = false;
      for (auto& f : lanes) overflowed = overflowed || f.stack.overflowed();
      if (overflowed)
        for (auto& f : lanes) restart_after_overflow(f);
    }
    // Bytes of adstack one thread needs (host side; reads the fields loop
    // bounds depend on). Sets `unsized` to the loop site no launch can bound.
    template <class Body, class Env>
    static long long stack_bytes(Body const& body, Args const& args, Env const& env, long long iterations,
                                 int& unsized) {
      if constexpr (!uses_stack) {
        return 0;
      } else {
        typename base::capacity walk{{&args}, iterations};
        walk.visit(body, env);
        unsized = walk.unsized_site;
        return walk.bytes;
      }
    }
  };
};
using reverse_pass = adjoint_pass<false>;
using value_and_gradient_pass = adjoint_pass<true>;

// Whether a pass runs a kernel's offloads last to first.
template <class Pass>
inline constexpr bool runs_adjoint_v = requires { Pass::runs_adjoint; };

}  // namespace ctg::backend
