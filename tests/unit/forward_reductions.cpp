// Accumulation into a fixed element from every iteration of a parallel
// offload: the forward pass sums into per-thread partials when nothing else in
// the offload touches the field (eval/reduction.hpp). Each result is checked
// against a sum computed on the host in integers, so it is exact whatever the
// order of the additions.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <vector>

using namespace ctg::literals;

namespace {

// Restores the pool size on exit, so that other tests keep theirs.
struct pool_threads {
  int previous = ctg::num_threads();
  explicit pool_threads(int n) { ctg::set_num_threads(n); }
  ~pool_threads() { ctg::set_num_threads(previous); }
};

// How many elements the forward pass privatises in a kernel of one offload.
template <class Offload, int Slots>
constexpr std::size_t privatized_count(ctg::ir::kernel_ir<ctg::detail::tuple<Offload>, Slots> const&) {
  return ctg::eval::privatized_t<typename ctg::ir::offload_traits<Offload>::root>::size;
}

}  // namespace

TEST_CASE("fixed-element reductions: sums, differences, constant indices and vectors on many threads") {
  pool_threads threads(4);
  int const n = 100003;  // not a multiple of any chunk size
  ctg::field<double, 1> x(n);
  ctg::field<double, 0> squares, negated;
  ctg::field<double, 1> hist(4);
  ctg::field<Eigen::Vector2d, 0> pair;
  long long want_squares = 0, want_sum = 0, want_odd = 0;
  for (int i = 0; i < n; ++i) {
    x.at(i) = double(i % 7);
    want_squares += (i % 7) * (i % 7);
    want_sum += i % 7;
    want_odd += (i % 7) % 2;
  }
  auto k = ctg::kernel<"reductions">([](auto x, auto squares, auto negated, auto hist, auto pair) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(squares() += x[i] * x[i], negated() -= x[i], hist(1_c) += 1.0, hist(3_c) += ctg::cast<double>(ctg::cast<int>(x[i]) % 2),
                        pair() += ctg::vec(x[i], 1.0));
    });
  });
  // Every destination is privatised: squares, negated, hist(1), hist(3), pair.
  CHECK(privatized_count(k.ir(x, squares, negated, hist, pair)) == 5);
  k(x, squares, negated, hist, pair);
  CHECK(squares.at() == double(want_squares));
  CHECK(negated.at() == -double(want_sum));
  CHECK(hist.at(0) == 0.0);
  CHECK(hist.at(1) == double(n));
  CHECK(hist.at(2) == 0.0);
  CHECK(hist.at(3) == double(want_odd));
  CHECK(pair.at()[0] == double(want_sum));
  CHECK(pair.at()[1] == double(n));
  // A second launch adds to what the first left, like the atomics it replaces.
  k(x, squares, negated, hist, pair);
  CHECK(squares.at() == 2.0 * double(want_squares));
  CHECK(hist.at(1) == 2.0 * double(n));
}

TEST_CASE("fixed-element reductions under nested loops and conditions") {
  pool_threads threads(3);
  int const n = 5000;
  ctg::field<int, 1> x(n);
  ctg::field<long long, 0> total;
  long long want = 0;
  for (int i = 0; i < n; ++i) {
    x.at(i) = i % 5;
    for (int j = 0; j < 3; ++j)
      if (i % 5 > 2) want += (i % 5) * j;
  }
  auto k = ctg::kernel<"nested">([](auto x, auto total) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::range(3, [=](auto j) {
        return ctg::if_(x[i] > 2, total() += ctg::cast<long long>(x[i] * j));
      });
    });
  });
  CHECK(privatized_count(k.ir(x, total)) == 1);
  k(x, total);
  CHECK(total.at() == want);
}

TEST_CASE("accumulations that stay atomic: the field is read, indexed at run time, or also min/max-ed") {
  pool_threads threads(4);
  int const n = 20000;
  ctg::field<int, 1> bin(n);
  ctg::field<double, 1> out(n), hist(8);
  ctg::field<double, 0> acc, extreme;
  for (int i = 0; i < n; ++i) bin.at(i) = (i * 7) % 8;

  // acc is also read in the offload: not privatised (the read would miss the
  // other threads' partials). Only the sum is deterministic.
  auto reads = ctg::kernel<"reads">([](auto acc, auto out) {
    return ctg::range(out.size(), [=](auto i) { return ctg::block(acc() += 1.0, out[i] = acc() * 0.0 + 2.0); });
  });
  CHECK(privatized_count(reads.ir(acc, out)) == 0);
  reads(acc, out);
  CHECK(acc.at() == double(n));
  CHECK(out.at(n - 1) == 2.0);

  // hist[bin[i]]: the element depends on the iteration.
  auto indexed = ctg::kernel<"indexed">([](auto bin, auto hist) {
    return ctg::range(bin.size(), [=](auto i) { return hist[bin[i]] += 1.0; });
  });
  CHECK(privatized_count(indexed.ir(bin, hist)) == 0);
  indexed(bin, hist);
  for (int b = 0; b < 8; ++b) CHECK(hist.at(b) == double(n / 8));

  // extreme() += and atomic_max on the same field: both stay atomic.
  auto mixed = ctg::kernel<"mixed">([](auto bin, auto extreme) {
    return ctg::range(bin.size(), [=](auto i) {
      return ctg::block(extreme() += 0.0, ctg::atomic_max(extreme(), ctg::cast<double>(bin[i])));
    });
  });
  CHECK(privatized_count(mixed.ir(bin, extreme)) == 0);
  mixed(bin, extreme);
  CHECK(extreme.at() == 7.0);
}

TEST_CASE("a privatised reduction at an index outside the field is reported at launch") {
  ctg::field<double, 1> x({10}, {.name = "x"}), hist({2}, {.name = "hist"});
  auto k = ctg::kernel<"past_the_end">([](auto x, auto hist) {
    return ctg::range(x.size(), [=](auto i) { return hist(5_c) += x[i]; });
  });
  CHECK(privatized_count(k.ir(x, hist)) == 1);
#if CTG_BOUNDS_CHECK
  CHECK_THROWS_WITH_AS(k(x, hist),
                       "kernel 'past_the_end': index (5) is out of range for parameter #1 (field 'hist', shape (2))",
                       ctg::index_error);
#endif
}

TEST_CASE("an accumulation into an out-of-range element that never runs reports nothing") {
  ctg::field<double, 1, ctg::grad> x({64 * 1024}, {.name = "x"}), hist({2}, {.name = "hist"});
  x.fill(1.0);
  auto k = ctg::kernel<"never">([](auto x, auto hist) {
    return ctg::range(x.size(), [=](auto i) { return ctg::if_(x[i] > 100.0, hist(5_c) += x[i]); });
  });
  CHECK(privatized_count(k.ir(x, hist)) == 1);
  k(x, hist);
  hist.grad().fill(1.0);
  k.grad(x, hist);
  CHECK(hist.at(0) == 0.0);
  CHECK(x.grad().at(7) == 0.0);
}

TEST_CASE("the reverse pass of fixed-element reductions: seeds read once, signs and sums exact") {
  pool_threads threads(4);
  int const n = 30011;
  ctg::field<double, 1, ctg::grad> x(n);
  ctg::field<double, 0, ctg::grad> squares, negated;
  ctg::field<double, 1, ctg::grad> pair(2);
  for (int i = 0; i < n; ++i) x.at(i) = double(i % 11) - 5.0;
  auto k = ctg::kernel<"reduce">([](auto x, auto squares, auto negated, auto pair) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(squares() += x[i] * x[i], negated() -= 3.0 * x[i], pair(1_c) += x[i] * x[i] * x[i]);
    });
  });
  k(x, squares, negated, pair);
  squares.grad().at() = 0.5;
  negated.grad().at() = 2.0;
  pair.grad().at(0) = 100.0;  // never accumulated into: no contribution
  pair.grad().at(1) = -1.0;
  k.grad(x, squares, negated, pair);
  // d/dx_i: 0.5 * 2 x_i - 2 * 3 - 3 x_i^2, exact in double for these small integers.
  for (int i = 0; i < n; i += 97) {
    double const xi = x.at(i);
    CHECK(x.grad().at(i) == xi - 6.0 - 3.0 * xi * xi);
  }
  // Accumulations do not clear their destinations' gradients.
  CHECK(squares.grad().at() == 0.5);
  CHECK(pair.grad().at(1) == -1.0);
}

TEST_CASE("+= into elements each iteration owns: plain adds, exact on many threads") {
  pool_threads threads(4);
  int const n = 40009, rows = 37, cols = 53;
  ctg::field<double, 1> x(n), y(n);
  ctg::field<double, 2> m(rows, cols);
  for (int i = 0; i < n; ++i) {
    x.at(i) = double(i % 13);
    y.at(i) = 1.0;
  }
  auto k = ctg::kernel<"owned">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(y[i] += x[i] * 2.0, ctg::range(3, [=](auto j) { return y[i] -= ctg::cast<double>(j); }));
    });
  });
  k(x, y);
  for (int i = 0; i < n; i += 101) CHECK(y.at(i) == 1.0 + 2.0 * double(i % 13) - 3.0);
  auto grid = ctg::kernel<"owned2d">([](auto m) {
    return ctg::ndrange(m.shape(0_c), m.shape(1_c), [=](auto i, auto j) {
      return ctg::block(m(i, j) += ctg::cast<double>(i * 100 + j), m(i, j) += 0.5);
    });
  });
  grid(m);
  grid(m);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) CHECK(m.at(i, j) == 2.0 * (double(i * 100 + j) + 0.5));
}

TEST_CASE("a kernel that is not differentiated scatters into a gradient buffer atomically") {
  // A hand-written adjoint (ctg::forward_only) adding into x.grad() through an
  // index field: the field's values are never touched, but its gradient buffer
  // is hit by many iterations. Counted in integers-as-doubles, so any lost
  // update shows.
  pool_threads threads(4);
  int const n = 1 << 21, bins = 8;
  ctg::field<double, 1, ctg::grad> x({bins}, {.name = "x"});
  ctg::field<int, 1> bin({n}, {.name = "bin"});
  for (int i = 0; i < n; ++i) bin.at(i) = i % bins;
  auto scatter = ctg::kernel<"scatter_into_grad", ctg::forward_only>([](auto x, auto bin) {
    return ctg::range(bin.size(), [=](auto i) { return x.grad()[bin[i]] += 1.0; });
  });
  for (int round = 0; round < 3; ++round) {
    x.grad().fill(0.0);
    scatter(x, bin);
    for (int b = 0; b < bins; ++b) CHECK(x.grad().at(b) == double(n / bins));
  }
}
