// The aliasing check (CTG-AD-012) on views: same memory, overlapping memory,
// a view of an owning field's memory.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <vector>

namespace {
struct particle {
  Eigen::Vector3d x;
  Eigen::Vector3d v;
  double m;
};
auto drift = ctg::kernel<"drift">([](auto x, auto v, double dt) {
  return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + dt * v[i]; });
});
}  // namespace

TEST_CASE("the aliasing check sees through views of the same memory") {
  std::vector<particle> particles(3, particle{Eigen::Vector3d::Ones(), Eigen::Vector3d::Ones(), 1.0});
  auto x = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
  auto y = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "y"});
  CHECK_THROWS_WITH_AS(drift.grad(x, y, 0.1), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
  // Different members of one struct array do not alias.
  auto v = ctg::view_member<ctg::grad>(particles, &particle::v, {.name = "v"});
  CHECK_NOTHROW(drift.grad(x, v, 0.1));

  // A view of an owning field's memory aliases the field.
  ctg::field<double, 1, ctg::grad> owned({4}, {.name = "owned"});
  auto over = ctg::view<ctg::grad>(owned.data() + 1, {2}, {.name = "over"});
  auto copy = ctg::kernel<"copy">([](auto a, auto b) { return ctg::range(b.size(), [=](auto i) { return b[i] = a[i]; }); });
  CHECK_THROWS_WITH_AS(copy.grad(owned, over), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
}

