// ctg::tape: records the kernel launches made while it is alive and replays
// their adjoints in reverse order.
//
//   ctg::tape tape(loss);   // loss: a 0-d field with ctg::grad
//   step(...); measure(...);
//   tape.backward();        // zeroes the recorded fields' gradients, seeds
//                           // loss.grad() = 1, runs measure.grad, step.grad
//
// Only launches of kernels that touch a field with a gradient are recorded.
// backward() clears, before replaying, the gradients of every field the
// recorded launches were given (so the result is d loss / d field, not an
// accumulation over earlier tapes); pass ctg::keep_gradients to accumulate
// into what is there instead.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "field.hpp"

namespace ctg {

struct keep_gradients_t {};
inline constexpr keep_gradients_t keep_gradients{};

class tape;

namespace detail {
inline tape*& active_tape() {
  thread_local tape* current = nullptr;
  return current;
}
}  // namespace detail

class tape {
 public:
  template <class T, flags F>
  explicit tape(field<T, 0, F> const& loss) : tape(loss, false) {}
  template <class T, flags F>
  tape(field<T, 0, F> const& loss, keep_gradients_t) : tape(loss, true) {}

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
    if (detail::active_tape() == this) detail::active_tape() = previous_;
  }

  // Replays the recorded adjoints; allowed once per tape.
  void backward() {
    if (done_) throw autodiff_error("ctg::tape::backward() called twice: a tape replays its launches once");
    done_ = true;
    if (detail::active_tape() == this) detail::active_tape() = previous_;
    if (!keep_) {
      for (auto& z : zero_grads_) z();
    }
    seed_();
    for (auto it = adjoints_.rbegin(); it != adjoints_.rend(); ++it) (*it)();
  }

  std::size_t size() const { return adjoints_.size(); }

  // Called by kernel launches; not for users.
  void record(std::function<void()> adjoint) {
    if (done_) throw autodiff_error("a kernel was launched under a ctg::tape after its backward()");
    adjoints_.push_back(std::move(adjoint));
  }
  template <class T, int R, flags F>
  void note_field(field<T, R, F> const& f) {
    if constexpr (has_flag(F, flags::grad)) {
      if (seen_.insert(f.storage_id()).second) zero_grads_.push_back([f] { f.zero_grad(); });
    }
  }

 private:
  template <class T, flags F>
  tape(field<T, 0, F> const& loss, bool keep) : keep_(keep) {
    static_assert(has_flag(F, flags::grad),
                  "CTG-TAPE-001 the loss of a ctg::tape needs a gradient buffer: declare it with ctg::grad");
    if (loss.empty()) throw autodiff_error("ctg::tape: the loss field is an empty handle");
    if (detail::active_tape() != nullptr)
      throw autodiff_error("ctg::tape: another tape is already recording on this thread; tapes do not nest");
    seed_ = [loss] { loss.grad().fill(T(1)); };
    note_field(loss);
    previous_ = detail::active_tape();
    detail::active_tape() = this;
  }

  std::vector<std::function<void()>> adjoints_;
  std::vector<std::function<void()>> zero_grads_;
  std::set<void const*> seen_;
  std::function<void()> seed_;
  tape* previous_ = nullptr;
  bool keep_ = false;
  bool done_ = false;
};

}  // namespace ctg
