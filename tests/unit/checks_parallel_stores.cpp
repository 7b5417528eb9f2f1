// CTG-AD-013: iterations of a parallel loop that store into one element of a
// differentiable field. The forward pass keeps the last store; the adjoint
// cannot know which one that was. Proven conflicts are rejected (at compile
// time where the trip counts are known, at launch otherwise); stores the
// affine reasoning cannot judge keep their gradients, checked here against
// closed forms.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ctgrad/ctgrad.hpp>

#include "ad_test_support.hpp"

using namespace ctg::literals;

namespace {

using vec_t = ctg::field<double, 1, ctg::grad>;
using grid_t = ctg::field<double, 2, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;
using index_t = ctg::field<int, 1>;
using pair_t = ctg::field<Eigen::Vector2d, 1, ctg::grad>;

template <class K, class... A>
constexpr ctg::report report_of() {
  return K::template diagnose<A...>();
}

// The whole loop stores its squares into one element.
auto last_square = ctg::kernel<"last_square">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() = x[i] * x[i]; });
});
auto four_squares = ctg::kernel<"four_squares">([](auto x, auto loss) {
  return ctg::range(4, [=](auto i) { return loss() = x[i] * x[i]; });
});
auto one_square = ctg::kernel<"one_square">([](auto x, auto loss) {
  return ctg::range(1, [=](auto i) { return loss() = x[i] * x[i]; });
});
// Iteration i stores y[i] and y[i + 1]: iteration i + 1 stores y[i + 1] too.
auto both_neighbours = ctg::kernel<"both_neighbours">([](auto x, auto y) {
  return ctg::range(x.size() - 1, [=](auto i) { return ctg::block(y[i] = x[i], y[i + 1] = 2.0 * x[i]); });
});
// A store against an accumulation into the same element by another iteration.
auto store_and_add = ctg::kernel<"store_and_add">([](auto x, auto y) {
  return ctg::range(x.size() - 1, [=](auto i) { return ctg::block(y[i] = x[i], y[i + 1] += x[i]); });
});
// Even and odd slots: no two iterations meet.
auto interleaved = ctg::kernel<"interleaved">([](auto x, auto y) {
  return ctg::range(x.size(), [=](auto i) { return ctg::block(y[2 * i] = x[i], y[2 * i + 1] = x[i] * x[i]); });
});
// An ndrange over (i, j) storing into row i only.
auto row_of_grid = ctg::kernel<"row_of_grid">([](auto g, auto y) {
  return ctg::ndrange(g.shape(0_c), g.shape(1_c), [=](auto i, auto j) { return y[i] = g(i, j); });
});
auto whole_grid = ctg::kernel<"whole_grid">([](auto g, auto h) {
  return ctg::ndrange(g.shape(0_c), g.shape(1_c), [=](auto i, auto j) { return h(i, j) = 3.0 * g(i, j); });
});
// Stores inside a nested loop are not judged (their ranges may depend on
// the iteration): segments of a CSR layout, each stored once.
auto segments = ctg::kernel<"segments">([](auto x, auto start, auto w, auto y) {
  return ctg::range(w.size(), [=](auto s) {
    return ctg::range(start[s], start[s + 1], [=](auto j) { return y[j] = x[j] * w[s]; });
  });
});
// One component of one element, from every iteration.
auto one_component = ctg::kernel<"one_component">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return v[0][0_c] = x[i]; });
});
auto own_components = ctg::kernel<"own_components">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return ctg::block(v[i][0_c] = x[i], v[i][1_c] = x[i] * x[i]); });
});

// Not judged: a store under a condition on the index, a store through an
// index field, and the serial loop, whose adjoint runs the iterations in
// reverse order.
auto square_of_last = ctg::kernel<"square_of_last">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return ctg::if_(i == x.size() - 1, loss() = x[i] * x[i]); });
});
auto permuted = ctg::kernel<"permuted">([](auto x, auto p, auto y) {
  return ctg::range(x.size(), [=](auto i) { return y[p[i]] = x[i] * x[i]; });
});
auto serial_last = ctg::kernel<"serial_last">([](auto x, auto loss) {
  return ctg::serial_range(x.size(), [=](auto i) { return loss() = x[i] * x[i]; });
});

vec_t values(std::initializer_list<double> v, char const* name) {
  vec_t f({int(v.size())}, {.name = name});
  f.copy_from(std::vector<double>(v));
  return f;
}

// The message of the autodiff_error that fn throws ("" when none).
template <class Fn>
std::string error_of(Fn&& fn) {
  return ad_test::message_of<ctg::autodiff_error>(fn);
}

}  // namespace

TEST_CASE("CTG-AD-013 at compile time: a store every iteration repeats, with a known trip count") {
  constexpr auto four = report_of<decltype(four_squares), vec_t, scal_t>();
  CHECK(four.has(ctg::finding::parallel_store_conflict));
  CHECK(four.items[0].param == 1);
  // One iteration: nothing to conflict with.
  CHECK(report_of<decltype(one_square), vec_t, scal_t>().ok());
  // Disjoint for any extent, so decided now.
  constexpr auto own = report_of<decltype(whole_grid), grid_t, grid_t>();
  CHECK(own.ok());
  CHECK(own.undecided == 0);
  constexpr auto slots = report_of<decltype(interleaved), vec_t, vec_t>();
  CHECK(slots.ok());
  CHECK(slots.undecided == 0);
  constexpr auto components = report_of<decltype(own_components), vec_t, pair_t>();
  CHECK(components.ok());
  CHECK(components.undecided == 0);
}

TEST_CASE("CTG-AD-013 at launch: the conflict depends on the extents") {
  scal_t loss({.name = "loss"});
  // Undecided until the extents are known.
  CHECK(report_of<decltype(last_square), vec_t, scal_t>().ok());
  CHECK(report_of<decltype(last_square), vec_t, scal_t>().undecided > 0);

  vec_t single = values({0.5}, "single");
  last_square(single, loss);
  loss.grad().at() = 1.0;
  last_square.grad(single, loss);
  CHECK(single.grad().at(0) == doctest::Approx(1.0));

  vec_t x = values({0.1, 0.2, 0.3}, "x");
  last_square(x, loss);
  loss.grad().at() = 1.0;
  std::string const what = error_of([&] { last_square.grad(x, loss); });
  CHECK(what.find("CTG-AD-013") != std::string::npos);
  CHECK(what.find("kernel 'last_square'") != std::string::npos);
  CHECK(what.find("field 'loss'") != std::string::npos);
  CHECK(x.grad().at(0) == 0.0);  // the adjoint did not run
  CHECK(x.grad().at(2) == 0.0);

  // Recorded on a tape, the forward launch is refused.
  scal_t taped_loss({.name = "taped_loss"});
  std::string taped;
  {
    ctg::tape tape(taped_loss);
    taped = error_of([&] { last_square(x, loss); });
  }
  CHECK(taped.find("CTG-AD-013") != std::string::npos);
  CHECK(taped.find("recorded on a tape") != std::string::npos);
}

TEST_CASE("CTG-AD-013 at launch: neighbours, a store against an accumulation, rows, a component") {
  vec_t x = values({0.1, 0.2, 0.3, 0.4}, "x");
  vec_t y({8}, {.name = "y"});
  grid_t g({3, 2}, {.name = "g"});
  pair_t v({4}, {.name = "v"});
  CHECK(error_of([&] { both_neighbours.grad(x, y); }).find("CTG-AD-013") != std::string::npos);
  CHECK(error_of([&] { store_and_add.grad(x, y); }).find("CTG-AD-013") != std::string::npos);
  CHECK(error_of([&] { row_of_grid.grad(g, y); }).find("field 'y'") != std::string::npos);
  CHECK(error_of([&] { one_component.grad(x, v); }).find("field 'v'") != std::string::npos);
  // The same kernels where no two iterations meet run.
  vec_t two = values({0.1, 0.2}, "two");
  y.grad().fill(1.0);
  CHECK(error_of([&] { both_neighbours.grad(two, y); }).empty());  // one iteration
  CHECK(two.grad().at(0) == doctest::Approx(3.0));
  grid_t column({3, 1}, {.name = "column"});
  CHECK(error_of([&] { row_of_grid.grad(column, y); }).empty());
}

TEST_CASE("stores CTG-AD-013 does not judge keep exact gradients") {
  vec_t x = values({0.3, -0.7, 1.1, 0.5}, "x");
  scal_t loss({.name = "loss"});

  // Two segments, [0, 1) and [1, 4): y[j] = x[j] w[s].
  index_t start({3}, {.name = "start"});
  start.copy_from(std::vector<int>{0, 1, 4});
  vec_t w = values({2.0, -3.0}, "w");
  vec_t ys({4}, {.name = "ys"});
  segments(x, start, w, ys);
  ys.grad().fill(1.0);
  segments.grad(x, start, w, ys);
  CHECK(ys.at(2) == doctest::Approx(-3.3));
  CHECK(x.grad().at(0) == doctest::Approx(2.0));
  CHECK(x.grad().at(3) == doctest::Approx(-3.0));
  CHECK(w.grad().at(0) == doctest::Approx(0.3));
  CHECK(w.grad().at(1) == doctest::Approx(-0.7 + 1.1 + 0.5));
  x.zero_grad();

  square_of_last(x, loss);
  CHECK(loss.at() == doctest::Approx(0.25));
  loss.grad().at() = 1.0;
  square_of_last.grad(x, loss);
  CHECK(x.grad().at(0) == 0.0);
  CHECK(x.grad().at(2) == 0.0);
  CHECK(x.grad().at(3) == doctest::Approx(1.0));

  x.zero_grad();
  serial_last(x, loss);
  CHECK(loss.at() == doctest::Approx(0.25));
  loss.grad().at() = 2.0;
  serial_last.grad(x, loss);
  CHECK(x.grad().at(0) == 0.0);
  CHECK(x.grad().at(1) == 0.0);
  CHECK(x.grad().at(2) == 0.0);
  CHECK(x.grad().at(3) == doctest::Approx(2.0));

  // A permutation: every slot is stored once.
  index_t p({4}, {.name = "p"});
  p.copy_from(std::vector<int>{2, 0, 3, 1});
  vec_t y({4}, {.name = "y"});
  permuted(x, p, y);
  CHECK(y.at(2) == doctest::Approx(0.09));
  x.zero_grad();
  y.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  permuted.grad(x, p, y);
  double const want[] = {2 * 0.3 * 3.0, 2 * -0.7 * 1.0, 2 * 1.1 * 4.0, 2 * 0.5 * 2.0};
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(want[i]));
}

// ---- coefficients of one element ----------------------------------------------------------------
// Accesses through components with compile-time indices (v[i][0_c]) touch one
// coefficient: two of them that name different coefficients never meet, in
// this rule (CTG-AD-013) and in CTG-AD-002 and CTG-AD-004.
namespace {
auto square_into_second = ctg::kernel<"square_into_second">([](auto w) {
  return ctg::range(w.size(), [=](auto i) { return w[i][1_c] = w[i][0_c] * w[i][0_c]; });
});
auto square_in_place = ctg::kernel<"square_in_place">([](auto w) {
  return ctg::range(w.size(), [=](auto i) { return w[i][1_c] = w[i][1_c] * w[i][1_c]; });
});
auto from_previous = ctg::kernel<"from_previous">([](auto w) {
  return ctg::range(1, w.size(), [=](auto i) { return w[i][1_c] = ctg::sin(w[i - 1][0_c]) * w[i][0_c]; });
});
auto split_pairs = ctg::kernel<"split_pairs">([](auto x, auto v) {
  return ctg::range(x.size() - 1, [=](auto i) { return ctg::block(v[i][0_c] = x[i], v[i + 1][1_c] = 2.0 * x[i]); });
});
auto first_twice = ctg::kernel<"first_twice">([](auto x, auto v) {
  return ctg::range(x.size() - 1, [=](auto i) { return ctg::block(v[i][0_c] = x[i], v[i + 1][0_c] = 2.0 * x[i]); });
});
}  // namespace

TEST_CASE("a read of one coefficient and a write of another: accepted, with the closed-form gradient") {
  CHECK(report_of<decltype(square_into_second), pair_t>().ok());
  CHECK(report_of<decltype(from_previous), pair_t>().ok());
  // The same coefficient read, then overwritten: still CTG-AD-004.
  CHECK(report_of<decltype(square_in_place), pair_t>().has(ctg::finding::overwritten_after_read));

  pair_t w({3}, {.name = "w"});
  for (int i = 0; i < 3; ++i) w.at(i) = Eigen::Vector2d(0.5 + i, -1.0);
  square_into_second(w);
  w.grad().fill(Eigen::Vector2d(0.25, 1.0));
  square_into_second.grad(w);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(w.at(i)(1) == doctest::Approx((0.5 + i) * (0.5 + i)));
    CHECK(w.grad().at(i)(0) == doctest::Approx(0.25 + 2 * (0.5 + i)));
    CHECK(w.grad().at(i)(1) == 0.0);
  }
}

TEST_CASE("one iteration writes a coefficient the next one reads another of: the parallel adjoint is exact") {
  int const n = 5000;  // enough iterations for the pool's threads
  pair_t w({n}, {.name = "w"});
  auto first = [](int i) { return 0.3 + 1e-4 * i; };
  for (int i = 0; i < n; ++i) w.at(i) = Eigen::Vector2d(first(i), -0.2);
  from_previous(w);
  w.grad().fill(Eigen::Vector2d(0.0, 1.0));
  from_previous.grad(w);
  // w[i][1] = sin(w[i - 1][0]) w[i][0] for i >= 1, seeds 1 on every second coefficient.
  for (int j : {0, 1, 2047, 2048, 4998, 4999}) {
    CAPTURE(j);
    double want = 0;
    if (j + 1 < n) want += std::cos(first(j)) * first(j + 1);
    if (j >= 1) want += std::sin(first(j - 1));
    CHECK(w.grad().at(j)(0) == doctest::Approx(want).epsilon(1e-12));
    CHECK(w.grad().at(j)(1) == (j == 0 ? 1.0 : 0.0));
  }
}

TEST_CASE("CTG-AD-013 on coefficients: the same coefficient from two iterations conflicts, two different ones do not") {
  CHECK(report_of<decltype(split_pairs), vec_t, pair_t>().ok());
  CHECK(report_of<decltype(split_pairs), vec_t, pair_t>().undecided == 0);
  vec_t x = values({0.1, 0.2, 0.3, 0.4}, "x");
  pair_t v({4}, {.name = "v"});
  CHECK(error_of([&] { first_twice.grad(x, v); }).find("CTG-AD-013") != std::string::npos);
  split_pairs(x, v);
  v.grad().fill(Eigen::Vector2d(1.0, 0.5));
  split_pairs.grad(x, v);
  for (int i = 0; i < 3; ++i) CHECK(x.grad().at(i) == doctest::Approx(1.0 + 2.0 * 0.5));
}

// One index on a matrix is a place in its storage (Eigen's coeff(k)): m[i][2_c]
// of a column-major 2x2 matrix is m[i](0_c, 1_c).
namespace {
using mat_t = ctg::field<Eigen::Matrix2d, 1, ctg::grad>;
auto same_coefficient = ctg::kernel<"same_coefficient">([](auto m) {
  return ctg::range(m.size(), [=](auto i) { return m[i](0_c, 1_c) = m[i][2_c] * m[i][2_c]; });
});
auto other_coefficient = ctg::kernel<"other_coefficient">([](auto m) {
  return ctg::range(m.size(), [=](auto i) { return m[i](1_c, 0_c) = m[i][2_c] * m[i][2_c]; });
});
}  // namespace

TEST_CASE("a coefficient named by one index and by two is one coefficient") {
  CHECK(report_of<decltype(same_coefficient), mat_t>().has(ctg::finding::overwritten_after_read));
  CHECK(report_of<decltype(other_coefficient), mat_t>().ok());
  mat_t m({2}, {.name = "m"});
  Eigen::Matrix2d a;
  a << 0.5, 1.5, -2.0, 0.25;  // a(0, 1) = 1.5 is m[i][2_c]
  m.at(0) = a;
  m.at(1) = 2.0 * a;
  other_coefficient(m);
  CHECK(m.at(0)(1, 0) == doctest::Approx(2.25));
  m.grad().fill(Eigen::Matrix2d::Constant(1.0));
  other_coefficient.grad(m);
  for (int i = 0; i < 2; ++i) {
    CAPTURE(i);
    double const c = (i + 1) * 1.5;
    CHECK(m.grad().at(i)(0, 1) == doctest::Approx(1.0 + 2 * c));
    CHECK(m.grad().at(i)(1, 0) == 0.0);
    CHECK(m.grad().at(i)(0, 0) == 1.0);
  }
}

// ---- stores the types cannot judge, checked as the adjoint runs ---------------------------------
// A store at an index read from a field, under a condition, or in a nested
// loop claims its element for its iteration when the adjoint runs it on the
// host: a second iteration on the same element (or coefficient) fails the
// launch with CTG-AD-013 naming the field and the element, where its
// gradient went to whichever iteration the adjoint ran first.
namespace {
auto last_two_squares = ctg::kernel<"last_two_squares">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return ctg::if_(i >= x.size() - 2, loss() = x[i] * x[i]); });
});
// Segments [begin[s], end[s]) of y, each scaled by w[s].
auto ranges = ctg::kernel<"ranges">([](auto x, auto begin, auto end, auto w, auto y) {
  return ctg::range(w.size(), [=](auto s) {
    return ctg::range(begin[s], end[s], [=](auto j) { return y[j] = x[j] * w[s]; });
  });
});
// Even iterations store the first coefficient of v[h[i]], odd ones the second.
auto halves = ctg::kernel<"halves">([](auto x, auto h, auto v) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::if_(i % 2 == 0, v[h[i]][0_c] = x[i], v[h[i]][1_c] = 2.0 * x[i]);
  });
});
// Two writes of one field, each alone one element per iteration or
// unjudged, that meet across iterations: y[i + 1] of iteration i is the
// conditional y[i] of iteration i + 1; y[i] against y[p[i]]; a store against
// another iteration's accumulation.
auto shifted_pair = ctg::kernel<"shifted_pair">([](auto x, auto y) {
  return ctg::range(x.size() - 1, [=](auto i) {
    return ctg::block(ctg::if_(x[i] > 0.0, y[i] = x[i] * x[i]), y[i + 1] = 3.0 * x[i]);
  });
});
auto own_and_permuted = ctg::kernel<"own_and_permuted">([](auto x, auto p, auto y) {
  return ctg::range(x.size() / 2, [=](auto i) { return ctg::block(y[i] = x[i], y[p[i]] = 2.0 * x[i]); });
});
auto store_and_scatter = ctg::kernel<"store_and_scatter">([](auto x, auto p, auto q, auto y) {
  return ctg::range(x.size(), [=](auto i) { return ctg::block(y[p[i]] = x[i], y[q[i]] += x[i] * x[i]); });
});
// Elements reset to zero (a value without a gradient) at indices that may
// repeat, then added into; and the same with the addition at other indices.
auto reset_and_add = ctg::kernel<"reset_and_add">([](auto x, auto p, auto q, auto y, auto z) {
  return ctg::range(x.size(), [=](auto i) {
    return ctg::block(y[p[i]] = 0.0, y[q[i]] += x[i] * x[i], z[i] = 3.0 * x[i]);
  });
});
// Each iteration reads the element it then resets: two iterations on one
// element see the reset or not by their order.
auto read_then_reset = ctg::kernel<"read_then_reset">([](auto y, auto p, auto z) {
  return ctg::range(z.size(), [=](auto i) { return ctg::block(z[i] = 2.0 * y[p[i]], y[p[i]] = 0.0); });
});
// Rows of g stored into the rows of out that p names.
auto permuted_rows = ctg::kernel<"permuted_rows">([](auto g, auto p, auto out) {
  return ctg::ndrange(g.shape(0_c), g.shape(1_c), [=](auto i, auto j) { return out(p[i], j) = g(i, j) * g(i, j); });
});
}  // namespace

TEST_CASE("CTG-AD-013 as the adjoint runs: two iterations of an unjudged store on one element") {
  vec_t x = values({0.3, -0.7, 1.1, 0.5}, "x");
  index_t p({4}, {.name = "p"});
  p.copy_from(std::vector<int>{0, 0, 1, 1});
  vec_t y({4}, {.name = "y"});
  // y[0] and y[1] are each stored by two iterations.
  permuted(x, p, y);
  y.grad().fill(1.0);
  std::string const message = error_of([&] { permuted.grad(x, p, y); });
  CHECK(message.find("CTG-AD-013") != std::string::npos);
  CHECK(message.find("kernel 'permuted'") != std::string::npos);
  CHECK(message.find("field 'y'") != std::string::npos);
  bool const names_element = message.find("element (0)") != std::string::npos ||
                             message.find("element (1)") != std::string::npos;
  CHECK(names_element);

  // Through a tape: the recorded launch's adjoint fails the same way.
  scal_t loss({.name = "loss"});
  auto total = ctg::kernel<"total">([](auto y, auto loss) {
    return ctg::range(y.size(), [=](auto i) { return loss() += y[i]; });
  });
  std::string const taped = error_of([&] {
    ctg::tape t(loss);
    permuted(x, p, y);
    total(y, loss);
    t.backward();
  });
  CHECK(taped.find("CTG-AD-013") != std::string::npos);
  CHECK(taped.find("kernel 'permuted'") != std::string::npos);

  // A condition two iterations pass.
  last_two_squares(x, loss);
  loss.grad().at() = 1.0;
  CHECK(error_of([&] { last_two_squares.grad(x, loss); }).find("CTG-AD-013") != std::string::npos);

  // Segments that overlap at y[2].
  index_t begin({2}, {.name = "begin"}), end({2}, {.name = "end"});
  begin.copy_from(std::vector<int>{0, 2});
  end.copy_from(std::vector<int>{3, 4});
  vec_t w = values({2.0, -3.0}, "w");
  ranges(x, begin, end, w, y);
  y.grad().fill(1.0);
  std::string const overlap = error_of([&] { ranges.grad(x, begin, end, w, y); });
  CHECK(overlap.find("CTG-AD-013") != std::string::npos);
  CHECK(overlap.find("element (2)") != std::string::npos);

  // Writes that meet only across two statements. x[1] = -0.7 skips its
  // conditional store, so only iteration 1's y[2] meets iteration 2's
  // conditional y[2] (x[2] = 1.1 > 0).
  shifted_pair(x, y);
  std::string const pair = error_of([&] { shifted_pair.grad(x, y); });
  CHECK(pair.find("CTG-AD-013") != std::string::npos);
  CHECK(pair.find("element (2)") != std::string::npos);
  // Iteration 1 stores y[1]; iteration 0 stores y[p[0]] = y[1] too.
  index_t q({4}, {.name = "q"});
  q.copy_from(std::vector<int>{1, 3, 0, 0});
  own_and_permuted(x, q, y);
  CHECK(error_of([&] { own_and_permuted.grad(x, q, y); }).find("element (1)") != std::string::npos);
  // Stores at a permutation, and another iteration's addition into y[2].
  index_t r({4}, {.name = "r"});
  p.copy_from(std::vector<int>{2, 0, 3, 1});
  r.copy_from(std::vector<int>{0, 2, 0, 1});
  store_and_scatter(x, p, r, y);
  CHECK(error_of([&] { store_and_scatter.grad(x, p, r, y); }).find("CTG-AD-013") != std::string::npos);
}

TEST_CASE("unjudged stores of one element each: claimed without a failure, with the closed-form gradient") {
  vec_t x = values({0.3, -0.7, 1.1, 0.5}, "x");

  // Segments that meet without overlapping.
  index_t begin({2}, {.name = "begin"}), end({2}, {.name = "end"});
  begin.copy_from(std::vector<int>{0, 2});
  end.copy_from(std::vector<int>{2, 4});
  vec_t w = values({2.0, -3.0}, "w");
  vec_t y({4}, {.name = "y"});
  ranges(x, begin, end, w, y);
  y.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  ranges.grad(x, begin, end, w, y);
  CHECK(x.grad().at(1) == doctest::Approx(2.0 * 2.0));
  CHECK(x.grad().at(2) == doctest::Approx(-3.0 * 3.0));
  CHECK(w.grad().at(0) == doctest::Approx(0.3 * 1.0 - 0.7 * 2.0));
  CHECK(w.grad().at(1) == doctest::Approx(1.1 * 3.0 + 0.5 * 4.0));

  // Each iteration adds into the element it stored, and only into it.
  x.zero_grad();
  index_t p({4}, {.name = "p"});
  p.copy_from(std::vector<int>{2, 0, 3, 1});
  store_and_scatter(x, p, p, y);
  CHECK(y.at(2) == doctest::Approx(0.3 + 0.09));
  y.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  store_and_scatter.grad(x, p, p, y);
  // y[p[i]] = x[i] + x[i]^2: the gradient of x[i] is (1 + 2 x[i]) y.grad[p[i]].
  double const seeds[] = {3.0, 1.0, 4.0, 2.0};
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx((1.0 + 2.0 * x.at(i)) * seeds[i]));

  // Resets and additions at each iteration's own element: exact.
  x.zero_grad();
  vec_t z({4}, {.name = "z"});
  index_t halves_of({4}, {.name = "halves_of"});
  halves_of.copy_from(std::vector<int>{0, 0, 1, 1});
  index_t own({4}, {.name = "own"});
  own.copy_from(std::vector<int>{0, 1, 2, 3});
  reset_and_add(x, own, own, y, z);
  y.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  z.grad().fill(1.0);
  reset_and_add.grad(x, own, own, y, z);
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(2.0 * x.at(i) * (1.0 + i) + 3.0));
  x.zero_grad();
  reset_and_add(x, halves_of, own, y, z);  // resets repeat; each addition has an element of its own
  std::string const shared = error_of([&] { reset_and_add.grad(x, halves_of, own, y, z); });
  // Iteration 1 adds into y[1], which iteration 2 resets: the addition's
  // contribution depends on which ran first, so that is a conflict.
  CHECK(shared.find("CTG-AD-013") != std::string::npos);
  index_t last_two({4}, {.name = "last_two"});
  last_two.copy_from(std::vector<int>{2, 2, 3, 3});
  x.zero_grad();
  reset_and_add(x, last_two, own, y, z);  // y[2] and y[3] reset twice, added into by iterations 2 and 3
  CHECK(error_of([&] { reset_and_add.grad(x, last_two, own, y, z); }).find("CTG-AD-013") != std::string::npos);
  index_t first_two({4}, {.name = "first_two"});
  first_two.copy_from(std::vector<int>{0, 0, 1, 1});
  index_t into_last({4}, {.name = "into_last"});
  into_last.copy_from(std::vector<int>{3, 3, 2, 2});
  x.zero_grad();
  reset_and_add(x, first_two, into_last, y, z);  // resets of y[0], y[1] shared; additions into y[2], y[3]
  y.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  z.grad().fill(1.0);  // each adjoint of z's store took its seed
  reset_and_add.grad(x, first_two, into_last, y, z);
  double const into[] = {4.0, 4.0, 3.0, 3.0};
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(2.0 * x.at(i) * into[i] + 3.0));
  CHECK(y.grad().at(0) == 0.0);
  CHECK(y.grad().at(1) == 0.0);

  // A read of the element before its reset: exact at a permutation, an
  // error where two iterations share the element (the second reads 0).
  vec_t u = values({0.5, -1.5, 2.5, 4.0}, "u");
  vec_t zz({4}, {.name = "zz"});
  read_then_reset(u, p, zz);
  CHECK(zz.at(0) == doctest::Approx(2.0 * 2.5));
  zz.grad().copy_from(std::vector<double>{1.0, 2.0, 3.0, 4.0});
  read_then_reset.grad(u, p, zz);
  // u[p[i]] feeds zz[i]: p = (2, 0, 3, 1) puts zz.grad[1] on u[0], ...
  double const read_seeds[] = {2.0 * 2.0, 2.0 * 4.0, 2.0 * 1.0, 2.0 * 3.0};
  for (int e = 0; e < 4; ++e) CHECK(u.grad().at(e) == doctest::Approx(read_seeds[e]));
  read_then_reset(u, first_two, zz);
  CHECK(error_of([&] { read_then_reset.grad(u, first_two, zz); }).find("CTG-AD-013") != std::string::npos);

  // Two iterations on one element, each on its own coefficient.
  x.zero_grad();
  index_t h({4}, {.name = "h"});
  h.copy_from(std::vector<int>{0, 0, 1, 1});
  pair_t v({2}, {.name = "v"});
  halves(x, h, v);
  CHECK(v.at(0)(0) == doctest::Approx(0.3));
  CHECK(v.at(0)(1) == doctest::Approx(-1.4));
  v.grad().at(0) = Eigen::Vector2d(1.0, 10.0);
  v.grad().at(1) = Eigen::Vector2d(100.0, 1000.0);
  halves.grad(x, h, v);
  double const want[] = {1.0, 2.0 * 10.0, 100.0, 2.0 * 1000.0};
  for (int i = 0; i < 4; ++i) CHECK(x.grad().at(i) == doctest::Approx(want[i]));

  // Two axes: rows permuted, every (row, column) stored once; then a row twice.
  int const rows = 3, cols = 5;
  grid_t g({rows, cols}, {.name = "g"}), out({rows, cols}, {.name = "out"});
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) g.at(i, j) = 0.1 * (i + 1) - 0.05 * j;
  index_t rp({rows}, {.name = "rp"});
  rp.copy_from(std::vector<int>{2, 0, 1});
  permuted_rows(g, rp, out);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) out.grad().at(i, j) = 1.0 + i + 10.0 * j;
  permuted_rows.grad(g, rp, out);
  int const target[] = {2, 0, 1};
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK(g.grad().at(i, j) == doctest::Approx(2.0 * g.at(i, j) * (1.0 + target[i] + 10.0 * j)));
    }
  rp.copy_from(std::vector<int>{2, 0, 2});
  permuted_rows(g, rp, out);
  std::string const twice = error_of([&] { permuted_rows.grad(g, rp, out); });
  CHECK(twice.find("CTG-AD-013") != std::string::npos);
  CHECK(twice.find("field 'out'") != std::string::npos);
}

TEST_CASE("unjudged stores on the thread pool: a permutation of many elements, then one repeated index") {
  int const n = 1 << 15;
  vec_t x({n}, {.name = "x"}), y({n}, {.name = "y"});
  index_t p({n}, {.name = "p"});
  std::vector<int> reversed(n);
  for (int i = 0; i < n; ++i) {
    x.at(i) = 0.001 * (i % 97) - 0.03;
    reversed[std::size_t(i)] = n - 1 - i;
    y.grad().at(i) = 1.0 + (i % 7);
  }
  p.copy_from(reversed);
  permuted(x, p, y);
  permuted.grad(x, p, y);
  int wrong = 0;
  for (int i = 0; i < n; ++i)
    if (std::abs(x.grad().at(i) - 2.0 * x.at(i) * (1.0 + ((n - 1 - i) % 7))) > 1e-12) ++wrong;
  CHECK(wrong == 0);
  // The first and the last iteration, in different chunks, store y[0].
  reversed[0] = 0;
  p.copy_from(reversed);
  permuted(x, p, y);
  std::string const message = error_of([&] { permuted.grad(x, p, y); });
  CHECK(message.find("CTG-AD-013") != std::string::npos);
  CHECK(message.find("element (0)") != std::string::npos);
}
