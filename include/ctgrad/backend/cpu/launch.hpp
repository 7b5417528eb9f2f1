// Runs offloads on the host: a parallel offload over the thread pool, a serial
// offload on the calling thread.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../plan.hpp"
#include "thread_pool.hpp"
#include "../../lower/vocabulary.hpp"

// clang reports a loop marked CTG_INDEPENDENT_ITERATIONS that it still does
// not vectorise (a body with a call it cannot inline, say) as a warning,
// -Wpass-failed: the mark states a fact about memory, not a demand. Without
// debug information the warning names the function the loop ends up in
// once inlined, which may be any function of this file that runs a chunk.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace ctg::cpu {

CTG_IMPL_IR_VOCABULARY;


// The iterations of [first, last) of a 1-D offload where every index guard
// of its body holds (eval/index_guards.hpp): an interval, evaluated on any
// frame of the launch since the guards' bounds are fixed for it.
template <class Body, class Fr>
std::pair<int, int> guarded_range(Body const& body, Fr& f, int first, int last) {
  long long lo = first, hi = last;
  eval::narrow_to_index_guards(body, f, lo, hi);
  int const inner_lo = int(std::clamp<long long>(lo, first, last));
  return {inner_lo, int(std::clamp<long long>(hi, inner_lo, last))};
}

// Where the vectorised interior of a 1-D loop over [lo, hi) starts: lo
// rounded up to a multiple of `aligned_run` indices (or hi), the iterations
// before it running on the checked path. Host buffers start on
// memory::host_alignment (64 bytes), and so does every row of a field whose
// rows are a multiple of 64 bytes long, so the interior's loads and stores
// of element i of such rows are whole aligned vectors of up to 64 bytes of
// 4-byte elements. Starting at the guard's edge instead (i = 1 for
// `i > 0`), every 64-byte store straddles two cache lines: the wave's
// gathering adjoint ran 2.7 times slower with 512-bit vectors
// (`-march=native` on an AMD EPYC, docs/05).
inline constexpr int aligned_run = int(memory::host_alignment / 4);
inline int aligned_start(int lo, int hi) {
  int const up = lo >= 0 ? (lo + aligned_run - 1) / aligned_run * aligned_run : lo;
  return std::min(up, hi);
}

// How the chunk function receives a body. By value, the body is the
// function's own copy, which no store to a field can change, so its literals
// stay in registers: taken by reference, the MPM grid update's adjoint ran
// 1.13 times slower. A body holding a matrix literal is passed by its
// address: by value, the MPM step's P2G adjoint ran 1.4 times slower
// (docs/05, *Matrix literals as coefficients*).
template <class Body>
auto chunk_body(Body const& body) {
  if constexpr (ir::holds_matrix_literal_v<Body>)
    return &body;
  else
    return body;
}
template <class Body>
Body const& ir_of(Body const& body) {
  return body;
}
template <class Body>
Body const& ir_of(Body const* body) {
  return *body;
}

// The frames below are value-initialised once per chunk: the adjoint
// restores a local from the site slot of an assignment only in the branch
// that saved it, which GCC cannot follow (-Wmaybe-uninitialized on every
// kernel with a let inside an if_ arm). {} leaves matrices unset (Eigen's
// default constructor), and GCC at -O1 still warns on the frame where an arm
// reassigns a matrix local whole; valgrind sees no unset read
// (tests/lowering/locals_in_branches.cpp). Zeroing matrix slots too made the
// MPM benchmark's chunks 10 % slower, so the warning is off for these lines.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Iterations [b, e) of one offload on the calling thread. Everything below is
// inlined into this one function (see CTG_FLATTEN), but for the cut levels of
// a tall expression (ir::evaluated_apart_v). The frame is a local of this
// function, not a reference from outside, so the compiler can tell that
// stores to fields never modify it and keep its values in registers.
// `margin`: iterations within it of the chunk's edges accumulate atomically
// into banded fields (ad::slot_ownership), the others with plain adds.
// `private_params`: the fields whose buffer in `args` is this thread's
// private copy (private_scatter below).
// `lanes_fit`: the adstack holds interleaved_lanes iterations' snapshots
// side by side (prepared_offload), so that iterations may interleave.
// `passed`: the body (the IR, which holds the literals' values), as
// chunk_body passes it.
template <class Plan, int A, class Passed, class Args>
CTG_FLATTEN void run_chunk(backend::loop_box<A> const box, Passed const passed, Args const& args,
                           eval::launch_status& status, std::uint32_t* stack, long long capacity, bool concurrent,
                           long long margin, unsigned long long private_params, bool lanes_fit, std::int64_t b,
                           std::int64_t e) {
  Args const local_args = args;  // a copy of the field views, for the same reason
  auto const& body = ir_of(passed);
  using Body = std::remove_cvref_t<decltype(body)>;
  using frame_type = typename Plan::template frame<true>;
  // The forward pass splits a 1-D chunk at its index guards (eval/
  // index_guards.hpp): the interior runs on a frame type that knows them
  // true. Only where the body has guards, so that no other kernel
  // instantiates its body twice.
  constexpr bool split = [] {
    if constexpr (requires { Plan::splits_at_index_guards; })
      return Plan::splits_at_index_guards && eval::splits_at_guards_v<A, Body>;
    else
      return false;
  }();
  // The forward pass steps several iterations together where the body
  // carries a value through a nested loop (eval/interleave.hpp).
  constexpr bool interleave = [] {
    if constexpr (requires { Plan::interleaves_iterations; })
      return A == 1 && Plan::interleaves_iterations;
    else
      return false;
  }();
  // Value-initialised once per chunk (see above run_chunk).
  std::conditional_t<split, eval::interior_frame<frame_type>, frame_type> interior{};
  frame_type& f = interior;
  // `stride` and `bytes`: the frame's share of the adstack.
  auto const prepare = [&](auto& frame, std::uint32_t* first_word, long long stride, long long bytes) {
    frame.args = &local_args;
    frame.status = &status;
    frame.concurrent = concurrent;
    frame.private_params = private_params;
    Plan::prepare(frame, first_word, stride, bytes);
  };
  prepare(f, stack, 1, capacity);
  if constexpr (A == 1) {
    // The loop index itself as the induction variable: an index computed
    // from the iteration number (int(it), which may wrap) is not affine to
    // the compiler, which then vectorises nothing.
    int const first = box.lo[0] + int(b), last = box.lo[0] + int(e);
    auto const run = [&](auto& frame, int from, int to) {
      int i = from;
      if constexpr (interleave) {
        constexpr int lanes = eval::interleaved_lanes;
        if (lanes_fit && to - from >= lanes) {
          // Prepared as `frame` was, not copied from it: its locals may
          // hold nothing yet. The thread's adstack holds `lanes` times an
          // iteration's (prepared_offload), its words interleaved.
          std::remove_reference_t<decltype(frame)> lane_frames[lanes]{};
          for (int k = 0; k < lanes; ++k) prepare(lane_frames[k], stack ? stack + k : stack, lanes, capacity / lanes / 4 * 4);
          for (; i + lanes <= to; i += lanes) {
            for (int k = 0; k < lanes; ++k) lane_frames[k].idx[0][0] = i + k;
            Plan::interleaved_iteration(body, lane_frames);
          }
        }
      }
      for (; i < to; ++i) {
        frame.idx[0][0] = i;
        if constexpr (Plan::banded) frame.near_chunk_edge = i - first < margin || last - i <= margin;
        Plan::iteration(body, frame);
      }
    };
    if constexpr (split) {
      auto const [guard_lo, inner_hi] = guarded_range(body, f, first, last);
      int const inner_lo = aligned_start(guard_lo, inner_hi);
      run(f, first, inner_lo);
      run(interior, inner_lo, inner_hi);
      run(f, inner_hi, last);
    } else {
      run(f, first, last);
    }
  } else {
    box.for_each(b, e, [&](int const(&index)[A], std::int64_t it) {
      for (int a = 0; a < A; ++a) f.idx[0][a] = index[a];
      if constexpr (Plan::banded) f.near_chunk_edge = it - b < margin || e - it <= margin;
      Plan::iteration(body, f);
    });
  }
  Plan::finish(f);
}
// The gather adjoint's sweeps (ad/gather.hpp) over positions [b, e) of
// `over`: the elements of `reach` (each replays the iterations of `box` that
// read it), or, Clearing, the iterations of `box` (each clears the seeds
// its stores wrote). Every element and seed has one writer: no add is
// atomic, whatever the threads.
template <class Plan, bool Clearing, int A, class Body, class Args>
CTG_FLATTEN void run_gather_chunk(backend::loop_box<A> const box, backend::loop_box<A> const over,
                                  backend::loop_box<A> const interior, Body const body, Args const& args,
                                  eval::launch_status& status, std::int64_t b, std::int64_t e) {
  Args const local_args = args;  // as in run_chunk
  using frame_type = typename Plan::gather_frame;
  // `interior` holds the elements whose replays all lie in the box (no box
  // tests) and, for a 1-D body with index guards, where every guard holds
  // in each replay (prepared_offload::inner): they run on a frame type that
  // knows the guards true (eval/index_guards.hpp), as run_chunk's interior.
  constexpr bool split = !Clearing && eval::splits_at_guards_v<A, Body>;
  std::conditional_t<split, eval::interior_frame<frame_type>, frame_type> inside{};
  frame_type& f = inside;
  f.args = &local_args;
  f.status = &status;
  f.concurrent = false;
  Plan::prepare(f, nullptr, 1, 0);
  auto visit = [&]<bool Checked>(auto& frame, std::bool_constant<Checked>) {
    if constexpr (Clearing)
      Plan::gather::clear_iteration(body, frame);
    else
      Plan::gather::template gather_element<Checked>(body, frame, box);
  };
  if constexpr (A == 1) {
    int const first = over.lo[0] + int(b), last = over.lo[0] + int(e);
    int const interior_lo = Clearing ? last : std::clamp(interior.lo[0], first, last);
    int const inner_hi = Clearing ? last : std::clamp(interior.hi[0], interior_lo, last);
    int const inner_lo = aligned_start(interior_lo, inner_hi);
    for (int j = first; j < inner_lo; ++j) f.idx[0][0] = j, visit(f, std::true_type{});
    // Independent: element j's replays add only into element j of each
    // gathered field, and read seeds (apart from those elements, checked by
    // gather::prepare) and values, which the sweep does not write. Each
    // element runs on its own copy of the prepared frame, so that no state
    // passes from one element to the next through memory either (the copy
    // lives in registers once the loop is inlined). So the loop vectorises.
    CTG_INDEPENDENT_ITERATIONS
    for (int j = inner_lo; j < inner_hi; ++j) {
      auto element = inside;
      element.idx[0][0] = j;
      visit(element, std::false_type{});
    }
    for (int j = inner_hi; j < last; ++j) f.idx[0][0] = j, visit(f, std::true_type{});
  } else {
    over.for_each(b, e, [&](int const(&index)[A], std::int64_t) {
      for (int a = 0; a < A; ++a) f.idx[0][a] = index[a];  // each element: a replay moves them
      visit(f, std::true_type{});
    });
  }
  Plan::finish(f);
}

template <class Plan, class Body, class Args>
CTG_FLATTEN void run_serial(Body const& body, Args const& args, eval::launch_status& status, std::uint32_t* stack,
                            long long capacity) {
  Args const local_args = args;
  typename Plan::template frame<false> f{};  // zeroed, as in run_chunk
  f.args = &local_args;
  f.status = &status;
  Plan::prepare(f, stack, 1, capacity);
  Plan::iteration(body, f);
  Plan::finish(f);
}
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic pop
#endif

// One parallel offload made ready to run on the host in one pass: its loop's
// bounds evaluated, its box narrowed, its adstack sized. Every host order of
// running it (the thread pool's chunks here, the race checker's orders in
// backend/race) starts from this one description. `iterations` is
// adstack_capacity<N> (or -1).
// Named: the offload, or the short name its launch gives it
// (ir::keyed_offload), under which its plan is instantiated.
template <class Pass, int Slots, class Args, class Named>
struct prepared_offload {
  using plan = typename Pass::template plan<Args, Named, Slots>;
  using traits = ir::offload_traits<Named>;
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
  bool lanes_fit = false;  // iterations may interleave (run_chunk), their adstacks side by side
  // The most adstack bytes one iteration may need for iterations to
  // interleave.
  static constexpr long long interleaved_stack_limit = 1 << 20;
  // The gather adjoint (ad/gather.hpp): whether this launch runs it, the
  // taps' shifts and the box of elements they reach.
  bool gather = false;
  typename plan::gather::shifts shifts{};
  backend::loop_box<axes> reach{};
  backend::loop_box<axes> inner{};  // elements whose replays all lie in the box

  prepared_offload(ir::named_t<Named> const& o, Args const& a, eval::launch_status& st, long long iterations)
      : args(a), status(st), body(traits::body_of(o)) {
    auto const& loop = traits::loop_of(o);
    typename plan::template frame<false> host;
    host.args = &args;
    host.status = &status;
    eval::forward::bounds(loop, host, box.lo, box.hi);
    backend::narrow_to_owned(box, args);
    capacity = backend::adstack_bytes<plan>(body, args, iterations, unsized_site, &box);
    // A chunk that interleaves iterations gives each of them a share of its
    // thread's adstack (run_chunk), unless an iteration alone needs so much
    // that a thread's memory would be mostly snapshots.
    if constexpr (requires { plan::interleaves_iterations; }) {
      if constexpr (plan::interleaves_iterations) {
        lanes_fit = capacity <= interleaved_stack_limit;
        if (lanes_fit) capacity *= eval::interleaved_lanes;
      }
    }
    if constexpr (plan::banded) margin = plan::ownership::template chunk_margin<params>(body, host, box.lo, box.hi);
    if constexpr (plan::gathers) {
      gather = unsized_site < 0 && plan::gather::prepare(body, host, shifts);
      if (gather) {
        reach = plan::gather::reach(box, shifts);
        inner = plan::gather::interior(guarded_box(host), shifts);
        // Shifts wider than the box would sweep mostly empty elements.
        gather = reach.count() <= 2 * box.count() + 64;
      }
    }
  }
  // The iterations of the box where every index guard of a 1-D body holds
  // (the box itself when it has none): the bounds are fixed for the launch.
  template <class Fr>
  backend::loop_box<axes> guarded_box(Fr& host) const {
    backend::loop_box<axes> r = box;
    if constexpr (eval::splits_at_guards_v<axes, body_type>)
      std::tie(r.lo[0], r.hi[0]) = guarded_range(body, host, box.lo[0], box.hi[0]);
    return r;
  }
  std::int64_t count() const { return box.count(); }
  // Iterations [b, e) on the calling thread; `concurrent`: other threads run
  // other iterations at the same time (accumulations must be atomic).
  void run(std::int64_t b, std::int64_t e, bool concurrent, std::uint32_t* stack) const {
    run_chunk<plan>(box, chunk_body(body), args, status, stack, capacity, concurrent, margin, 0, lanes_fit, b, e);
  }
  // The gather adjoint's sweeps: elements [b, e) of `reach`, then, once
  // every element is done, iterations [b, e) of the box clearing seeds.
  void run_gather(std::int64_t b, std::int64_t e) const {
    run_gather_chunk<plan, false>(box, reach, inner, body, args, status, b, e);
  }
  void run_clear(std::int64_t b, std::int64_t e) const {
    run_gather_chunk<plan, true>(box, box, box, body, args, status, b, e);
  }
  // The same on other views of the arguments: those of private_scatter.
  void run(Args const& views, unsigned long long private_params, std::int64_t b, std::int64_t e, bool concurrent,
           std::uint32_t* stack) const {
    run_chunk<plan>(box, chunk_body(body), views, status, stack, capacity, concurrent, margin, private_params,
                    lanes_fit, b, e);
  }
};

// ---- scatters through per-thread copies ------------------------------------------------
// A field that an offload only adds into (forward pass) or only reads (its
// gradient, in the reverse pass), and that no iteration owns (a scatter
// through an index field: springs into masses, particles into a grid), needs
// atomic adds as soon as two threads run, and two threads then run slower
// than one. Instead each thread adds into a zeroed private copy of the
// buffer, and the copies are summed into it after the loop. That pays when
// the copies together hold at most four elements per iteration (each is
// cleared and summed once, a few cycles an element, where an atomic add is
// tens) and fit in 256 MiB, and the field is not passed a second time (the
// other parameter would see the field, not the copy); otherwise the adds
// stay atomic. Contiguous views only: the copy is addressed with the view's
// own offsets. The copies live in scratch memory of the launching thread
// (scatter_scratch), kept from one launch to the next, so that a launch
// allocates nothing once the largest has run.
template <class V>
constexpr bool contiguous_view() {
  if constexpr (requires(V& v) {
                  typename V::value_type;
                  v.data;
                  v.grad;
                  v.size();
                } && !requires(V const& v, int& lo, int& hi) { v.narrow(lo, hi); }) {
    return [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      return std::is_same_v<decltype(std::declval<V const&>().offset((void(Ks), 0)...)), std::int64_t>;
    }(std::make_index_sequence<std::size_t(V::rank)>{});
  } else {
    return false;
  }
}

// The launching thread's scratch memory for the copies, one block for every
// kernel (a launch takes copies only when it runs on the pool, and nested
// launches run inline, so no two launches of one thread hold it at once).
struct scatter_scratch {
  struct release_aligned {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<unsigned char[], release_aligned> memory;
  std::int64_t bytes = 0;
  std::vector<char> used;  // [thread]: ran a chunk (its copies are cleared)

  static scatter_scratch& of_this_thread() {
    static thread_local scatter_scratch s;
    return s;
  }
  unsigned char* reserve(std::int64_t n) {
    if (bytes < n) {
      memory.reset(static_cast<unsigned char*>(::operator new[](std::size_t(n), std::align_val_t{64})));
      bytes = n;
    }
    return memory.get();
  }
};

template <class Plan, class Args>
class private_scatter {
 public:
  static constexpr int params = int(Args::size);
  static constexpr bool grad_buffer = Plan::private_buffer == ir::buffer::grad;
  template <int I>
  static constexpr bool candidate = [] {
    using V = detail::tuple_element_t<std::size_t(I), Args>;
    if constexpr (I >= 64 || !Plan::template privatizable<I> || !contiguous_view<V>())
      return false;
    else
      return !grad_buffer || V::has_grad;
  }();
  static constexpr bool any = []<int... Is>(std::integer_sequence<int, Is...>) {
    return (candidate<Is> || ...);
  }(std::make_integer_sequence<int, params>{});

  static constexpr std::int64_t budget_bytes = std::int64_t(256) << 20;

  // Decides which candidates take copies for a launch of `iterations` on
  // `threads` threads.
  private_scatter(Args const& args, std::int64_t iterations, int threads) : threads_(threads) {
    std::int64_t bytes = 0, elements = 0;
    [&]<int... Is>(std::integer_sequence<int, Is...>) { (choose<Is>(args, iterations, bytes, elements), ...); }(
        std::make_integer_sequence<int, params>{});
    if (active_ == 0) return;
    scatter_scratch& mine = scatter_scratch::of_this_thread();
    base_ = mine.reserve(bytes);
    if (mine.used.size() < std::size_t(threads)) mine.used.resize(std::size_t(threads));
    std::fill(mine.used.begin(), mine.used.begin() + threads, char(0));
    used_ = mine.used.data();
  }
  unsigned long long active() const { return active_; }

  // The arguments as thread `t` sees them: its copies in place of the
  // buffers, cleared the first time it asks.
  Args views_for(Args const& args, int t) {
    Args views = args;
    bool const first = !used_[t];
    used_[t] = 1;
    [&]<int... Is>(std::integer_sequence<int, Is...>) { (point<Is>(views, t, first), ...); }(
        std::make_integer_sequence<int, params>{});
    return views;
  }

  // Adds the copies of the threads that ran into the fields' buffers.
  template <class Pool>
  void sum_into(Args const& args, Pool& pool) const {
    [&]<int... Is>(std::integer_sequence<int, Is...>) { (sum<Is>(args, pool), ...); }(
        std::make_integer_sequence<int, params>{});
  }

 private:
  template <int I>
  using value_t = typename detail::tuple_element_t<std::size_t(I), Args>::value_type;

  // Byte ranges of every buffer of parameter J (none for arguments that
  // are not views), to keep a field passed twice from being copied: the
  // other parameter would read or add into the buffer, not the copy.
  template <int J>
  static bool overlaps(Args const& args, unsigned char const* lo, unsigned char const* hi) {
    auto const& v = detail::get<J>(args);
    using V = std::remove_cvref_t<decltype(v)>;
    if constexpr (requires { v.data; v.grad; v.dual; v.size(); }) {
      std::int64_t const span = std::int64_t(v.size()) * std::int64_t(sizeof(typename V::value_type));
      auto meets = [&](auto const& pointer) {  // a raw pointer, or a strided one that converts to it
        auto const* b = reinterpret_cast<unsigned char const*>(static_cast<typename V::value_type const*>(pointer));
        if (!b) return false;
        // A view that is not contiguous spans an unknown range: its start decides.
        return contiguous_view<V>() ? (b < hi && lo < b + span) : (b >= lo && b < hi);
      };
      return meets(v.data) || meets(v.grad) || meets(v.dual);
    } else {
      return false;
    }
  }

  template <int I>
  void choose(Args const& args, std::int64_t iterations, std::int64_t& bytes, std::int64_t& elements) {
    if constexpr (candidate<I>) {
      std::int64_t const n = detail::get<I>(args).size();
      std::int64_t const need = n * threads_ * std::int64_t(sizeof(value_t<I>));
      if (n <= 0 || (elements + n) * threads_ > 4 * iterations || bytes + need > budget_bytes) return;
      auto const* target = reinterpret_cast<unsigned char const*>(grad_buffer ? detail::get<I>(args).grad
                                                                               : detail::get<I>(args).data);
      unsigned char const* const end = target + n * std::int64_t(sizeof(value_t<I>));
      bool const shared = [&]<int... Js>(std::integer_sequence<int, Js...>) {
        return ((Js != I && overlaps<Js>(args, target, end)) || ...);
      }(std::make_integer_sequence<int, params>{});
      if (shared) return;
      offset_[I] = bytes;
      bytes += (need + 63) / 64 * 64;
      elements += n;
      active_ |= 1ull << I;
      elements_[I] = n;
    }
  }
  // The copies start at -0: adding it leaves every value as it is, -0 included.
  template <class T>
  static T negative_zero() {
    if constexpr (requires { T::Constant(typename T::Scalar(0)); }) {
      using S = typename T::Scalar;
      if constexpr (std::is_floating_point_v<S>)
        return T::Constant(-S(0));
      else
        return T::Zero();
    } else if constexpr (std::is_floating_point_v<T>) {
      return -T(0);
    } else {
      return T(0);
    }
  }
  template <int I>
  value_t<I>* copy_of(int t) const {
    return reinterpret_cast<value_t<I>*>(base_ + offset_[I]) + std::int64_t(t) * elements_[I];
  }
  template <int I>
  void point(Args& views, int t, bool first) {
    if constexpr (candidate<I>) {
      if (!(active_ >> I & 1)) return;
      value_t<I>* const mine = copy_of<I>(t);
      if (first) std::uninitialized_fill(mine, mine + elements_[I], negative_zero<value_t<I>>());
      if constexpr (grad_buffer)
        detail::get<I>(views).grad = mine;
      else
        detail::get<I>(views).data = mine;
    }
  }
  template <int I, class Pool>
  void sum(Args const& args, Pool& pool) const {
    if constexpr (candidate<I>) {
      if (!(active_ >> I & 1)) return;
      value_t<I>* const target = grad_buffer ? detail::get<I>(args).grad : detail::get<I>(args).data;
      pool.parallel_for(elements_[I], [&](std::int64_t b, std::int64_t e) {
        for (int t = 0; t < threads_; ++t) {
          if (!used_[t]) continue;
          value_t<I> const* const mine = copy_of<I>(t);
          for (std::int64_t k = b; k < e; ++k) target[k] = target[k] + mine[k];
        }
      });
    }
  }

  int threads_;
  unsigned long long active_ = 0;
  std::int64_t elements_[params > 0 ? params : 1] = {};
  std::int64_t offset_[params > 0 ? params : 1] = {};  // bytes into the scratch memory
  unsigned char* base_ = nullptr;
  char* used_ = nullptr;
};

// A chunk's adstack: memory its thread keeps from one launch to the next,
// grown when a launch needs more, so that launches after the largest
// allocate nothing. A launch that needs more than 64 MiB a thread gets memory
// of its own, freed after it. Nothing a chunk runs launches a kernel, so one
// block a thread is enough.
class chunk_stack {
 public:
  explicit chunk_stack(long long bytes) {
    if (bytes <= 0) return;
    std::size_t const words = std::size_t(bytes / 4);
    if (bytes > kept_limit) {
      own_.reset(new std::uint32_t[words]);
      data_ = own_.get();
      return;
    }
    kept_block& kept = kept_memory();
    if (kept.words < words) {
      kept.memory.reset(new std::uint32_t[words]);
      kept.words = words;
    }
    data_ = kept.memory.get();
  }
  std::uint32_t* get() const { return data_; }

 private:
  struct kept_block {
    std::unique_ptr<std::uint32_t[]> memory;
    std::size_t words = 0;
  };
  static kept_block& kept_memory() {
    static thread_local kept_block kept;
    return kept;
  }
  static constexpr long long kept_limit = 64ll << 20;
  std::unique_ptr<std::uint32_t[]> own_;
  std::uint32_t* data_ = nullptr;
};

// Runs one offload in one pass over the thread pool. `unsized` receives the
// site of a loop whose adstack no launch can size.
// Named: the offload or its short name (prepared_offload), which gives o's type.
template <class Pass, int Slots, class Named, class Args>
  requires(ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status,
                 long long iterations = -1, int* unsized = nullptr) {
  prepared_offload<Pass, Slots, Args, Named> const p(o, args, status, iterations);
  if (p.unsized_site >= 0) {
    if (unsized) *unsized = p.unsized_site;
    return;
  }
  auto& pool = thread_pool::instance();
  if constexpr (decltype(p)::plan::gathers) {
    if (p.gather) {
      std::int64_t const elements = p.reach.count(), iterations = p.count();
      std::int64_t const spread = elements - iterations, chunks = pool.chunk_count(elements);
      // Chunks at least as long as the spread: the ranges left at the
      // boundaries are then disjoint, and short.
      bool const fused = decltype(p)::axes == 1 && spread <= elements / chunks;
      if (fused) {
        // Iteration k's seeds are read by elements k + min shift ..
        // k + max shift, so a chunk of elements [b, e) (positions in the
        // reach, which starts min shift before the box) is their only
        // reader for the iterations at positions [b, e - spread) of the box:
        // it clears those once its elements are done. The `spread`
        // iterations before each boundary between chunks are read from both
        // sides and are cleared once every chunk is done. On one thread
        // that is one sweep, where the clearing used to be a second.
        auto clear = [&](std::int64_t b, std::int64_t e) {
          b = std::max<std::int64_t>(b, 0);
          e = std::min(e, iterations);
          if (b < e) p.run_clear(b, e);
        };
        pool.parallel_for(elements, [&](std::int64_t b, std::int64_t e) {
          p.run_gather(b, e);
          clear(b, e - spread);
        });
        for (std::int64_t k = 1; k < chunks; ++k) {
          std::int64_t const boundary = thread_pool::chunk_range(elements, chunks, k).first;
          clear(boundary - spread, boundary);
        }
      } else {
        pool.parallel_for(elements, [&](std::int64_t b, std::int64_t e) { p.run_gather(b, e); });
        pool.parallel_for(iterations, [&](std::int64_t b, std::int64_t e) { p.run_clear(b, e); });
      }
      return;
    }
  }
  // Alone on the calling thread, accumulations need no atomics.
  bool const concurrent = !pool.runs_on_caller(p.count());
  using scatter = private_scatter<typename decltype(p)::plan, Args>;
  if constexpr (scatter::any) {
    if (concurrent) {
      scatter copies(args, p.count(), pool.size());
      if (copies.active() != 0) {
        pool.parallel_for(p.count(), [&](std::int64_t b, std::int64_t e) {
          chunk_stack const stack(p.capacity);
          Args const views = copies.views_for(args, thread_pool::thread_index());
          p.run(views, copies.active(), b, e, concurrent, stack.get());
        });
        if (!status.failed) copies.sum_into(args, pool);
        return;
      }
    }
  }
  pool.parallel_for(p.count(), [&](std::int64_t b, std::int64_t e) {
    chunk_stack const stack(p.capacity);
    p.run(b, e, concurrent, stack.get());
  });
}

template <class Pass, int Slots, class Named, class Args>
  requires(!ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status,
                 long long iterations = -1, int* unsized = nullptr) {
  using plan = typename Pass::template plan<Args, Named, Slots>;
  int site = -1;
  long long const capacity = backend::adstack_bytes<plan>(o.body, args, iterations, site);
  if (site >= 0) {
    if (unsized) *unsized = site;
    return;
  }
  chunk_stack const stack(capacity);
  run_serial<plan>(o.body, args, status, stack.get(), capacity);
}

}  // namespace ctg::cpu

#if defined(__clang__)
#pragma clang diagnostic pop
#endif
