// The explicit heat equation the tape benchmarks step: in place in two
// buffers (heat) and with the state indexed by the step (heat_indexed, the
// layout the tape makes unnecessary), so both benchmarks time the same
// arithmetic.
#pragma once
#include <ctgrad/ctgrad.hpp>

namespace bench {

using namespace ctg::literals;

// next = now + D (now[i-1] - 2 now[i] + now[i+1]) inside, 0 at the ends.
inline auto heat = ctg::kernel<"heat">([](auto now, auto next, auto d) {
  return ctg::range(now.size(), [=](auto i) {
    return ctg::if_(i > 0 && i < now.size() - 1, next[i] = now[i] + d() * (now[i - 1] - 2.0 * now[i] + now[i + 1]),
                    next[i] = 0.0);
  });
});
// u(t + 1, .) from u(t, .), the same scheme.
inline auto heat_indexed = ctg::kernel<"heat_indexed">([](auto u, auto d, int t) {
  auto const n = u.shape(1_c);
  return ctg::range(n, [=](auto i) {
    return ctg::if_(i > 0 && i < n - 1,
                    u(t + 1, i) = u(t, i) + d() * (u(t, i - 1) - 2.0 * u(t, i) + u(t, i + 1)), u(t + 1, i) = 0.0);
  });
});

}  // namespace bench
