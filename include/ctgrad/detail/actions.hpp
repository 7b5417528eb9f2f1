// Type-erased `void()` calls that compile less than std::function: one that
// owns its callable and cannot be copied, and one that refers to it.
//
// unique_action: what a tape keeps of each recorded launch to run in
// backward().
// std::function would do, but it must be able to copy what it holds: for
// every kernel and argument types a program records, the closure's copy
// (a copy of every field handle it holds, with their names) is compiled
// into a manager function that nothing ever calls, since a tape never
// copies its launches. This holds the closure on the heap and compiles two
// functions per closure type, the call and the destruction.
#pragma once
#include <memory>
#include <type_traits>
#include <utility>

namespace ctg::detail {

class unique_action {
 public:
  unique_action() = default;
  unique_action(std::nullptr_t) {}
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, unique_action> && std::is_invocable_v<std::decay_t<F>&>)
  unique_action(F&& f) {  // NOLINT(google-explicit-constructor): built where a callable is passed
    using held = std::decay_t<F>;
    // An empty std::function (or a null pointer to a function) stays empty.
    if constexpr (std::is_constructible_v<bool, held const&>)
      if (!static_cast<bool>(f)) return;
    object_ = new held(std::forward<F>(f));
    call_ = [](void* o) { (*static_cast<held*>(o))(); };
    destroy_ = [](void* o) { delete static_cast<held*>(o); };
  }
  unique_action(unique_action&& other) noexcept
      : object_(std::exchange(other.object_, nullptr)), call_(other.call_), destroy_(other.destroy_) {}
  unique_action& operator=(unique_action&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
      call_ = other.call_;
      destroy_ = other.destroy_;
    }
    return *this;
  }
  unique_action(unique_action const&) = delete;
  unique_action& operator=(unique_action const&) = delete;
  ~unique_action() { reset(); }

  explicit operator bool() const { return object_ != nullptr; }
  void operator()() const { call_(object_); }

 private:
  void reset() {
    if (object_) destroy_(std::exchange(object_, nullptr));
  }
  void* object_ = nullptr;
  void (*call_)(void*) = nullptr;
  void (*destroy_)(void*) = nullptr;
};

// A callable passed down to be called while the caller's frame lives:
// one function per callable type, the call (std::function would add a
// manager and an allocation).
class action_ref {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, action_ref> && std::is_invocable_v<F const&>)
  action_ref(F const& f)  // NOLINT(google-explicit-constructor): built where a callable is passed
      : object_(static_cast<void const*>(std::addressof(f))),
        call_([](void const* o) { (*static_cast<F const*>(o))(); }) {}
  void operator()() const { call_(object_); }

 private:
  void const* object_;
  void (*call_)(void const*);
};

}  // namespace ctg::detail
