// ctg::tape: records the kernel launches made while it is alive and replays
// their adjoints in reverse order, giving each adjoint the field values it
// needs even when later launches overwrote them.
//
//   ctg::tape tape(loss);   // loss: a 0-d field with ctg::grad
//   for (int t = 0; t < steps; ++t) { kick(x, v, k); drift(x, v); }
//   measure(x, loss);
//   tape.backward();        // zeroes the recorded fields' gradients, seeds
//                           // loss.grad() = 1, runs the adjoints in reverse
//
// Every field buffer carries a version, bumped by each write (see
// detail::buffer_state in field.hpp). A recorded launch notes, for each field
// whose values its adjoint reads, the version it needs: the one the launch
// left, or, for a field the launch reads and then overwrites, the one it
// began with. When a later launch is about to overwrite a version that an
// earlier adjoint needs, the tape saves a copy of the field first (once per
// version; gradient buffers are never saved). backward() restores, before
// each adjoint, exactly the versions it needs, and leaves every field with
// its final forward values. A needed version that changed by anything the
// tape did not see (a host write, a launch under another tape) is an error at
// backward() (CTG-TAPE-003), never a wrong gradient. With ctg::tape_options
// {.strict = true} the tape refuses to save and raises CTG-TAPE-002 at the
// overwriting launch instead.
//
// Long rollouts (tape.rollout(steps, step, ctg::checkpoint{...}), see
// checkpoint.hpp): the tape learns from the launches' read and write sets
// which fields the steps carry (the state: written by a step, read by a
// step), keeps at most S copies of it at step boundaries instead of what
// every step's adjoints need, and backward() recomputes each step from the
// nearest copy, recording it, before running its adjoints (the binomial
// schedule). The same versions decide what to copy: a snapshot is one more
// holder of the versions the state had at its boundary, copied only when a
// launch is about to overwrite them.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/float_mode.hpp"
#include "checkpoint.hpp"
#include "config.hpp"
#include "detail/actions.hpp"
#include "errors.hpp"
#include "field.hpp"

namespace ctg {

struct keep_gradients_t {};
// ctg::tape t(loss, ctg::keep_gradients): backward() adds to the gradients
// already there instead of clearing them first.
inline constexpr keep_gradients_t keep_gradients{};

struct tape_options {
  // Add to the gradients already there (ctg::keep_gradients).
  bool keep_gradients = false;
  // Refuse to save overwritten values: a launch that would overwrite a
  // version an earlier adjoint needs raises CTG-TAPE-002.
  bool strict = false;
  // Digest the host fields each recorded launch leaves, and compare before
  // the next launch on them and before backward(): a write that bypassed
  // ctgrad (through data(), or into the memory under a view) raises
  // CTG-TAPE-014 instead of giving a wrong gradient. Two passes over each
  // field a launch uses; on with the index checks (CTG_HOST_WRITE_CHECKS).
  bool verify_contents = CTG_HOST_WRITE_CHECKS;
};

class tape;

namespace detail {
inline tape*& active_tape() {
  thread_local tape* current = nullptr;
  return current;
}

// One field buffer a launch uses, as the tape sees it.
struct launch_use {
  std::shared_ptr<field_storage> storage;
  int which = 0;       // primal, gradient or tangent buffer of the storage
  std::string name;    // the field's name (".grad" for a gradient buffer)
  int param = -1;      // kernel parameter position
  bool needed = false; // the adjoint reads its values
  bool before = false; // ... as they were when the launch began (it overwrites them)
  bool written = false;
  bool read = false;   // the forward launch reads its values (loads, accumulations)
  bool whole = false;  // it writes every element (a host fill or copy): what was there before is gone
};

// Adds a field argument's use to a launch's list. One function for every
// field type and kernel: inline, each kernel's list spelled out its own
// growth of the vector and copy of the name for every field argument.
// (Declared without inline: GCC warns at a noinline definition that
// follows an inline declaration.)
void add_launch_use(std::vector<launch_use>& uses, std::shared_ptr<field_storage> const& storage, int which,
                    std::string const& name, int param, bool needed, bool before, bool written, bool read);
#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE CTG_NOINLINE void add_launch_use(std::vector<launch_use>& uses,
                                                    std::shared_ptr<field_storage> const& storage, int which,
                                                    std::string const& name, int param, bool needed, bool before,
                                                    bool written, bool read) {
  uses.push_back({storage, which, name, param, needed, before, written, read});
}
#endif  // CTG_RUNTIME_DEFINITIONS

}  // namespace detail

class tape : private detail::host_write_observer {
 public:
  template <class T, flags F>
  explicit tape(field<T, 0, F> const& loss) : tape(loss, tape_options{}) {}
  template <class T, flags F>
  tape(field<T, 0, F> const& loss, keep_gradients_t) : tape(loss, tape_options{.keep_gradients = true}) {}
  template <class T, flags F>
  tape(field<T, 0, F> const& loss, tape_options opts) : opts_(opts) {
    static_assert(has_flag(F, flags::grad),
                  "CTG-TAPE-001 the loss of a ctg::tape needs a gradient buffer: declare it with ctg::grad");
    if (loss.empty()) throw autodiff_error("ctg::tape: the loss field is an empty handle");
    if (detail::active_tape() != nullptr)
      throw autodiff_error("ctg::tape: another tape is already recording on this thread; tapes do not nest");
    seed_ = [loss] { loss.grad().fill(T(1)); };
    note_gradient(loss);
    record_here(this);
  }

  // The loss must be a 0-d field with a gradient buffer.
  template <class T, int R, flags F>
    requires(R != 0 || !has_flag(F, flags::grad))
  explicit tape(field<T, R, F> const&) {
    static_assert(R == 0, "CTG-TAPE-001 the loss of a ctg::tape is a 0-d field (ctg::field<T, 0, ctg::grad>)");
    static_assert(has_flag(F, flags::grad),
                  "CTG-TAPE-001 the loss of a ctg::tape needs a gradient buffer: declare it with ctg::grad");
  }

  tape(tape const&) = delete;
  tape& operator=(tape const&) = delete;
  ~tape();

  // Replays the recorded adjoints, newest first; allowed once per tape. A
  // checkpointed rollout is reversed where it was recorded: each step is
  // recomputed from a snapshot, recorded, and its adjoints run. On an error
  // the fields still get their final forward values back.
  void backward();

  // Launches recorded with an adjoint (of a checkpointed rollout, those of
  // its last step: backward() records the others again one step at a time).
  std::size_t size() const;
  // Bytes of field values the tape copied (for the adjoints, the snapshots
  // of rollouts, and the final values backward() puts back).
  std::size_t bytes_saved() const { return bytes_saved_; }
  // The most bytes of copies alive at once.
  std::size_t peak_bytes_saved() const { return peak_bytes_; }

  // Names the launches recorded until the returned object goes away (a time
  // step, a phase); scopes nest: "step 3/collide".
  class scope_guard {
   public:
    scope_guard(scope_guard const&) = delete;
    scope_guard& operator=(scope_guard const&) = delete;
    ~scope_guard() { t_->scopes_.pop_back(); }

   private:
    friend class tape;
    explicit scope_guard(tape* t) : t_(t) {}
    tape* t_;
  };
  [[nodiscard]] scope_guard scope(std::string name);

  // One line per recorded launch: number, scope, kernel, the fields it reads
  // for its adjoint and writes, and the bytes saved before it ran; a
  // checkpointed rollout as its summary and schedule.
  std::string listing() const;

  // ---- long rollouts ------------------------------------------------------------------------------
  // Runs step(0) ... step(steps - 1), each one time step's launches. With a
  // budget (ctg::checkpoint{.snapshots = S} or {.bytes = B}) the tape keeps
  // at most S copies of the state the steps carry instead of what each
  // step's adjoints need, and backward() calls step(t) again to recompute
  // steps from those copies (the binomial schedule, checkpoint.hpp): the
  // step function is kept until backward(), and must make the same launches
  // on the same fields each time it runs step t. Without a budget, or with
  // S >= steps, every step is recorded as without a rollout.
  template <class Step>
  rollout_info const& rollout(int steps, Step&& step, checkpoint budget = {}) {
    check_rollout(steps, budget);
    auto run = std::make_unique<rollout_run>();
    run->id = int(rollouts_.size());
    run->info.steps = steps;
    run->step = std::function<void(int)>(std::forward<Step>(step));
    run->progress = std::move(budget.progress);
    rollouts_.push_back(std::move(run));
    rollout_run& r = *rollouts_.back();
    bool const everything = steps <= 1 || (budget.snapshots && *budget.snapshots >= steps) ||
                            (!budget.snapshots && !budget.bytes);
    if (everything)
      record_every_step(r);
    else
      run_checkpointed(r, budget);
    return r.info;
  }

  // Runs `check` at the start of backward(), before any gradient is touched:
  // steps recorded by components outside the core (ctgrad/mpi: collective
  // steps, which every rank must have recorded alike) verify there that the
  // adjoints may run; an exception stops backward() with the fields as the
  // forward pass left them.
  void before_backward(std::function<void()> check) { before_backward_.push_back(std::move(check)); }

  // ---- called by kernel launches; not for users ---------------------------------------------------
  // Before a launch runs: saves what it is about to overwrite that an earlier
  // adjoint (or its own, or a rollout's snapshot) needs. Returns the entry to
  // complete. `numbers`: a digest of the launch's plain-number and matrix
  // arguments, which a rollout's step must pass again when backward() runs
  // it again.
  std::size_t begin_launch(std::string_view kernel, std::vector<detail::launch_use> uses,
                           std::uint64_t numbers = 0);
  // After the launch ran (its written buffers bumped): the versions its
  // adjoint needs, and the adjoint itself (none for a launch that touches no
  // field with a gradient: its writes still matter to the others).
  void end_launch(std::size_t entry, std::vector<detail::launch_use> const& uses, detail::unique_action adjoint);
  // A launch argument: when it is a field with a gradient, backward() clears
  // that gradient first.
  template <class X>
  void note_gradient_of(X const& x) {
    if constexpr (is_field_v<X>) note_gradient(x);
  }
  template <class T, int R, flags F>
  void note_gradient(field<T, R, F> const& f) {
    if constexpr (has_flag(F, flags::grad)) {
      if (gradients_seen_.insert(f.storage().get()).second)
        zero_grads_.push_back([f](bool keep) { return f.zero_grad_for_backward(keep); });
    }
  }

 private:
  static constexpr std::uint64_t none = detail::buffer_state::none;
  static constexpr std::size_t no_entry = ~std::size_t(0);

  // A version of a buffer that something needs (an adjoint, a snapshot, the
  // final values), and its copy once the buffer no longer holds it.
  struct kept_copy {
    std::shared_ptr<void> data;
    int holders = 0;
  };
  struct tracked {
    std::shared_ptr<detail::field_storage> storage;
    int which = 0;
    std::string name;
    std::map<std::uint64_t, kept_copy> kept;
    std::uint64_t needed = none;  // the latest version an adjoint needs
    int needed_by = -1;           // the launch that needs it
    std::uint64_t watch = none;   // what this tape asked the storage to watch
    // What the rollout `ro_run` has seen of it while its forward pass ran.
    int ro_run = -1;
    bool ro_read = false, ro_written = false;
    int ro_first_step = -1, ro_last_write_step = -1;
    std::uint64_t ro_seen = none;        // its version after the rollout's last launch on it
    std::uint64_t ro_first_read = none;  // its version when a step first read it
    // For the values of a field with a gradient: its version after the last
    // launch or host write on it the tape recorded outside rollouts.
    std::uint64_t seen = none;
    // With verify_contents: the digest of its contents after the tape's last
    // launch on it outside rollouts, and the version it had then.
    std::uint64_t digest = 0;
    std::uint64_t digest_version = none;
  };
  struct need {
    std::size_t buffer;
    std::uint64_t version;
    int param;
  };
  struct use_record {
    std::string name;
    bool needed;
    bool written;
  };
  struct launch_entry {
    std::string kernel;
    int number = 0;
    std::string scope;
    std::vector<use_record> uses;
    std::vector<need> needs;
    detail::unique_action adjoint;
    std::size_t bytes_saved = 0;
    int rollout = -1;  // a checkpointed rollout: backward() reverses it here
  };
  // The state before one step: (buffer, version) pairs the snapshot holds.
  struct snapshot {
    std::vector<std::pair<std::size_t, std::uint64_t>> holds;
  };
  // What one launch of a step looked like when it first ran: the kernel and
  // the buffers it read and wrote, the versions it read, and its number and
  // matrix arguments.
  struct launch_print {
    std::uint64_t shape = 0, versions = 0, numbers = 0;
  };
  struct rollout_run {
    int id = 0;
    rollout_info info;
    std::function<void(int)> step;
    std::function<void(rollout_progress const&)> progress;
    std::vector<std::size_t> state;                              // written and read by the steps
    std::vector<std::pair<std::size_t, std::uint64_t>> inputs;  // read only, at the version the steps read
    std::vector<int> launches_before;                            // per step: the launch count before it
    std::vector<std::size_t> print_begin;                        // per step: its first launch in prints
    std::vector<launch_print> prints;
    std::map<int, snapshot> snapshots;  // live, by the step they precede
    std::size_t marker = 0;             // its entry in launches_
    bool sweeping = true;               // its forward pass is running
    int step_now = -1;
    std::size_t launch_in_step = 0;  // when run again: launches of step_now so far
    long long recomputed_in_backward = 0;
  };

  static std::uint64_t version_of(tracked const& t) { return t.storage->state[t.which].version; }

  std::size_t buffer_for(detail::launch_use const& u);
  // A whole-field host write (fill, copy_from), recorded as a launch that
  // writes the field (and reads its source): the tape keeps the values an
  // adjoint needs before it runs, and its adjoint zeroes the field's
  // gradient (passing it to the source first). Not recorded: constants
  // written to a field no recorded launch has used yet (its initial values,
  // whose gradient is what the user asks for); writes inside a rollout's
  // steps (CTG-TAPE-007 finds those the steps read); writes after
  // backward(). A copy from a field with a gradient is always recorded: its
  // gradient flows to that field.
  void observe(detail::host_write&& w, detail::action_ref write) override;

  // The values of a field with a gradient: what CTG-TAPE-011/012 protect.
  static bool differentiable_values(detail::field_storage const& s, int which) {
    return which == 0 && s.grad != nullptr;
  }
  static bool differentiable_values(detail::launch_use const& u) { return differentiable_values(*u.storage, u.which); }
  // CTG-TAPE-012: a launch uses a field with a gradient whose values the
  // host changed since the tape's last launch on it in a way the tape could
  // not record: elements (at(), map(), flat() on a non-const handle), or a
  // whole-field write where the tape does not record one (another thread, a
  // checkpointed rollout's step). Those values are constants, and their
  // gradient must stop there, but which ones changed is not known: the
  // adjoints would pass the gradient of every element on, silently. Checked
  // for every use, a launch that writes the field too: one that writes part
  // of it would hide the change from the next. (Reads through a non-const
  // handle change nothing: the tape watches the field and compares.)
  void check_elements_written(std::string_view kernel, int number, detail::launch_use const& u, tracked const& tb,
                              std::uint64_t seen) const;

  // CTG-TAPE-011: a launch reads a field with a gradient whose values a
  // launch this tape did not record (on another thread, under another tape)
  // wrote while it recorded. The tape cannot chain the gradient through
  // that launch: it would stop at the field, silently. A host write since
  // (fill, copy_from) makes the values constants, which is fine.
  void check_written_unrecorded(std::string_view kernel, int number, detail::launch_use const& u) const;

  // CTG-TAPE-014 (verify_contents): the contents of a host field the
  // adjoints depend on changed since the tape's last launch on it, and no
  // version says so: a write through a pointer (data()), into the memory
  // under a view, or through another field or view of the same memory. The
  // adjoints depend on the values of a field with a gradient (the gradient
  // flows through them) and on a version an adjoint or a rollout holds
  // while no copy of it exists (they will read the field itself).
  bool held_live(tracked const& t) const {
    auto const it = t.kept.find(version_of(t));
    return it != t.kept.end() && it->second.holders > 0 && it->second.data == nullptr;
  }
  // Inside a rollout's steps run again by backward(), which start from
  // snapshots the tape put back: their first run was compared.
  bool in_replayed_steps() const { return active_ != nullptr && !active_->sweeping; }
  bool digest_applies(tracked const& t) const {
    return opts_.verify_contents && t.storage->space == memory_space::host && t.which == 0 &&
           (differentiable_values(*t.storage, t.which) || held_live(t));
  }
  void take_digest(tracked& t) {
    if (!digest_applies(t)) return;
    t.digest = t.storage->contents_digest(t.which);
    t.digest_version = version_of(t);
  }
  // `number` 0: before backward(); negative: `kernel` names what ran.
  void check_digest(tracked const& t, std::string_view kernel, int number) const;
  std::string kernel_of(int number) const;

  // ---- holders and copies -------------------------------------------------------------------------
  void hold(tracked& t, std::uint64_t version) { ++t.kept[version].holders; }
  void drop(tracked& t, std::uint64_t version);
  // A copy of the buffer's current contents, for the holders of its version.
  std::size_t copy_now(tracked& t, kept_copy& k);
  // Before the buffer is overwritten: copies its version if something holds it.
  void keep_current(tracked& t);
  void restore(tracked& t, std::uint64_t version);
  bool has_copy(tracked const& t, std::uint64_t version) const {
    auto const it = t.kept.find(version);
    return it != t.kept.end() && it->second.data != nullptr;
  }
  void watch(tracked& t, std::uint64_t version) {
    t.storage->state[t.which].watched = version;
    t.watch = version;
  }
  // Before adjoint `l`: the buffer holds the version it needs.
  void provide(launch_entry const& l, need const& n);
  // Every field ends with its final forward values.
  void put_back_final();

  std::string scope_name() const;
  void stop_recording() {
    if (detail::active_tape() == this) record_here(nullptr);
  }
  // The tape recording on this thread: launches and whole-field host writes
  // (detail::host_write_observer) go to it.
  static void record_here(tape* t) {
    detail::active_tape() = t;
    detail::host_write_observer_of_thread() = t;
  }
  // The storages no longer need copies on touch for this tape; every copy goes.
  void unwatch();

  // ---- rollouts -------------------------------------------------------------------------------------
  void check_rollout(int steps, checkpoint const& budget) const;

  // Pushes "step t" on the scopes while recording.
  struct step_scope {
    tape* t;
    bool named;
    step_scope(tape* tp, int step) : t(tp), named(tp->record_) {
      if (named) t->scopes_.push_back("step " + std::to_string(step));
    }
    ~step_scope() {
      if (named) t->scopes_.pop_back();
    }
    step_scope(step_scope const&) = delete;
    step_scope& operator=(step_scope const&) = delete;
  };

  void record_every_step(rollout_run& r);

  void run_checkpointed(rollout_run& r, checkpoint const& budget);

  // One step of the forward pass.
  void sweep_step(rollout_run& r, int t);
  // The state before step t, in the forward pass: every field the steps
  // have read so far (the rest join when first read or first touched).
  void sweep_store(rollout_run& r, int t);

  // The rollout's view of a launch: what its steps carry, and whether the
  // launch matches the one its step made the first time.
  void rollout_sees(std::string_view kernel, int number, std::vector<detail::launch_use> const& uses,
                    std::uint64_t numbers);

  // The end of the forward pass: the state is what the steps wrote and read;
  // what they only read is held for the whole rollout, what they only wrote
  // is not carried.
  void finish_forward_pass(rollout_run& r);

  // A forward pass that failed: the fields the steps' launches touched go
  // back to their values before the rollout (the snapshot before step 0
  // holds each at the version of its first touch), and the tape is as
  // before the rollout was called.
  void undo_forward_pass(rollout_run& r);

  // Restores the version of each field the steps only read, should
  // something after the rollout have changed it.
  void put_back_inputs(rollout_run& r);
  void restore_snapshot(rollout_run& r, int t);
  // One step run again by backward().
  void replay_step(rollout_run& r, int t);

  // backward() at the rollout's place: the actions of the schedule after the
  // forward pass (whose recorded last step has had its adjoints by now).
  void reverse_rollout(rollout_run& r);

  static std::uint64_t mix(std::uint64_t h, std::uint64_t v);

  tape_options opts_{};
  std::vector<launch_entry> launches_;
  std::vector<tracked> buffers_;
  std::map<std::pair<void const*, int>, std::size_t> index_;
  std::vector<std::function<std::function<void()>(bool)>> zero_grads_;  // field::zero_grad_for_backward
  std::set<void const*> gradients_seen_;
  std::vector<std::string> scopes_;
  std::function<void()> seed_;
  std::vector<std::function<void()>> before_backward_;
  std::size_t bytes_saved_ = 0, live_bytes_ = 0, peak_bytes_ = 0;
  bool done_ = false;
  int launch_count_ = 0;
  std::uint64_t started_ = detail::next_write_stamp();  // writes stamped later came while it recorded
  std::vector<std::size_t> launch_buffers_;  // the buffers of the launch between begin_ and end_launch
  // Rollouts: the one whose steps run now, whether launches are recorded
  // (not while a checkpointed rollout advances), and where to.
  std::vector<std::unique_ptr<rollout_run>> rollouts_;
  rollout_run* active_ = nullptr;
  bool record_ = true, replaying_ = false;
  std::vector<launch_entry>* rec_ = &launches_;
  std::vector<launch_entry> step_entries_;  // the step backward() reverses now
  std::vector<std::uint64_t> final_;        // each buffer's version when backward() began
};

#if CTG_RUNTIME_DEFINITIONS
CTG_RUNTIME_INLINE tape::~tape() {
  stop_recording();
  unwatch();
}

CTG_RUNTIME_INLINE void tape::backward() {
  if (done_) throw autodiff_error("ctg::tape::backward() called twice: a tape replays its launches once");
  if (active_)
    throw autodiff_error(
        "CTG-TAPE-008 ctg::tape::backward() called from a rollout's step: the rollout has not "
        "finished. Fix: call backward() after tape.rollout returns");
  done_ = true;
  stop_recording();
  for (auto const& check : before_backward_) check();
  for (auto& b : buffers_) b.storage->settle(b.which);
  // Only what an adjoint will read: no launch comes after to pass a
  // gradient on through the others' values.
  for (auto const& b : buffers_)
    if (held_live(b)) check_digest(b, {}, 0);
  // ctg::set_flush_subnormals covers the gradient adds made here on the
  // host (copy_from's adjoint, a halo's, the adding back below), not only
  // the adjoints' launches. Declared first, it outlives the adding back.
  cpu::subnormal_mode_scope const subnormals(cpu::requested_subnormal_mode());
  // With ctg::keep_gradients the gradients there are set aside and added
  // back at the end: an intermediate field's gradient from an earlier
  // backward() must not flow through this one's adjoints.
  struct adding_back {
    std::vector<std::function<void()>> kept;
    ~adding_back() {
      for (auto& a : kept) a();
    }
  } add_back;
  for (auto& z : zero_grads_)
    if (auto a = z(opts_.keep_gradients)) add_back.kept.push_back(std::move(a));
  seed_();
  // The final forward values are one more holder of their versions: copied
  // the first time an earlier version is put back.
  final_.resize(buffers_.size());
  for (std::size_t k = 0; k < buffers_.size(); ++k) {
    final_[k] = version_of(buffers_[k]);
    hold(buffers_[k], final_[k]);
  }
  try {
    for (std::size_t i = launches_.size(); i-- > 0;) {
      launch_entry const& l = launches_[i];
      if (l.rollout >= 0) {
        reverse_rollout(*rollouts_[std::size_t(l.rollout)]);
        continue;
      }
      if (!l.adjoint) continue;
      for (auto const& n : l.needs) provide(l, n);
      l.adjoint();
    }
  } catch (...) {
    put_back_final();
    unwatch();
    throw;
  }
  put_back_final();
  unwatch();
}

CTG_RUNTIME_INLINE std::size_t tape::size() const {
  std::size_t n = 0;
  for (auto const& l : launches_) n += l.adjoint ? 1 : 0;
  return n;
}

CTG_RUNTIME_INLINE tape::scope_guard tape::scope(std::string name) {
  scopes_.push_back(std::move(name));
  return scope_guard(this);
}

CTG_RUNTIME_INLINE std::string tape::listing() const {
  std::string out;
  for (auto const& l : launches_) {
    if (l.rollout >= 0) {
      out += rollouts_[std::size_t(l.rollout)]->info.describe();
      continue;
    }
    // Appended piece by piece: g++ 12 warns (-Wrestrict, a false
    // positive) on a chain of operator+ over temporaries here.
    out += '#';
    out += std::to_string(l.number);
    out += ' ';
    if (!l.scope.empty()) {
      out += l.scope;
      out += ": ";
    }
    out += "kernel '";
    out += l.kernel;
    out += '\'';
    if (!l.adjoint) out += " (no adjoint)";
    std::string reads, writes;
    for (auto const& u : l.uses) {
      if (u.needed) {
        if (!reads.empty()) reads += ", ";
        reads += u.name;
      }
      if (u.written) {
        if (!writes.empty()) writes += ", ";
        writes += u.name;
      }
    }
    out += "; adjoint reads ";
    out += reads.empty() ? std::string("nothing") : reads;
    out += "; writes ";
    out += writes.empty() ? std::string("nothing") : writes;
    out += "; saved ";
    out += std::to_string(l.bytes_saved);
    out += " bytes\n";
  }
  out += "total saved: " + std::to_string(bytes_saved_) + " bytes\n";
  return out;
}

CTG_RUNTIME_INLINE std::size_t tape::begin_launch(std::string_view kernel, std::vector<detail::launch_use> uses,
                                                  std::uint64_t numbers) {
  if (done_ && !replaying_) throw autodiff_error("a kernel was launched under a ctg::tape after its backward()");
  int const number = ++launch_count_;
  launch_buffers_.resize(uses.size());
  for (std::size_t k = 0; k < uses.size(); ++k) {
    uses[k].storage->settle(uses[k].which);
    launch_buffers_[k] = buffer_for(uses[k]);
  }
  for (std::size_t k = 0; k < uses.size(); ++k) {
    if (uses[k].read) check_written_unrecorded(kernel, number, uses[k]);
    // Inside a rollout, from its second launch on the field, a read is
    // CTG-TAPE-007's (rollout_sees), and a launch that only writes it is
    // checked against the rollout's last launch on it. Runs of a step
    // again in backward() start from snapshots the tape put back; a
    // whole-field host write replaces what was there, so its contents
    // matter only where an adjoint will read them (the copy taken below
    // would keep them).
    tracked const& tb = buffers_[launch_buffers_[k]];
    if (replaying_) continue;
    if (!in_replayed_steps() && (!uses[k].whole || held_live(tb))) check_digest(tb, kernel, number);
    if (uses[k].whole) continue;
    if (active_ == nullptr || tb.ro_run != active_->id)
      check_elements_written(kernel, number, uses[k], tb, tb.seen);
    else if (!(uses[k].read || uses[k].needed))
      check_elements_written(kernel, number, uses[k], tb, tb.ro_seen);
  }
  if (active_) rollout_sees(kernel, number, uses, numbers);
  launch_entry e;
  if (record_) {
    e.kernel = std::string(kernel);
    e.number = number;
    e.scope = scope_name();
  }
  if (record_)
    for (std::size_t k = 0; k < uses.size(); ++k) {
      auto const& u = uses[k];
      std::size_t const b = launch_buffers_[k];
      e.uses.push_back(use_record{u.name, u.needed, u.written});
      if (u.needed && u.before) {
        std::uint64_t const now = version_of(buffers_[b]);
        e.needs.push_back({b, now, u.param});
        hold(buffers_[b], now);
      }
    }
  for (std::size_t k = 0; k < uses.size(); ++k) {
    if (!uses[k].written) continue;
    tracked& tb = buffers_[launch_buffers_[k]];
    std::uint64_t const now = version_of(tb);
    auto const held = tb.kept.find(now);
    if (held == tb.kept.end() || held->second.data) continue;
    if (opts_.strict) {
      int const by = tb.needed == now ? tb.needed_by : number;
      std::string const needer =
          by == number ? "itself" : "launch #" + std::to_string(by) + " (kernel '" + kernel_of(by) + "')";
      throw autodiff_error("CTG-TAPE-002 launch #" + std::to_string(number) + " (kernel '" + std::string(kernel) +
                           "') overwrites field '" + tb.name + "', whose current values the adjoint of " + needer +
                           " needs; the tape is strict and does not save them. Fix: write the new values to "
                           "another field, or record without ctg::tape_options{.strict = true} so that the tape "
                           "keeps a copy");
    }
    e.bytes_saved += copy_now(tb, held->second);
  }
  if (!record_) return no_entry;
  rec_->push_back(std::move(e));
  return rec_->size() - 1;
}

CTG_RUNTIME_INLINE void tape::end_launch(std::size_t entry, std::vector<detail::launch_use> const& uses,
                                         detail::unique_action adjoint) {
  if (launch_buffers_.size() != uses.size()) {
    launch_buffers_.resize(uses.size());
    for (std::size_t k = 0; k < uses.size(); ++k) launch_buffers_[k] = buffer_for(uses[k]);
  }
  if (entry != no_entry) {
    launch_entry& e = (*rec_)[entry];
    for (std::size_t k = 0; k < uses.size(); ++k) {
      auto const& u = uses[k];
      if (!u.needed || u.before) continue;
      std::size_t const b = launch_buffers_[k];
      std::uint64_t const now = version_of(buffers_[b]);
      e.needs.push_back({b, now, u.param});
      hold(buffers_[b], now);
    }
    for (auto const& n : e.needs) {
      tracked& tb = buffers_[n.buffer];
      tb.needed = n.version;
      tb.needed_by = e.number;
      watch(tb, n.version);
    }
    e.adjoint = std::move(adjoint);
  }
  // A read through at() on a non-const handle between the steps is then
  // found unchanged, not taken for a write.
  // Outside rollouts the tape watches the fields with gradients it has
  // seen, for the same reason (CTG-TAPE-012); a rollout's steps have their
  // own rules, and a rollout that fails keeps none of its launches.
  for (std::size_t k = 0; k < uses.size(); ++k) {
    if (!active_ && !differentiable_values(uses[k])) continue;
    tracked& tb = buffers_[launch_buffers_[k]];
    std::uint64_t const now = version_of(tb);
    (active_ ? tb.ro_seen : tb.seen) = now;
    watch(tb, now);
  }
  // Digests of what the launch left (of a field it only read too: a digest
  // begin_launch did not compare may be older than its contents).
  if (!in_replayed_steps() && !replaying_)
    for (std::size_t k = 0; k < uses.size(); ++k) take_digest(buffers_[launch_buffers_[k]]);
}

CTG_RUNTIME_INLINE std::size_t tape::buffer_for(detail::launch_use const& u) {
  auto const key = std::make_pair(static_cast<void const*>(u.storage.get()), u.which);
  auto const found = index_.find(key);
  if (found != index_.end()) return found->second;
  tracked t;
  t.storage = u.storage;
  t.which = u.which;
  t.name = u.name;
  buffers_.push_back(std::move(t));
  index_.emplace(key, buffers_.size() - 1);
  return buffers_.size() - 1;
}

CTG_RUNTIME_INLINE void tape::observe(detail::host_write&& w, detail::action_ref write) {
  auto const seen = [&](std::shared_ptr<detail::field_storage> const* s) {
    return s != nullptr && index_.count({static_cast<void const*>(s->get()), 0}) != 0;
  };
  if (active_ != nullptr || done_ || detail::active_tape() != this || !(seen(w.target) || w.source)) {
    write();
    return;
  }
  std::vector<detail::launch_use> uses;
  uses.push_back({*w.target, 0, *w.target_name, -1, false, false, true, false, true});
  if (w.source) {
    uses.push_back({*w.source, 0, *w.source_name, -1, false, false, false, true});
    if (w.clear_source_gradient && gradients_seen_.insert(w.source->get()).second)
      zero_grads_.push_back(std::move(w.clear_source_gradient));
  }
  if (w.clear_target_gradient && gradients_seen_.insert(w.target->get()).second)
    zero_grads_.push_back(std::move(w.clear_target_gradient));
  std::size_t const entry = begin_launch(std::string("host ") + w.what + " of '" + *w.target_name + "'", uses);
  write();
  end_launch(entry, uses, std::move(w.adjoint));
}

CTG_RUNTIME_INLINE void tape::check_elements_written(std::string_view kernel, int number, detail::launch_use const& u,
                                                     tracked const& tb, std::uint64_t seen) const {
  if (!differentiable_values(u) || seen == none || version_of(tb) == seen) return;
  detail::buffer_state const& b = u.storage->state[u.which];
  if (b.launch_version == b.version) return;  // a launch wrote it since (CTG-TAPE-011 if not recorded)
  throw autodiff_error("CTG-TAPE-012 launch #" + std::to_string(number) + " (kernel '" + std::string(kernel) +
                       "') uses field '" + u.name +
                       "', whose values the host changed since the tape's last launch on it in a way the tape "
                       "could not record (elements through at(), map() or flat() on a non-const handle; or a "
                       "whole-field write on another thread, or in a checkpointed rollout's step): they are "
                       "constants to the gradient, but which ones changed is not known. Fix: write the whole "
                       "field with fill or copy_from on the tape's thread, which the tape records, or make the "
                       "change with a kernel");
}

CTG_RUNTIME_INLINE void tape::check_digest(tracked const& t, std::string_view kernel, int number) const {
  if (!digest_applies(t) || t.digest_version != version_of(t)) return;
  if (!t.storage->owned[0]) t.storage->check_alive(t.name);  // a view: its memory may be gone
  if (t.storage->contents_digest(t.which) == t.digest) return;
  std::string const where = number == 0  ? std::string("backward()")
                            : number < 0 ? "the end of a " + std::string(kernel)
                                         : "launch #" + std::to_string(number) + " (kernel '" + std::string(kernel) + "')";
  throw autodiff_error("CTG-TAPE-014 " + where + " uses field '" + t.name +
                       "', whose contents changed since the tape's last launch on it by a write ctgrad did not "
                       "see (through a pointer such as data(), into the memory under a view, or through another "
                       "field or view of the same memory): the adjoints "
                       "would read values the forward pass did not, or pass the gradient on through values that "
                       "are constants now. Fix: make the change with a kernel, or write the whole field with fill "
                       "or copy_from on the tape's thread, which the tape records");
}

CTG_RUNTIME_INLINE void tape::check_written_unrecorded(std::string_view kernel, int number,
                                                       detail::launch_use const& u) const {
  if (!differentiable_values(u)) return;
  detail::buffer_state const& b = u.storage->state[u.which];
  if (b.launch_version != b.version || b.launch_recorder == static_cast<void const*>(this) ||
      b.launch_stamp <= started_)
    return;
  throw autodiff_error("CTG-TAPE-011 launch #" + std::to_string(number) + " (kernel '" + std::string(kernel) +
                       "') reads field '" + u.name +
                       "', which a launch this tape did not record wrote while it recorded (a launch on "
                       "another thread, or under another tape): the gradient would stop at that field. Fix: "
                       "launch that kernel on the thread the tape records, or before the tape starts");
}

CTG_RUNTIME_INLINE std::string tape::kernel_of(int number) const {
  for (auto const& l : launches_)
    if (l.number == number) return l.kernel;
  return "?";
}

CTG_RUNTIME_INLINE void tape::drop(tracked& t, std::uint64_t version) {
  auto const it = t.kept.find(version);
  if (it == t.kept.end() || --it->second.holders > 0) return;
  if (it->second.data) live_bytes_ -= t.storage->bytes;
  t.kept.erase(it);
}

CTG_RUNTIME_INLINE std::size_t tape::copy_now(tracked& t, kept_copy& k) {
  auto const& s = *t.storage;
  detail::copy_cache& blocks = s.copy_blocks();
  std::size_t block = 0;
  void* copy = blocks.take(s.bytes, block, s.name);
  k.data = std::shared_ptr<void>(copy, [&blocks, block](void* p) { blocks.give_back(p, block); });
  s.copy_within_space(copy, s.buffer(t.which));
  bytes_saved_ += s.bytes;
  live_bytes_ += s.bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return s.bytes;
}

CTG_RUNTIME_INLINE void tape::keep_current(tracked& t) {
  auto const it = t.kept.find(version_of(t));
  if (it != t.kept.end() && it->second.holders > 0 && !it->second.data) copy_now(t, it->second);
}

CTG_RUNTIME_INLINE void tape::restore(tracked& t, std::uint64_t version) {
  keep_current(t);
  auto const& s = *t.storage;
  s.copy_within_space(s.buffer(t.which), t.kept.at(version).data.get());
  // The tape's own write: nothing it could not record, and no launch's
  // (the version number may be one a launch since undone used). A touch
  // before it compared nothing; the next is compared with these values.
  detail::buffer_state& st = t.storage->state[t.which];
  st.version = version;
  st.launch_version = none;
  st.touched = false;
  st.snapshot.clear();
  if (t.seen != none) t.seen = version;
  watch(t, version);
  take_digest(t);  // a digest taken under that version number since may be of other contents
}

CTG_RUNTIME_INLINE void tape::provide(launch_entry const& l, need const& n) {
  tracked& t = buffers_[n.buffer];
  if (version_of(t) == n.version) return;
  if (!has_copy(t, n.version))
    throw autodiff_error("CTG-TAPE-003 kernel '" + l.kernel + "' (launch #" + std::to_string(l.number) +
                         ", parameter #" + std::to_string(n.param) + ") needs field '" + t.name +
                         "' as it was when it ran, but the field changed since by something the tape did not "
                         "record: a host write (at(), map() or flat() on a non-const handle; fill or copy_from in "
                         "a rollout's step), a launch under another tape, or a launch made after this tape "
                         "stopped recording. Fix: leave the field alone until backward(), or write to another "
                         "field");
  restore(t, n.version);
}

CTG_RUNTIME_INLINE void tape::put_back_final() {
  for (std::size_t k = 0; k < final_.size() && k < buffers_.size(); ++k)
    if (version_of(buffers_[k]) != final_[k] && has_copy(buffers_[k], final_[k])) restore(buffers_[k], final_[k]);
}

CTG_RUNTIME_INLINE std::string tape::scope_name() const {
  std::string out;
  for (auto const& s : scopes_) out += (out.empty() ? "" : "/") + s;
  return out;
}

CTG_RUNTIME_INLINE void tape::unwatch() {
  for (auto& b : buffers_) {
    auto& st = b.storage->state[b.which];
    if (b.watch != none && st.watched == b.watch) st.watched = none;
    b.watch = none;  // done: a later tape's watch of the same version is its own
    b.kept.clear();
  }
  live_bytes_ = 0;
}

CTG_RUNTIME_INLINE void tape::check_rollout(int steps, checkpoint const& budget) const {
  auto misuse = [](std::string const& what) { throw autodiff_error("CTG-TAPE-008 ctg::tape::rollout " + what); };
  if (done_) misuse("on a tape after its backward(): start a new tape for the next rollout");
  if (detail::active_tape() != this)
    misuse("on a tape that is not recording on this thread (a rollout runs its steps where the tape records)");
  if (active_)
    misuse(
        "inside another rollout's step: rollouts do not nest. Fix: make the inner loop part of the step, or "
        "run the rollouts one after the other");
  if (steps < 0) misuse("with " + std::to_string(steps) + " steps: the step count is 0 or more");
  if (budget.snapshots && budget.bytes)
    misuse("with both .snapshots and .bytes: give the budget one way (a number of snapshots or a byte budget)");
  bool const checkpointed = steps > 1 && (budget.bytes || (budget.snapshots && *budget.snapshots < steps));
  if (opts_.strict && checkpointed)
    misuse(
        "with a checkpoint budget on a strict tape: snapshots are copies, which a strict tape never makes. Fix: "
        "record the rollout without .strict, or without a budget (every step recorded, nothing copied that "
        "strict mode refuses)");
  if (budget.snapshots && *budget.snapshots < 1)
    throw autodiff_error("CTG-TAPE-005 ctg::checkpoint{.snapshots = " + std::to_string(*budget.snapshots) +
                         "}: a rollout keeps at least one copy of its state, the one before its first step; "
                         "nothing was run. Fix: .snapshots = 1 or more (about sqrt(steps) snapshots run each "
                         "step forward three times), or leave the budget out to record every step");
}

CTG_RUNTIME_INLINE void tape::record_every_step(rollout_run& r) {
  r.info.snapshots = 0;
  r.info.schedule = checkpoint_schedule(r.info.steps, std::max(1, r.info.steps));
  for (int t = 0; t < r.info.steps; ++t) {
    step_scope named(this, t);
    r.step(t);
  }
}

CTG_RUNTIME_INLINE void tape::run_checkpointed(rollout_run& r, checkpoint const& budget) {
  int const steps = r.info.steps;
  launch_entry marker;
  marker.kernel = "rollout";
  marker.rollout = r.id;
  r.marker = launches_.size();
  launches_.push_back(std::move(marker));
  r.launches_before.assign(std::size_t(steps), 0);
  r.print_begin.assign(std::size_t(steps) + 1, 0);
  active_ = &r;
  record_ = false;
  int ran = 0;  // steps of the forward pass already run
  try {
    sweep_store(r, 0);
    if (budget.snapshots) {
      r.info.schedule = checkpoint_schedule(steps, *budget.snapshots);
    } else {
      // A byte budget: the first step shows which fields the steps touch.
      sweep_step(r, 0);
      ran = 1;
      std::size_t touched = 0;
      std::string names;
      for (auto const& b : buffers_)
        if (b.ro_run == r.id) {
          touched += b.storage->bytes;
          names += (names.empty() ? "" : ", ") + b.name;
        }
      if (touched > 0 && *budget.bytes < touched)
        throw autodiff_error("CTG-TAPE-005 ctg::checkpoint{.bytes = " + std::to_string(*budget.bytes) +
                             "} holds less than one copy of the rollout's state: its first step reads or writes " +
                             names + ", " + std::to_string(touched) +
                             " bytes; nothing was kept, and the fields the step wrote are as before the rollout. "
                             "Fix: a budget of at least " +
                             std::to_string(touched) + " bytes, or ctg::checkpoint{.snapshots = 1}");
      long long const fit = touched == 0 ? steps : (long long)(*budget.bytes / touched);
      int const s = int(std::min<long long>(fit, steps));
      if (s >= steps) {
        // Every step fits: record them all, from the start again.
        undo_forward_pass(r);
        r.info.recomputed = 1;
        record_every_step(r);
        return;
      }
      r.info.schedule = checkpoint_schedule(steps, s);
    }
    auto const& actions = r.info.schedule.actions();
    for (std::size_t k = 1; k < r.info.schedule.forward_part(); ++k) {
      auto const& a = actions[k];
      if (a.what == checkpoint_schedule::act::store) {
        sweep_store(r, a.step);
      } else if (a.what == checkpoint_schedule::act::advance) {
        for (int t = std::max(a.step, ran); t < a.to; ++t) sweep_step(r, t);
      } else if (a.what == checkpoint_schedule::act::record) {
        record_ = true;
        rec_ = &launches_;
        sweep_step(r, a.step);
        record_ = false;
      }
    }
    finish_forward_pass(r);
  } catch (...) {
    undo_forward_pass(r);
    rollouts_.pop_back();
    throw;
  }
  active_ = nullptr;
  record_ = true;
}

CTG_RUNTIME_INLINE void tape::sweep_step(rollout_run& r, int t) {
  r.step_now = t;
  r.launches_before[std::size_t(t)] = launch_count_;
  r.print_begin[std::size_t(t)] = r.prints.size();
  {
    step_scope named(this, t);
    r.step(t);
  }
  r.print_begin[std::size_t(t) + 1] = r.prints.size();
}

CTG_RUNTIME_INLINE void tape::sweep_store(rollout_run& r, int t) {
  snapshot s;
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    tracked& tb = buffers_[b];
    if (tb.ro_run != r.id || !tb.ro_read) continue;
    std::uint64_t const v = version_of(tb);
    hold(tb, v);
    s.holds.push_back({b, v});
  }
  r.snapshots[t] = std::move(s);
}

CTG_RUNTIME_INLINE void tape::rollout_sees(std::string_view kernel, int number,
                                           std::vector<detail::launch_use> const& uses, std::uint64_t numbers) {
  rollout_run& r = *active_;
  launch_print p;
  p.numbers = numbers;
  p.shape = mix(0x9e3779b97f4a7c15ull, std::hash<std::string_view>{}(kernel));
  for (std::size_t k = 0; k < uses.size(); ++k) {
    auto const& u = uses[k];
    std::size_t const b = launch_buffers_[k];
    tracked& tb = buffers_[b];
    bool const reads = u.read || u.needed, writes = u.written;
    std::uint64_t const now = version_of(tb);
    p.shape = mix(p.shape, (std::uint64_t(b) << 2) | (reads ? 2u : 0u) | (writes ? 1u : 0u));
    if (reads) p.versions = mix(mix(p.versions, b), now);
    if (!r.sweeping) continue;
    if (tb.ro_run != r.id) {
      // First touched by the rollout: it has held its version since the
      // rollout began, so every snapshot so far holds it.
      tb.ro_run = r.id;
      tb.ro_read = tb.ro_written = false;
      tb.ro_first_step = r.step_now;
      tb.ro_last_write_step = -1;
      tb.ro_seen = none;
      tb.ro_first_read = none;
      for (auto& [at, s] : r.snapshots) {
        hold(tb, now);
        s.holds.push_back({b, now});
      }
    } else {
      if (tb.ro_seen != none && tb.ro_seen != now && (reads || tb.ro_read))
        throw autodiff_error(
            "CTG-TAPE-007 rollout step " + std::to_string(r.step_now) + ", launch #" + std::to_string(number) +
            " (kernel '" + std::string(kernel) + "'): field '" + tb.name +
            "', which the steps read, was written by the host since the rollout's last launch on it (at() on a "
            "non-const handle, fill, copy_from); backward() runs the steps again from snapshots and cannot repeat "
            "a write it did not see. Nothing was kept: the fields the steps' launches wrote are as before the "
            "rollout. Fix: make the change with a kernel in the step, or set the field before the rollout (for "
            "inputs that change from step to step, one field indexed by the step, filled beforehand)");
      if (reads && !tb.ro_read) {
        // Read for the first time after writes: the snapshots taken since
        // it was first touched hold it only if no step wrote it since.
        for (auto it = r.snapshots.upper_bound(tb.ro_first_step); it != r.snapshots.end(); ++it) {
          if (tb.ro_last_write_step >= it->first)
            throw autodiff_error(
                "CTG-TAPE-006 rollout step " + std::to_string(r.step_now) + ", launch #" + std::to_string(number) +
                " (kernel '" + std::string(kernel) + "') reads field '" + tb.name +
                "', which the steps wrote from step " + std::to_string(tb.ro_first_step) +
                " on without reading it: the fields a step carries changed, and the snapshot taken before step " +
                std::to_string(it->first) +
                " does not hold it. Nothing was kept: the fields the steps' launches wrote are as before the "
                "rollout. Fix: make every step read and write the fields it carries from its first step on (or "
                "start the rollout at the step that first reads it)");
          hold(tb, now);
          it->second.holds.push_back({b, now});
        }
      }
    }
    if (reads && !tb.ro_read) {
      tb.ro_read = true;
      tb.ro_first_read = now;
    }
    if (writes) {
      tb.ro_written = true;
      tb.ro_last_write_step = r.step_now;
    }
  }
  if (r.sweeping) {
    r.prints.push_back(p);
    return;
  }
  // Run again by backward(): the same launch as the first time.
  std::size_t const first = r.print_begin[std::size_t(r.step_now)],
                    count = r.print_begin[std::size_t(r.step_now) + 1] - first;
  std::size_t const at = r.launch_in_step++;
  if (at >= count || r.prints[first + at].shape != p.shape)
    throw autodiff_error(
        "CTG-TAPE-006 rollout step " + std::to_string(r.step_now) + ", run again by backward() from a snapshot, " +
        (at >= count ? "makes more launches than when it first ran (launch #" + std::to_string(number) + ", kernel '" +
                           std::string(kernel) + "')"
                     : "launched kernel '" + std::string(kernel) + "' on other fields, or another kernel, as its " +
                           std::to_string(at + 1) +
                           (at == 0   ? "st"
                            : at == 1 ? "nd"
                            : at == 2 ? "rd"
                                      : "th") +
                           " launch (#" + std::to_string(number) + ") than when it first ran") +
        ": the step function must make the same launches on the same fields each time it runs a step. Typical "
        "cause: handles swapped inside the step (std::swap(now, next)), which a second run of the step finds "
        "swapped already. Fix: choose the fields from the step number (levels[t % 3]), or copy values instead "
        "of swapping handles; the gradient was not computed, and the fields hold their final forward values");
  if (r.prints[first + at].numbers != p.numbers)
    throw autodiff_error(
        "CTG-TAPE-006 rollout step " + std::to_string(r.step_now) + ", run again by backward() from a snapshot, " +
        "launched kernel '" + std::string(kernel) + "' (launch #" + std::to_string(number) +
        ") with other number or matrix arguments than when it first ran (such as a time or a force): the step "
        "function must make the same launches each time it runs a step, and a "
        "value it keeps itself (a clock advanced by time += dt inside the step) has moved on since. Fix: compute "
        "such values from the step number (time = t * dt), or keep them in a field the steps update with a "
        "kernel; the gradient was not computed, and the fields hold their final forward values");
  if (r.prints[first + at].versions != p.versions) {
    std::string fields;
    for (auto const& u : uses)
      if (u.read || u.needed) fields += (fields.empty() ? "'" : ", '") + u.name + "'";
    throw autodiff_error("CTG-TAPE-007 rollout step " + std::to_string(r.step_now) +
                         ", run again by backward() from a snapshot, reads other values than when it first ran "
                         "(launch #" +
                         std::to_string(number) + ", kernel '" + std::string(kernel) + "', reading " + fields +
                         "): the host changed a field the steps read, inside the step function, which the tape "
                         "does not see. Fix: make the change with a kernel in the step, or set the field before "
                         "the rollout; the gradient was not computed, and the fields hold their final forward "
                         "values");
  }
}

CTG_RUNTIME_INLINE void tape::finish_forward_pass(rollout_run& r) {
  std::vector<char> in_state(buffers_.size(), 0);
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    tracked& tb = buffers_[b];
    if (tb.ro_run != r.id || !tb.ro_read) continue;
    if (tb.ro_written) {
      in_state[b] = 1;
      r.state.push_back(b);
      r.info.state.push_back(tb.name);
      r.info.state_bytes += tb.storage->bytes;
    } else {
      r.inputs.push_back({b, tb.ro_first_read});
      hold(tb, tb.ro_first_read);
    }
  }
  for (auto& [at, s] : r.snapshots) {
    std::vector<std::pair<std::size_t, std::uint64_t>> kept;
    for (auto const& h : s.holds) {
      if (in_state[h.first])
        kept.push_back(h);
      else
        drop(buffers_[h.first], h.second);
    }
    s.holds = std::move(kept);
  }
  r.info.snapshots = r.info.schedule.snapshots();
  r.sweeping = false;
  // The launches after the rollout check the fields with gradients it
  // touched as they check those of launches outside it (CTG-TAPE-012).
  for (auto& tb : buffers_)
    if (tb.ro_run == r.id && differentiable_values(*tb.storage, tb.which)) tb.seen = version_of(tb);
  // With verify_contents, what the rollout left is compared before the next
  // launch on it and before backward(); a field it only read keeps its
  // version, and is compared first.
  for (auto& tb : buffers_)
    if (tb.ro_run == r.id) {
      check_digest(tb, "checkpointed rollout", -1);
      take_digest(tb);
    }
}

CTG_RUNTIME_INLINE void tape::undo_forward_pass(rollout_run& r) {
  for (std::size_t i = r.marker + 1; i < launches_.size(); ++i)
    for (auto const& n : launches_[i].needs) drop(buffers_[n.buffer], n.version);
  launches_.resize(r.marker);
  for (auto& [at, s] : r.snapshots)
    if (at != 0)
      for (auto const& [b, v] : s.holds) drop(buffers_[b], v);
  auto const first = r.snapshots.find(0);
  if (first != r.snapshots.end()) {
    for (auto const& [b, v] : first->second.holds)
      if (version_of(buffers_[b]) != v && has_copy(buffers_[b], v)) restore(buffers_[b], v);
    for (auto const& [b, v] : first->second.holds) drop(buffers_[b], v);
  }
  r.snapshots.clear();
  for (auto& b : buffers_)
    if (b.ro_run == r.id) b.ro_run = -1;
  active_ = nullptr;
  record_ = true;
  rec_ = &launches_;
  r.prints.clear();
}

CTG_RUNTIME_INLINE void tape::put_back_inputs(rollout_run& r) {
  for (auto const& [b, v] : r.inputs) {
    tracked& tb = buffers_[b];
    if (version_of(tb) == v) continue;
    if (!has_copy(tb, v))
      throw autodiff_error("CTG-TAPE-003 the rollout's steps read field '" + tb.name +
                           "', and it changed since they ran by something the tape did not record (a host write: "
                           "at() on a non-const handle, fill, copy_from); backward() runs the steps again and "
                           "needs it as it was. Fix: leave the field alone until backward(), or write to another "
                           "field");
    restore(tb, v);
  }
}

CTG_RUNTIME_INLINE void tape::restore_snapshot(rollout_run& r, int t) {
  for (auto const& [b, v] : r.snapshots.at(t).holds) {
    tracked& tb = buffers_[b];
    if (version_of(tb) == v) continue;
    if (!has_copy(tb, v))
      throw autodiff_error("CTG-TAPE-003 the rollout's snapshot before step " + std::to_string(t) + " needs field '" +
                           tb.name +
                           "' as it was then, but the field changed since by something the tape did not record "
                           "(a host write: at() on a non-const handle, fill, copy_from; a launch under another "
                           "tape). Fix: leave the field alone until backward(), or write to another field");
    restore(tb, v);
  }
}

CTG_RUNTIME_INLINE void tape::replay_step(rollout_run& r, int t) {
  r.step_now = t;
  r.launch_in_step = 0;
  launch_count_ = r.launches_before[std::size_t(t)];
  {
    step_scope named(this, t);
    r.step(t);
  }
  std::size_t const count = r.print_begin[std::size_t(t) + 1] - r.print_begin[std::size_t(t)];
  if (r.launch_in_step != count)
    throw autodiff_error("CTG-TAPE-006 rollout step " + std::to_string(t) +
                         ", run again by backward() from a snapshot, made " + std::to_string(r.launch_in_step) +
                         " launches, " + std::to_string(count) +
                         " when it first ran: the step function must make the same launches on the same fields "
                         "each time it runs a step. Fix: decide what a step launches from the step number and the "
                         "fields it reads, nothing else; the gradient was not computed, and the fields hold their "
                         "final forward values");
}

CTG_RUNTIME_INLINE void tape::reverse_rollout(rollout_run& r) {
  struct replaying {
    tape* t;
    explicit replaying(tape* tp, rollout_run* run) : t(tp) {
      t->replaying_ = true;
      t->active_ = run;
      record_here(t);
    }
    ~replaying() {
      t->replaying_ = false;
      t->active_ = nullptr;
      t->record_ = true;
      t->rec_ = &t->launches_;
      for (auto& e : t->step_entries_)
        for (auto const& n : e.needs) t->drop(t->buffers_[n.buffer], n.version);
      t->step_entries_.clear();
      if (detail::active_tape() == t) record_here(nullptr);
    }
    replaying(replaying const&) = delete;
    replaying& operator=(replaying const&) = delete;
  } guard(this, &r);
  auto const started = std::chrono::steady_clock::now();
  int reversed = 1;
  auto report = [&] {
    if (!r.progress) return;
    rollout_progress p;
    p.steps = r.info.steps;
    p.reversed = reversed;
    p.recomputed = r.recomputed_in_backward;
    p.planned = r.info.schedule.recomputed_in_backward();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    r.progress(p);
  };
  report();
  auto const& actions = r.info.schedule.actions();
  for (std::size_t k = r.info.schedule.forward_part(); k < actions.size(); ++k) {
    auto const& a = actions[k];
    switch (a.what) {
      case checkpoint_schedule::act::store: {
        snapshot s;
        for (std::size_t b : r.state) {
          std::uint64_t const v = version_of(buffers_[b]);
          hold(buffers_[b], v);
          s.holds.push_back({b, v});
        }
        r.snapshots[a.step] = std::move(s);
        break;
      }
      case checkpoint_schedule::act::restore:
        restore_snapshot(r, a.step);
        break;
      case checkpoint_schedule::act::release: {
        for (auto const& [b, v] : r.snapshots.at(a.step).holds) drop(buffers_[b], v);
        r.snapshots.erase(a.step);
        break;
      }
      case checkpoint_schedule::act::advance:
        put_back_inputs(r);
        record_ = false;
        for (int t = a.step; t < a.to; ++t) {
          replay_step(r, t);
          ++r.recomputed_in_backward;
          ++r.info.recomputed;
        }
        break;
      case checkpoint_schedule::act::record: {
        put_back_inputs(r);
        record_ = true;
        rec_ = &step_entries_;
        replay_step(r, a.step);
        record_ = false;
        rec_ = &launches_;
        for (std::size_t i = step_entries_.size(); i-- > 0;) {
          launch_entry const& l = step_entries_[i];
          if (!l.adjoint) continue;
          for (auto const& n : l.needs) provide(l, n);
          l.adjoint();
        }
        for (auto& e : step_entries_)
          for (auto const& n : e.needs) drop(buffers_[n.buffer], n.version);
        step_entries_.clear();
        ++reversed;
        report();
        break;
      }
    }
  }
  for (auto const& [b, v] : r.inputs) drop(buffers_[b], v);
  r.inputs.clear();
}

CTG_RUNTIME_INLINE std::uint64_t tape::mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}
#endif  // CTG_RUNTIME_DEFINITIONS

// tape.rollout(steps, step, budget) on the tape recording on this thread;
// without one, the steps simply run (a forward pass, the finite differences
// of ctg::check_gradient). Returns the tape's account of the rollout, or
// nullptr without a tape.
template <class Step>
rollout_info const* rollout(int steps, Step&& step, checkpoint budget = {}) {
  if (tape* t = detail::active_tape()) return &t->rollout(steps, std::forward<Step>(step), std::move(budget));
  if (steps < 0)
    throw autodiff_error("CTG-TAPE-008 ctg::rollout with " + std::to_string(steps) +
                         " steps: the step count is 0 or more");
  for (int s = 0; s < steps; ++s) step(s);
  return nullptr;
}

}  // namespace ctg
