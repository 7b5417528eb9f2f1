// Accumulations into a banded field (every access holds, on each loop axis,
// a shift i + c of that axis's index: a stencil): on the host, iterations
// further than the chunk margin from their chunk's edges add with plain adds,
// those near an edge atomically (ad::slot_ownership). Every sum here is of
// small integers, exact in any order, so a lost update shows as a wrong
// number; the expected values are the stencil's transpose written out by hand.
// Each kernel's classification is asserted too, so that the exactness is not
// that of atomics everywhere.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using namespace ctg::literals;

namespace {

// Whether parameter I is owned / banded in the kernel's single offload.
template <int I, class Offload, int Slots>
constexpr bool banded_in(ctg::ir::kernel_ir<ctg::detail::tuple<Offload>, Slots> const&) {
  using traits = ctg::ir::offload_traits<Offload>;
  return ctg::ad::slot_ownership<typename traits::body, traits::axes, traits::parallel>::template banded<I>;
}
template <int I, class Offload, int Slots>
constexpr bool owned_in(ctg::ir::kernel_ir<ctg::detail::tuple<Offload>, Slots> const&) {
  using traits = ctg::ir::offload_traits<Offload>;
  return ctg::ad::slot_ownership<typename traits::body, traits::axes, traits::parallel>::template owned<I>;
}

}  // namespace

TEST_CASE("forward: a 1-D stencil scatter, a loop that does not start at 0, on 1 and 4 threads") {
  int const n = 300007;
  ctg::field<double, 1> x({n}, {.name = "x"}), acc({n}, {.name = "acc"});
  for (int i = 0; i < n; ++i) x.at(i) = double(i % 7 + 1);
  auto spread = ctg::kernel<"spread">([](auto x, auto acc) {
    return ctg::range(1, x.size() - 1, [=](auto i) {
      return ctg::block(acc[i - 1] += x[i], acc[i + 1] += 2.0 * x[i], acc[i] -= x[i]);
    });
  });
  CHECK(banded_in<1>(spread.ir(x, acc)));
  CHECK(!owned_in<1>(spread.ir(x, acc)));
  for (int threads : {1, 4}) {
    CAPTURE(threads);
    ad_test::thread_scope pool(threads);
    for (int round = 0; round < 3; ++round) {
      acc.fill(0.0);
      spread(x, acc);
      int wrong = 0;
      for (int j = 0; j < n; ++j) {
        double expected = 0;
        if (j + 1 >= 1 && j + 1 < n - 1) expected += x.at(j + 1);
        if (j - 1 >= 1 && j - 1 < n - 1) expected += 2.0 * x.at(j - 1);
        if (j >= 1 && j < n - 1) expected -= x.at(j);
        wrong += acc.at(j) != expected;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("reverse: the adjoint of a 1-D stencil gathers exactly on 4 threads") {
  int const n = 400009;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.5 * double(i % 5);
  // y[i] = 3 x[i-1] - x[i] + 2 x[i+1] x[i+1]: the adjoint adds into x.grad at
  // i - 1, i and i + 1 from every iteration.
  auto stencil = ctg::kernel<"stencil">([](auto x, auto y) {
    return ctg::range(1, x.size() - 1, [=](auto i) { return y[i] = 3.0 * x[i - 1] - x[i] + 2.0 * x[i + 1] * x[i + 1]; });
  });
  CHECK(banded_in<0>(stencil.ir(x, y)));
  ad_test::thread_scope pool(4);
  stencil(x, y);
  for (int round = 0; round < 3; ++round) {
    x.grad().fill(0.0);
    for (int i = 0; i < n; ++i) y.grad().at(i) = double(i % 3 + 1);
    stencil.grad(x, y);
    int wrong = 0;
    for (int j = 0; j < n; ++j) {
      double expected = 0;
      auto seed = [&](int i) { return i >= 1 && i < n - 1 ? double(i % 3 + 1) : 0.0; };
      expected += 3.0 * seed(j + 1) - seed(j) + 4.0 * x.at(j) * seed(j - 1);
      wrong += x.grad().at(j) != expected;
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("shifts by numbers are told apart by value: x[i + 1] and x[i + 2] share elements") {
  // Both indices have the type `i + literal`: ownership must not take equal
  // types for equal indices (iteration i and i + 1 both touch x[i + 2]).
  int const n = 400003;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  for (int i = 0; i < n; ++i) x.at(i) = double(i % 9);
  auto pair = ctg::kernel<"shifted_pair">([](auto x, auto y) {
    return ctg::range(x.size() - 2, [=](auto i) { return y[i] = x[i + 1] * 2.0 - x[i + 2]; });
  });
  CHECK(!owned_in<0>(pair.ir(x, y)));
  CHECK(banded_in<0>(pair.ir(x, y)));
  ad_test::thread_scope pool(4);
  pair(x, y);
  for (int round = 0; round < 3; ++round) {
    x.grad().fill(0.0);
    for (int i = 0; i < n; ++i) y.grad().at(i) = double(i % 4 + 1);
    pair.grad(x, y);
    int wrong = 0;
    for (int j = 0; j < n; ++j) {
      auto seed = [&](int i) { return i >= 0 && i < n - 2 ? double(i % 4 + 1) : 0.0; };
      wrong += x.grad().at(j) != 2.0 * seed(j - 1) - seed(j - 2);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("2-D: a four-neighbour scatter and a gather's adjoint, margins of a whole row") {
  int const rows = 301, cols = 257;
  ctg::field<double, 2, ctg::grad> v({rows, cols}, {.name = "v"}), m({rows, cols}, {.name = "m"});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) v.at(i, j) = double((i * 7 + j) % 4);
  auto five = ctg::kernel<"five_point">([](auto v, auto m) {
    // Interior points (a + 1, b + 1) scatter to their four neighbours.
    return ctg::ndrange(v.shape(0_c) - 2, v.shape(1_c) - 2, [=](auto a, auto b) {
      return ctg::block(m(a, b + 1) += v(a + 1, b + 1), m(a + 2, b + 1) += v(a + 1, b + 1),
                        m(a + 1, b) += 2.0 * v(a + 1, b + 1), m(a + 1, b + 2) += 3.0 * v(a + 1, b + 1));
    });
  });
  CHECK(banded_in<1>(five.ir(v, m)));
  auto inner = [&](int i, int j) { return i >= 1 && i < rows - 1 && j >= 1 && j < cols - 1; };
  ad_test::thread_scope pool(4);
  for (int round = 0; round < 2; ++round) {
    m.fill(0.0);
    five(v, m);
    int wrong = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        double e = 0;
        if (inner(i + 1, j)) e += v.at(i + 1, j);
        if (inner(i - 1, j)) e += v.at(i - 1, j);
        if (inner(i, j + 1)) e += 2.0 * v.at(i, j + 1);
        if (inner(i, j - 1)) e += 3.0 * v.at(i, j - 1);
        wrong += m.at(i, j) != e;
      }
    CHECK(wrong == 0);
  }
  // A gather whose adjoint scatters: m(i, j) reads v at the four neighbours
  // of (i, j), so v.grad(i, j) = m.grad(i+1, j) + m.grad(i-1, j)
  // + 2 m.grad(i, j+1) + 3 m.grad(i, j-1) over interior (i, j) of m.
  auto gather = ctg::kernel<"five_point_gather">([](auto v, auto m) {
    return ctg::ndrange(v.shape(0_c) - 2, v.shape(1_c) - 2, [=](auto a, auto b) {
      return m(a + 1, b + 1) = v(a, b + 1) + v(a + 2, b + 1) + 2.0 * v(a + 1, b) + 3.0 * v(a + 1, b + 2);
    });
  });
  CHECK(banded_in<0>(gather.ir(v, m)));
  gather(v, m);
  for (int round = 0; round < 2; ++round) {
    v.grad().fill(0.0);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) m.grad().at(i, j) = double((i + 2 * j) % 5);
    gather.grad(v, m);
    int wrong = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        auto seed = [&](int a, int b) { return inner(a, b) ? double((a + 2 * b) % 5) : 0.0; };
        double const e = seed(i + 1, j) + seed(i - 1, j) + 2.0 * seed(i, j + 1) + 3.0 * seed(i, j - 1);
        wrong += v.grad().at(i, j) != e;
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("what is not banded stays atomic: an index field, a missing axis, a run-time offset") {
  int const n = 1000;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<int, 1> idx({n}, {.name = "idx"});
  ctg::field<double, 2> grid({4, n}, {.name = "grid"});
  auto by_index = ctg::kernel<"by_index">([](auto x, auto y, auto idx) {
    return ctg::range(x.size(), [=](auto i) { return y[idx[i]] += x[i]; });
  });
  CHECK(!banded_in<1>(by_index.ir(x, y, idx)));
  // Every row of grid from every iteration j: iterations far apart share elements.
  auto columns = ctg::kernel<"columns">([](auto x, auto grid) {
    return ctg::range(4, [=](auto r) { return ctg::range(x.size(), [=](auto j) { return grid(r, j) += x[j]; }); });
  });
  CHECK(!banded_in<1>(columns.ir(x, grid)));
  // i + idx[0] reads a field element: not invariant, so not a shift.
  auto shifted = ctg::kernel<"shifted">([](auto x, auto y, auto idx) {
    return ctg::range(1, x.size() - 1, [=](auto i) { return ctg::block(y[i + idx[0]] += x[i], y[i] += x[i]); });
  });
  CHECK(!banded_in<1>(shifted.ir(x, y, idx)));
}
