// The adstack itself: last in first out, in 4-byte words, contiguous or
// interleaved with other threads' stacks, with overflow counted, not stored.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cstdint>
#include <ctgrad/ctgrad.hpp>
#include <vector>

TEST_CASE("interleaved stacks keep their values apart and come back in reverse order") {
  int const threads = 3;
  std::int64_t const words = 16;
  std::vector<std::uint32_t> memory(std::size_t(threads * words), 0xdeadbeef);
  std::vector<ctg::ad::adstack> stacks;
  for (int t = 0; t < threads; ++t) stacks.push_back({memory.data() + t, threads, words, 0, 0, -1});
  for (int t = 0; t < threads; ++t) {
    stacks[std::size_t(t)].push(double(t) + 0.25, 0);
    stacks[std::size_t(t)].push(Eigen::Vector3f(float(t), 2.0f * float(t), -1.0f), 0);
    stacks[std::size_t(t)].push(bool(t % 2), 0);  // padded to a word
    stacks[std::size_t(t)].push(std::int64_t(1) << (40 + t), 0);
  }
  for (int t = 0; t < threads; ++t) CHECK(stacks[std::size_t(t)].top == 2 + 3 + 1 + 2);
  for (int t = threads - 1; t >= 0; --t) {
    auto& s = stacks[std::size_t(t)];
    std::int64_t big = 0;
    bool flag = true;
    Eigen::Vector3f v;
    double d = 0;
    s.pop(big);
    s.pop(flag);
    s.pop(v);
    s.pop(d);
    CHECK(big == (std::int64_t(1) << (40 + t)));
    CHECK(flag == bool(t % 2));
    CHECK(v == Eigen::Vector3f(float(t), 2.0f * float(t), -1.0f));
    CHECK(d == double(t) + 0.25);
    CHECK(s.top == 0);
    CHECK(!s.overflowed());
  }
}

TEST_CASE("an overflow is counted to the end and never written") {
  std::vector<std::uint32_t> memory(6, 7u);
  ctg::ad::adstack s{memory.data(), 2, 2, 0, 0, -1};  // two words every other slot
  s.push(1.0f, 5);
  s.push(2.0f, 5);
  s.push(3.0, 9);  // does not fit
  s.push(4.0f, 9);
  CHECK(s.overflowed());
  CHECK(s.overflow_site == 9);
  CHECK(s.high == 5);
  CHECK(memory[4] == 7u);  // beyond the capacity: untouched
  CHECK(memory[5] == 7u);
  float a = 0, b = 0;
  double c = 0;
  s.pop(b);
  s.pop(c);
  s.pop(a);  // the two that fit still come back
  CHECK(a == 2.0f);
}
