// The race-checking backend: runs every parallel offload of a host launch in
// several iteration orders (in order, reversed, shuffled with a fixed seed),
// each from the same starting memory, and compares what the orders leave in
// every buffer the launch can reach. Results that depend on the order mean
// that an iteration reads what another one writes: on the thread pool or a
// GPU the same kernel gives values that change from run to run. The report
// names the offload, the parameter, the buffer and the first element that
// differs; kernel.hpp turns it into an error naming the kernel and the field.
//
// Floating-point accumulation (`loss() += ...`) legitimately depends on the
// order through rounding: values are equal when they agree to sqrt(epsilon)
// of the magnitudes involved (the two values and the largest of the buffer).
// Integers, masks and everything written by plain stores compare exactly.
//
// Serial offloads have a single order and run as on the CPU backend.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../../element.hpp"
#include "../cpu/launch.hpp"

namespace ctg::race {

// The orders, after the reference (iterations in order).
enum class order : int { in_order, reversed, shuffled };
inline char const* order_name(order o) {
  return o == order::in_order ? "in order" : o == order::reversed ? "in reverse order" : "in a shuffled order";
}

// The first difference between two orders of one launch.
struct report {
  int offload = -1;             // the offload's number in the kernel, from 0
  int param = -1;               // the kernel parameter whose buffer differs
  int buffer = 0;               // 0 its values, 1 its gradient, 2 its tangent
  std::int64_t element = -1;    // row-major element number in that buffer
  std::string index;            // the element's index, "(i, j)"
  order against = order::reversed;
  std::string in_order_value, other_value;
  bool found() const { return param >= 0; }
};

namespace detail {

// Floating-point elements (scalars and Eigen matrices of them) compare up to
// the rounding that the order of accumulations changes.
template <class T>
inline constexpr bool is_floating_element = std::is_floating_point_v<scalar_of_t<T>>;

template <class T>
auto coefficients(T const& v) {
  if constexpr (requires { T::SizeAtCompileTime; }) {
    auto out = std::vector<double>(static_cast<std::size_t>(T::SizeAtCompileTime));
    for (int k = 0; k < int(T::SizeAtCompileTime); ++k) out[std::size_t(k)] = double(v.coeff(k));
    return out;
  } else {
    return std::vector<double>{double(v)};
  }
}

template <class T>
std::string show(T const& v) {
  std::ostringstream os;
  os.precision(17);
  auto const c = coefficients(v);
  if (c.size() > 1) os << '[';
  for (std::size_t k = 0; k < c.size(); ++k) os << (k ? ", " : "") << c[k];
  if (c.size() > 1) os << ']';
  return os.str();
}

template <class T>
double magnitude(T const& v) {
  double m = 0;
  for (double c : coefficients(v)) m = std::max(m, std::abs(c));
  return m;
}

template <class T>
bool same(T const& a, T const& b, double scale) {
  if constexpr (is_floating_element<T>) {
    double const tolerance = std::sqrt(double(std::numeric_limits<scalar_of_t<T>>::epsilon()));
    auto const ca = coefficients(a), cb = coefficients(b);
    for (std::size_t k = 0; k < ca.size(); ++k) {
      if (std::isnan(ca[k]) && std::isnan(cb[k])) continue;
      if (!(std::abs(ca[k] - cb[k]) <= tolerance * (std::abs(ca[k]) + std::abs(cb[k]) + scale))) return false;
    }
    return true;
  } else {
    return coefficients(a) == coefficients(b);
  }
}

// One buffer a launch can reach: its starting values, and what the
// reference order left in it.
struct buffer_base {
  int param = -1, buffer = 0;
  virtual ~buffer_base() = default;
  virtual void restore_start() const = 0;
  virtual void keep_reference() = 0;
  // The first element where memory now differs from the reference, or -1.
  virtual std::int64_t first_difference(std::string& reference, std::string& now, std::string& index) const = 0;
};

template <class T, class Pointer, int Rank>
struct buffer_copy final : buffer_base {
  Pointer p;
  int extent[Rank > 0 ? Rank : 1];
  std::int64_t n;
  std::vector<T> start, reference;
  buffer_copy(Pointer ptr, int const* ext, std::int64_t count) : p(ptr), n(count) {
    for (int a = 0; a < (Rank > 0 ? Rank : 1); ++a) extent[a] = Rank > 0 ? ext[a] : 1;
    start.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) start[std::size_t(i)] = p[i];
  }
  void restore_start() const override {
    for (std::int64_t i = 0; i < n; ++i) p[i] = start[std::size_t(i)];
  }
  void keep_reference() override {
    reference.resize(std::size_t(n));
    for (std::int64_t i = 0; i < n; ++i) reference[std::size_t(i)] = p[i];
  }
  std::int64_t first_difference(std::string& ref, std::string& now, std::string& index) const override {
    double scale = 0;
    if constexpr (is_floating_element<T>)
      for (auto const& v : reference) scale = std::max(scale, magnitude(v));
    for (std::int64_t i = 0; i < n; ++i) {
      T const v = p[i];
      if (same(reference[std::size_t(i)], v, scale)) continue;
      ref = show(reference[std::size_t(i)]);
      now = show(v);
      std::int64_t rest = i;
      std::string idx;
      for (int a = Rank - 1; a >= 0; --a) {
        idx = std::to_string(rest % extent[a]) + (idx.empty() ? "" : ", ") + idx;
        rest /= extent[a];
      }
      index = "(" + idx + ")";
      return i;
    }
    return -1;
  }
};

// Every buffer of every field argument of a launch (an argument is a field
// view when it has data pointers and extents).
template <class V>
void collect(V const& v, int param, std::vector<std::unique_ptr<buffer_base>>& out) {
  if constexpr (requires {
                  v.data;
                  v.extent[0];
                  v.size();
                  typename V::value_type;
                }) {
    using T = typename V::value_type;
    using P = std::remove_cvref_t<decltype(v.data)>;
    constexpr int rank = V::rank;
    auto add = [&](P const& ptr, int which) {
      if (static_cast<T const*>(ptr) == nullptr) return;
      out.push_back(std::make_unique<buffer_copy<T, P, rank>>(ptr, v.extent, v.size()));
      out.back()->param = param;
      out.back()->buffer = which;
    };
    add(v.data, 0);
    if constexpr (V::has_grad) add(v.grad, 1);
    if constexpr (V::has_dual) add(v.dual, 2);
  }
}

}  // namespace detail

// Runs a parallel offload of one pass in each order and fills `found` with
// the first difference (found.offload is left to the caller).
template <class Pass, int Slots, class Named, class Args>
  requires(ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status, long long iterations,
                 int* unsized, report& found) {
  cpu::prepared_offload<Pass, Slots, Args, Named> const p(o, args, status, iterations);
  if (p.unsized_site >= 0) {
    if (unsized) *unsized = p.unsized_site;
    return;
  }
  std::vector<std::unique_ptr<detail::buffer_base>> buffers;
  int param = 0;
  ctg::detail::apply([&](auto const&... v) { (detail::collect(v, param++, buffers), ...); }, args);

  std::int64_t const n = p.count();
  auto sequence = std::vector<std::int64_t>(static_cast<std::size_t>(n));
  std::iota(sequence.begin(), sequence.end(), std::int64_t(0));
  cpu::chunk_stack const stack(p.capacity);
  auto run_in = [&](std::vector<std::int64_t> const& its) {
    for (std::int64_t it : its) p.run(it, it + 1, false, stack.get());
  };

  run_in(sequence);
  if (status.failed) return;
  for (auto& b : buffers) b->keep_reference();

  std::vector<std::int64_t> reversed(sequence.rbegin(), sequence.rend());
  std::vector<std::int64_t> shuffled = sequence;
  std::mt19937_64 random(0x5eedULL + std::uint64_t(n));
  std::shuffle(shuffled.begin(), shuffled.end(), random);
  order const others[] = {order::reversed, order::shuffled};
  for (order const other : others) {
    for (auto const& b : buffers) b->restore_start();
    run_in(other == order::reversed ? reversed : shuffled);
    if (status.failed) return;
    for (auto const& b : buffers) {
      std::string ref, now, index;
      std::int64_t const at = b->first_difference(ref, now, index);
      if (at < 0) continue;
      found.param = b->param;
      found.buffer = b->buffer;
      found.element = at;
      found.index = index;
      found.against = other;
      found.in_order_value = ref;
      found.other_value = now;
      break;
    }
    if (found.found()) break;
  }
  // A race leaves the fields as they were before the launch (nothing lost);
  // otherwise the in-order results, as a serial run leaves them.
  for (auto const& b : buffers) b->restore_start();
  if (!found.found()) run_in(sequence);
}

template <class Pass, int Slots, class Named, class Args>
  requires(!ir::offload_traits<Named>::parallel)
void run_offload(ir::named_t<Named> const& o, Args const& args, eval::launch_status& status, long long iterations,
                 int* unsized, report&) {
  cpu::run_offload<Pass, Slots, Named>(o, args, status, iterations, unsized);
}

}  // namespace ctg::race
