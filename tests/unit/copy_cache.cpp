// The blocks that hold a tape's copies of field values are kept when the
// tape goes and serve the next tape's copies of the same sizes; gradients are
// those of the closed form whichever block a copy lands in.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

namespace {

using vec_t = ctg::field<double, 1, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;

// x[i] = sin(x[i]) in place: each launch's adjoint needs the x it began
// with, which the next launch overwrites, so the tape saves x every launch.
constexpr auto sine_in_place = ctg::kernel<"sine_in_place">([](auto x) {
  return ctg::range(x.size(), [=](auto i) { return x[i] = ctg::sin(x[i]); });
});
constexpr auto total = ctg::kernel<"total">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += x[i]; });
});

constexpr int elements = 300;
constexpr int launches = 4;

// d(sin^n(x0))/dx0 = prod over k < n of cos(sin^k(x0)).
double closed_form(double x0) {
  double g = 1.0, x = x0;
  for (int k = 0; k < launches; ++k) {
    g *= std::cos(x);
    x = std::sin(x);
  }
  return g;
}

// Records the rollout on a tape, runs backward, and checks the gradient.
void rollout_and_check(vec_t& x) {
  for (int i = 0; i < elements; ++i) x.at(i) = 0.01 * i - 1.0;
  x.zero_grad();
  scal_t loss({.name = "loss"});
  ctg::tape tape(loss);
  for (int k = 0; k < launches; ++k) sine_in_place(x);
  total(x, loss);
  CHECK(tape.bytes_saved() >= std::size_t(launches - 1) * elements * sizeof(double));
  tape.backward();
  for (int i = 0; i < elements; ++i) CHECK(x.grad().at(i) == doctest::Approx(closed_form(0.01 * i - 1.0)).epsilon(1e-12));
}

struct limit_guard {
  std::size_t before = ctg::copy_cache_state().limit_bytes;
  ~limit_guard() { ctg::set_copy_cache_limit(before); }
};

}  // namespace

TEST_CASE("a second tape of the same rollout takes every copy from the blocks the first gave back") {
  limit_guard const guard;
  vec_t x({elements}, {.name = "x"});
  rollout_and_check(x);  // fills the cache with this rollout's blocks
  auto const before = ctg::copy_cache_state();
  CHECK(before.cached_bytes >= std::size_t(launches - 1) * elements * sizeof(double));
  rollout_and_check(x);
  auto const after = ctg::copy_cache_state();
  CHECK(after.allocated == before.allocated);  // nothing new
  CHECK(after.reused >= before.reused + launches - 1);
  CHECK(after.cached_bytes == before.cached_bytes);  // and all of it came back
}

TEST_CASE("with a limit of 0 every copy allocates its own block and frees it") {
  limit_guard const guard;
  ctg::set_copy_cache_limit(0);
  CHECK(ctg::copy_cache_state().cached_bytes == 0);  // lowering the limit frees what is over it
  vec_t x({elements}, {.name = "x"});
  auto const before = ctg::copy_cache_state();
  rollout_and_check(x);
  auto const after = ctg::copy_cache_state();
  CHECK(after.reused == before.reused);
  CHECK(after.allocated >= before.allocated + launches - 1);
  CHECK(after.cached_bytes == 0);
}

TEST_CASE("a cached block serves a copy when it is at most an eighth larger than the copy") {
  limit_guard const guard;
  ctg::trim_copy_cache();
  ctg::set_copy_cache_limit(std::size_t(1) << 20);
  auto& blocks = ctg::detail::copy_cache::of(false);
  std::size_t size = 0;
  void* p = blocks.take(9000, size, "a");
  CHECK(size == 9000);
  blocks.give_back(p, size);
  CHECK(ctg::copy_cache_state().cached_bytes == 9000);
  std::size_t small = 0;
  void* q = blocks.take(7000, small, "b");  // 9000 > 7000 + 7000 / 8: a new block
  CHECK(q != p);
  CHECK(small == 7000);
  std::size_t near = 0;
  void* r = blocks.take(8000, near, "c");  // 9000 <= 8000 + 1000: the cached one
  CHECK(r == p);
  CHECK(near == 9000);
  CHECK(ctg::copy_cache_state().cached_bytes == 0);
  blocks.give_back(q, small);
  blocks.give_back(r, near);
  CHECK(ctg::copy_cache_state().cached_bytes == 16000);
  ctg::set_copy_cache_limit(10000);  // frees the largest first, down to the limit
  CHECK(ctg::copy_cache_state().cached_bytes == 7000);
  ctg::trim_copy_cache();
  CHECK(ctg::copy_cache_state().cached_bytes == 0);
}
