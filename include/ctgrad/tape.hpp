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
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
};

}  // namespace detail

class tape {
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
    detail::active_tape() = this;
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
  ~tape() {
    stop_recording();
    unwatch();
  }

  // Replays the recorded adjoints, newest first; allowed once per tape.
  void backward() {
    if (done_) throw autodiff_error("ctg::tape::backward() called twice: a tape replays its launches once");
    done_ = true;
    stop_recording();
    for (auto& b : buffers_) b.storage->settle(b.which);
    if (!opts_.keep_gradients)
      for (auto& z : zero_grads_) z();
    seed_();
    std::vector<std::uint64_t> final_version(buffers_.size());
    for (std::size_t k = 0; k < buffers_.size(); ++k) final_version[k] = version_of(buffers_[k]);
    for (auto it = launches_.rbegin(); it != launches_.rend(); ++it) {
      if (!it->adjoint) continue;
      for (auto const& n : it->needs) provide(*it, n);
      it->adjoint();
    }
    // Every field ends with its final forward values.
    for (std::size_t k = 0; k < buffers_.size(); ++k)
      if (version_of(buffers_[k]) != final_version[k]) restore(buffers_[k], final_version[k]);
    unwatch();
  }

  // Launches recorded with an adjoint.
  std::size_t size() const {
    std::size_t n = 0;
    for (auto const& l : launches_) n += l.adjoint ? 1 : 0;
    return n;
  }
  // Bytes of field values the tape keeps for the adjoints (all copies).
  std::size_t bytes_saved() const { return bytes_saved_; }
  // The most bytes of saved values alive at once (backward() saves the final
  // values of a field before it restores an earlier version).
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
  [[nodiscard]] scope_guard scope(std::string name) {
    scopes_.push_back(std::move(name));
    return scope_guard(this);
  }

  // One line per recorded launch: number, scope, kernel, the fields it reads
  // for its adjoint and writes, and the bytes saved before it ran.
  std::string listing() const {
    std::string out;
    for (auto const& l : launches_) {
      out += "#" + std::to_string(l.number) + " " + (l.scope.empty() ? "" : l.scope + ": ") + "kernel '" + l.kernel +
             "'" + (l.adjoint ? "" : " (no adjoint)");
      std::string reads, writes;
      for (auto const& u : l.uses) {
        if (u.needed) reads += (reads.empty() ? "" : ", ") + u.name;
        if (u.written) writes += (writes.empty() ? "" : ", ") + u.name;
      }
      out += "; adjoint reads " + (reads.empty() ? std::string("nothing") : reads);
      out += "; writes " + (writes.empty() ? std::string("nothing") : writes);
      out += "; saved " + std::to_string(l.bytes_saved) + " bytes\n";
    }
    out += "total saved: " + std::to_string(bytes_saved_) + " bytes\n";
    return out;
  }

  // ---- called by kernel launches; not for users ---------------------------------------------------
  // Before a launch runs: saves what it is about to overwrite that an earlier
  // adjoint (or its own) needs. Returns the entry to complete.
  std::size_t begin_launch(std::string_view kernel, std::vector<detail::launch_use> uses) {
    if (done_) throw autodiff_error("a kernel was launched under a ctg::tape after its backward()");
    launch_entry e;
    e.kernel = std::string(kernel);
    e.number = int(launches_.size()) + 1;
    e.scope = scope_name();
    for (auto& u : uses) {
      u.storage->settle(u.which);
      e.uses.push_back(use_record{u.name, u.needed, u.written});
      std::size_t const b = buffer_for(u);
      tracked& tb = buffers_[b];
      std::uint64_t const now = version_of(tb);
      if (u.needed && u.before) e.needs.push_back({b, now, u.param});
      if (!u.written) continue;
      bool const wanted = (tb.needed == now) || (u.needed && u.before);
      if (!wanted || tb.saved.count(now)) continue;
      if (opts_.strict) {
        int const by = tb.needed == now ? tb.needed_by : e.number;
        std::string const needer = by == e.number ? "itself" : "launch #" + std::to_string(by) + " (kernel '" +
                                                                   launches_[std::size_t(by - 1)].kernel + "')";
        throw autodiff_error("CTG-TAPE-002 launch #" + std::to_string(e.number) + " (kernel '" + e.kernel +
                             "') overwrites field '" + tb.name + "', whose current values the adjoint of " + needer +
                             " needs; the tape is strict and does not save them. Fix: write the new values to "
                             "another field, or record without ctg::tape_options{.strict = true} so that the tape "
                             "keeps a copy");
      }
      e.bytes_saved += save(tb, now);
    }
    launches_.push_back(std::move(e));
    return launches_.size() - 1;
  }
  // After the launch ran (its written buffers bumped): the versions its
  // adjoint needs, and the adjoint itself (none for a launch that touches no
  // field with a gradient: its writes still matter to the others).
  void end_launch(std::size_t entry, std::vector<detail::launch_use> const& uses, std::function<void()> adjoint) {
    launch_entry& e = launches_[entry];
    for (auto const& u : uses) {
      if (!u.needed || u.before) continue;
      std::size_t const b = buffer_for(u);
      e.needs.push_back({b, version_of(buffers_[b]), u.param});
    }
    for (auto const& n : e.needs) {
      tracked& tb = buffers_[n.buffer];
      tb.needed = n.version;
      tb.needed_by = e.number;
      tb.storage->state[tb.which].watched = n.version;
    }
    e.adjoint = std::move(adjoint);
  }
  // A launch argument: when it is a field with a gradient, backward() clears
  // that gradient first.
  template <class X>
  void note_gradient_of(X const& x) {
    if constexpr (is_field_v<X>) note_gradient(x);
  }
  template <class T, int R, flags F>
  void note_gradient(field<T, R, F> const& f) {
    if constexpr (has_flag(F, flags::grad)) {
      if (gradients_seen_.insert(f.storage().get()).second) zero_grads_.push_back([f] { f.zero_grad(); });
    }
  }

 private:
  struct saved_copy {
    std::shared_ptr<void> data;
  };
  struct tracked {
    std::shared_ptr<detail::field_storage> storage;
    int which = 0;
    std::string name;
    std::map<std::uint64_t, saved_copy> saved;
    std::uint64_t needed = detail::buffer_state::none;  // the latest version an adjoint needs
    int needed_by = -1;                                   // the launch that needs it
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
    std::function<void()> adjoint;
    std::size_t bytes_saved = 0;
  };

  static std::uint64_t version_of(tracked const& t) { return t.storage->state[t.which].version; }

  std::size_t buffer_for(detail::launch_use const& u) {
    auto const key = std::make_pair(static_cast<void const*>(u.storage.get()), u.which);
    auto const found = index_.find(key);
    if (found != index_.end()) return found->second;
    buffers_.push_back(tracked{u.storage, u.which, u.name, {}, detail::buffer_state::none, -1});
    index_.emplace(key, buffers_.size() - 1);
    return buffers_.size() - 1;
  }

  // A copy of the buffer's current contents, kept as `version`.
  std::size_t save(tracked& t, std::uint64_t version) {
    auto const& s = *t.storage;
    void* copy = s.allocate();
    std::shared_ptr<void> owned(copy, [storage = t.storage](void* p) { storage->release(p); });
    s.copy_within_space(copy, s.buffer(t.which));
    t.saved[version] = saved_copy{std::move(owned)};
    bytes_saved_ += s.bytes;
    live_bytes_ += s.bytes;
    if (live_bytes_ > peak_bytes_) peak_bytes_ = live_bytes_;
    return s.bytes;
  }
  void restore(tracked& t, std::uint64_t version) {
    auto const& s = *t.storage;
    s.copy_within_space(s.buffer(t.which), t.saved.at(version).data.get());
    t.storage->state[t.which].version = version;
  }
  // Before adjoint `l`: the buffer holds the version it needs.
  void provide(launch_entry const& l, need const& n) {
    tracked& t = buffers_[n.buffer];
    std::uint64_t const now = version_of(t);
    if (now == n.version) return;
    if (!t.saved.count(n.version))
      throw autodiff_error("CTG-TAPE-003 kernel '" + l.kernel + "' (launch #" + std::to_string(l.number) +
                           ", parameter #" + std::to_string(n.param) + ") needs field '" + t.name +
                           "' as it was when it ran, but the field changed since by something the tape did not "
                           "record: a host write (at() on a non-const handle, fill, copy_from), a launch under "
                           "another tape, or a launch made after this tape stopped recording. Fix: leave the field "
                           "alone until backward(), or write to another field");
    if (!t.saved.count(now)) save(t, now);  // the final values, restored at the end
    restore(t, n.version);
  }

  std::string scope_name() const {
    std::string out;
    for (auto const& s : scopes_) out += (out.empty() ? "" : "/") + s;
    return out;
  }
  void stop_recording() {
    if (detail::active_tape() == this) detail::active_tape() = nullptr;
  }
  // The storages no longer need copies on touch for this tape.
  void unwatch() {
    for (auto& b : buffers_) {
      auto& st = b.storage->state[b.which];
      if (st.watched == b.needed) st.watched = detail::buffer_state::none;
    }
    for (auto& b : buffers_) b.saved.clear();
    live_bytes_ = 0;
  }

  tape_options opts_{};
  std::vector<launch_entry> launches_;
  std::vector<tracked> buffers_;
  std::map<std::pair<void const*, int>, std::size_t> index_;
  std::vector<std::function<void()>> zero_grads_;
  std::set<void const*> gradients_seen_;
  std::vector<std::string> scopes_;
  std::function<void()> seed_;
  std::size_t bytes_saved_ = 0, live_bytes_ = 0, peak_bytes_ = 0;
  bool done_ = false;
};

}  // namespace ctg
