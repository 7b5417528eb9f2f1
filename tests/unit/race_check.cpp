// The race-checking backend (ctg::race_check): a parallel offload whose
// results depend on the order of its iterations fails with CTG-LAUNCH-002,
// naming the kernel, the offload, the field and the first element that
// differs, and leaves the fields as they were; kernels whose iterations are
// independent run unchanged, accumulations included.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <vector>

using namespace ctg::literals;

namespace {
std::string launch_message(auto&& launch) {
  try {
    launch();
  } catch (ctg::launch_error const& e) {
    return e.what();
  }
  return {};
}
}  // namespace

TEST_CASE("race check: an iteration reading what the previous one wrote is reported with the first element") {
  constexpr int n = 8;
  ctg::field<double, 1> a({n}, {.name = "chain"});
  a.fill(0.0);
  // In order: a[i + 1] = a[i] + 1 gives 0, 1, 2, ...; reversed: 0, 1, 1, ...
  auto k = ctg::kernel<"chain_shift", ctg::race_check>(
      [](auto a) { return ctg::range(a.shape(0_c) - 1, [=](auto i) { return a[i + 1] = a[i] + 1.0; }); });
  std::string const what = launch_message([&] { k(a); });
  CAPTURE(what);
  CHECK(what.find("CTG-LAUNCH-002") != std::string::npos);
  CHECK(what.find("'chain_shift'") != std::string::npos);
  CHECK(what.find("'chain'") != std::string::npos);
  CHECK(what.find("offload #0") != std::string::npos);
  CHECK(what.find("forward pass") != std::string::npos);
  // The first element two orders disagree on is a[2]: 2 in order, 1 reversed.
  CHECK(what.find("at (2) (2 against 1)") != std::string::npos);
  for (int i = 0; i < n; ++i) CHECK(a.at(i) == 0.0);  // nothing lost
}

TEST_CASE("race check: the second of two offloads, on a 2-D field") {
  ctg::field<int, 2> g({3, 4}, {.name = "grid"});
  ctg::field<int, 1> out({4}, {.name = "out"});
  g.fill(1);
  // Offload #0 is independent; offload #1 makes each column read the next
  // one, which another iteration writes.
  auto k = ctg::kernel<"columns", ctg::race_check>([](auto g, auto out) {
    return ctg::block(ctg::range(4, [=](auto j) { return out[j] = g(0, j); }),
                      ctg::range(3, [=](auto j) { return g(1_c, j) = g(1_c, j + 1) + g(2_c, j); }));
  });
  std::string const what = launch_message([&] { k(g, out); });
  CAPTURE(what);
  CHECK(what.find("offload #1") != std::string::npos);
  CHECK(what.find("'grid'") != std::string::npos);
  CHECK(what.find("at (1, ") != std::string::npos);
}

TEST_CASE("race check: independent iterations and accumulations run as without it") {
  constexpr int n = 1000;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> loss(ctg::field_options{.name = "loss"});
  ctg::field<int, 1> hist({4}, {.name = "hist"});
  std::vector<double> xv(n);
  for (int i = 0; i < n; ++i) xv[std::size_t(i)] = std::sin(0.37 * i) + 0.1 * i;
  x.copy_from(xv);
  hist.fill(0);
  auto k = ctg::kernel<"independent", ctg::race_check>([](auto x, auto y, auto loss) {
    return ctg::range(x.shape(0_c), [=](auto i) { return ctg::block(y[i] = x[i] * x[i], loss() += ctg::sin(x[i])); });
  });
  auto count = ctg::kernel<"histogram", ctg::race_check>(
      [](auto hist, auto m) { return ctg::range(m, [=](auto i) { return hist[i % 4] += 1; }); });
  CHECK_NOTHROW(k(x, y, loss));
  CHECK_NOTHROW(count(hist, n));
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(y.at(i) == xv[std::size_t(i)] * xv[std::size_t(i)]);
    sum += std::sin(xv[std::size_t(i)]);
  }
  CHECK(loss.at() == doctest::Approx(sum).epsilon(1e-12));
  for (int b = 0; b < 4; ++b) CHECK(hist.at(b) == n / 4);

  // The adjoint runs in every order too; d loss / d x = cos x, d y / d x = 2 x.
  loss.grad().fill(1.0);
  y.grad().fill(0.5);
  CHECK_NOTHROW(k.grad(x, y, loss));
  for (int i = 0; i < n; ++i)
    CHECK(x.grad().at(i) == doctest::Approx(std::cos(xv[std::size_t(i)]) + xv[std::size_t(i)]).epsilon(1e-13));
}
