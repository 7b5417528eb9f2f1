// The aliasing check (CTG-AD-012) on views: same memory, overlapping memory,
// a view of an owning field's memory. And writes that bypass ctgrad between
// a tape's launches (CTG-TAPE-014): into the memory under a view, through
// data(), inside a checkpointed rollout's steps; the same changes made so
// the tape sees them give the gradient a hand-written chain rule gives.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <cmath>
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

TEST_CASE("one field read under two names, or two views of it: the gradients add; a constant alias is refused") {
  std::vector<particle> particles(3, particle{Eigen::Vector3d::Ones(), Eigen::Vector3d::Ones(), 1.0});
  for (int i = 0; i < 3; ++i) particles[std::size_t(i)].x = Eigen::Vector3d(1.0 + i, -0.5 * i, 2.0);
  ctg::field<double, 1, ctg::grad> out({3}, {.name = "out"});
  auto dot = ctg::kernel<"dot">([](auto a, auto b, auto out) {
    return ctg::range(a.size(), [=](auto i) { return out[i] = ctg::dot(a[i], b[i]); });
  });
  std::vector<double> const seeds{1.0, -2.0, 0.5};
  // A strided view (a member of a struct array) passed twice: d(x.x)/dx = 2 x.
  auto x = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
  out.grad().copy_from(seeds);
  dot.grad(x, x, out);
  for (int i = 0; i < 3; ++i)
    CHECK((x.grad().at(i) - 2.0 * seeds[std::size_t(i)] * particles[std::size_t(i)].x).norm() < 1e-14);
  // Two views of the same memory are one storage with one gradient: both
  // names read the whole derivative, 2 s x.
  auto y = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "y"});
  x.zero_grad();
  out.grad().copy_from(seeds);
  dot.grad(x, y, out);
  for (int i = 0; i < 3; ++i) {
    Eigen::Vector3d const want = 2.0 * seeds[std::size_t(i)] * particles[std::size_t(i)].x;
    CHECK((x.grad().at(i) - want).norm() < 1e-14);
    CHECK((y.grad().at(i) - want).norm() < 1e-14);
  }
  // The same memory as a constant under one name and differentiable under
  // the other: the gradient through the constant would be lost.
  auto constant = ctg::view_member(particles, &particle::x, {.name = "constant"});
  CHECK_THROWS_WITH_AS(dot.grad(x, constant, out), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
  // One storage under two handle types (packed and strided, the same
  // layout): the launch gives a later name a buffer of its own only where
  // the types match, so this pair is refused rather than left to add into
  // one buffer under two names.
  std::vector<double> memory{0.5, -1.0, 2.0, 0.25};
  auto packed = ctg::view<ctg::grad>(memory.data(), {4}, {.name = "packed"});
  auto strided = ctg::strided_view<ctg::grad>(memory.data(), {4}, {std::int64_t(sizeof(double))}, {.name = "strided"});
  ctg::field<double, 1, ctg::grad> product({4}, {.name = "product"});
  auto mirrored = ctg::kernel<"mirrored">([](auto a, auto b, auto out) {
    return ctg::range(out.size(), [=](auto i) { return out[i] = a[i] * b[3 - i]; });
  });
  CHECK_THROWS_WITH_AS(mirrored.grad(packed, strided, product), doctest::Contains("CTG-AD-012"), ctg::autodiff_error);
  // The same handle type twice: the gradients add,
  // d(sum s_i a_i a_(3-i))/da_j = (s_j + s_(3-j)) a_(3-j).
  std::vector<double> const s{1.0, 2.0, -0.5, 4.0};
  product.grad().copy_from(s);
  mirrored.grad(packed, packed, product);
  for (int j = 0; j < 4; ++j)
    CHECK(packed.grad().at(j) ==
          doctest::Approx((s[std::size_t(j)] + s[std::size_t(3 - j)]) * memory[std::size_t(3 - j)]));
}

// With the host-write checks (the unit tests' setting; the sanitizer build
// turns them off with the index checks).
#if CTG_HOST_WRITE_CHECKS
namespace {
auto square = ctg::kernel<"square">([](auto x) { return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] * x[i]; }); });
auto pin_first = ctg::kernel<"pin_first">([](auto x, double value) { return ctg::range(1, [=](auto i) { return x[i] = value; }); });
auto weighted_sum = ctg::kernel<"weighted_sum">([](auto x, auto c, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += c[i] * x[i] * x[i]; });
});
// The fields of weighted_sum: x with a gradient, c without.
struct weighted_sum_fields {
  ctg::field<double, 1, ctg::grad> x{{3}, {.name = "x"}};
  ctg::field<double, 1> c{{3}, {.name = "c"}};
  weighted_sum_fields(std::vector<double> const& xs, std::vector<double> const& cs) {
    x.copy_from(xs);
    c.copy_from(cs);
  }
};
}  // namespace

TEST_CASE("writes that bypass ctgrad between a tape's launches raise CTG-TAPE-014, never a wrong gradient") {
  std::vector<double> const start{0.5, 1.5, 2.5};
  std::vector<double> const weights{1.0, 2.0, 3.0};
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss"});

  SUBCASE("into the memory under a view, before the next launch on it") {
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::tape tape(loss);
    square(x);
    memory[0] = 7.0;  // the program's own code, behind the view
    CHECK_THROWS_WITH_AS(square(x), doctest::Contains("CTG-TAPE-014 launch #2 (kernel 'square') uses field 'x'"),
                         ctg::autodiff_error);
  }
  SUBCASE("through data(), after the last launch: backward() refuses") {
    weighted_sum_fields fields(start, weights);
    auto& [x, c] = fields;  // c has no gradient: the adjoint needs its values
    ctg::tape tape(loss);
    weighted_sum(x, c, loss);
    c.data()[1] = 5.0;
    CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("CTG-TAPE-014 backward() uses field 'c'"),
                         ctg::autodiff_error);
  }
  SUBCASE("through data(), then a whole-field write: the copy the tape keeps would hold the changed values") {
    weighted_sum_fields fields(start, weights);
    auto& [x, c] = fields;
    ctg::tape tape(loss);
    weighted_sum(x, c, loss);  // its adjoint reads c
    c.data()[1] = 5.0;
    CHECK_THROWS_WITH_AS(c.fill(2.0), doctest::Contains("CTG-TAPE-014"), ctg::autodiff_error);
  }
  SUBCASE("into what a checkpointed rollout left, before the next launch") {
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::field<double, 1> c({3}, {.name = "c"});
    c.copy_from(weights);
    ctg::tape tape(loss);
    tape.rollout(4, [&](int) { square(x); }, ctg::checkpoint{.snapshots = 2});
    memory[2] = 0.5;
    CHECK_THROWS_WITH_AS(weighted_sum(x, c, loss), doctest::Contains("CTG-TAPE-014 launch #"), ctg::autodiff_error);
  }
  SUBCASE("into the memory under a view inside a checkpointed rollout's step, before the next launch on it") {
    // backward() would run the steps again from a snapshot without the write.
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::tape tape(loss);
    auto step = [&](int t) {
      square(x);
      if (t == 3) memory[0] *= 2.0;
    };
    CHECK_THROWS_WITH_AS(tape.rollout(6, step, ctg::checkpoint{.snapshots = 2}),
                         doctest::Contains("CTG-TAPE-014 launch #5 (kernel 'square') uses field 'x'"),
                         ctg::autodiff_error);
  }
  SUBCASE("into the memory under a view after a checkpointed rollout's last launch") {
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::tape tape(loss);
    auto step = [&](int t) {
      square(x);
      if (t == 5) memory[1] = 0.25;
    };
    CHECK_THROWS_WITH_AS(tape.rollout(6, step, ctg::checkpoint{.snapshots = 2}),
                         doctest::Contains("CTG-TAPE-014 the end of a checkpointed rollout uses field 'x'"),
                         ctg::autodiff_error);
  }
  SUBCASE("a field written through data() after its last launch, whose values no adjoint reads, is fine") {
    weighted_sum_fields fields(start, weights);
    auto& [x, c] = fields;
    ctg::tape tape(loss);
    weighted_sum(x, c, loss);  // its adjoint reads x: kept when square overwrites it
    square(x);
    x.data()[0] = 3.0;
    tape.backward();
    for (int i = 0; i < 3; ++i)  // d/dx c x^2 = 2 c x, at the values weighted_sum read
      CHECK(x.grad().at(i) == doctest::Approx(2.0 * weights[std::size_t(i)] * start[std::size_t(i)]));
  }
  SUBCASE("reading through data() and writing a field no adjoint depends on are fine") {
    weighted_sum_fields fields(start, weights);
    auto& [x, c] = fields;
    ctg::field<double, 1> unused({3}, {.name = "unused"});
    ctg::tape tape(loss);
    square(x);
    double seen = 0;
    for (int i = 0; i < 3; ++i) seen += x.data()[i];
    CHECK(seen == doctest::Approx(0.25 + 2.25 + 6.25));
    unused.data()[0] = 1.0;
    weighted_sum(x, c, loss);
    tape.backward();
    for (int i = 0; i < 3; ++i) {  // d/dx c x^4 = 4 c x^3
      double const v = start[std::size_t(i)];
      CHECK(x.grad().at(i) == doctest::Approx(4.0 * weights[std::size_t(i)] * v * v * v));
    }
  }
  SUBCASE("the same change made by a kernel: the gradient stops at the new value") {
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::field<double, 1> c({3}, {.name = "c"});
    c.copy_from(weights);
    ctg::tape tape(loss);
    square(x);
    pin_first(x, 7.0);
    square(x);
    weighted_sum(x, c, loss);
    tape.backward();
    CHECK(loss.at() == doctest::Approx(1.0 * 7.0 * 7.0 * 7.0 * 7.0 + 2.0 * std::pow(1.5, 8) + 3.0 * std::pow(2.5, 8)));
    CHECK(gradient[0] == 0.0);
    for (int i = 1; i < 3; ++i) {  // loss = c v^8 for the others: d/dv = 8 c v^7
      double const v = start[std::size_t(i)];
      CHECK(gradient[std::size_t(i)] == doctest::Approx(8.0 * weights[std::size_t(i)] * std::pow(v, 7)));
    }
  }
  SUBCASE("tape_options{.verify_contents = false} trusts the program") {
    std::vector<double> memory = start, gradient(3, 0.0);
    auto x = ctg::view<ctg::grad>(memory, {.name = "x", .grad = gradient.data()});
    ctg::tape tape(loss, ctg::tape_options{.verify_contents = false});
    square(x);
    memory[0] = 7.0;
    CHECK_NOTHROW(square(x));
  }
}

namespace {
// u(t + 1, i) = u(t, i)^2: k.grad at step t reads row t only.
auto square_step = ctg::kernel<"square_step">([](auto u, int t) {
  return ctg::range(u.shape(ctg::c<1>), [=](auto i) { return u(t + 1, i) = u(t, i) * u(t, i); });
});
}  // namespace

TEST_CASE("k.grad without a tape: rows it reads written behind ctgrad since the forward launch raise CTG-TAPE-003") {
  ctg::field<double, 0, ctg::grad> loss({}, {.name = "loss"});
  SUBCASE("into the memory under a view") {
    std::vector<double> position{0.5, 1.5, 2.5}, weight{1.0, 2.0, 3.0};
    auto x = ctg::view<ctg::grad>(position, {.name = "x"});
    auto c = ctg::view(weight, {.name = "c"});
    weighted_sum(x, c, loss);
    loss.grad().fill(1.0);
    weight[1] = 9.0;
    CHECK_THROWS_WITH_AS(weighted_sum.grad(x, c, loss), doctest::Contains("CTG-TAPE-003 kernel 'weighted_sum'"),
                         ctg::autodiff_error);
    weight[1] = 2.0;  // back as the forward launch left it: the adjoint runs, d/dx = 2 c x
    weighted_sum.grad(x, c, loss);
    CHECK(x.grad().at(2) == doctest::Approx(2.0 * 3.0 * 2.5));
    // Written behind ctgrad before a forward launch: that launch and k.grad
    // both read the new values, which is consistent.
    weight[1] = 4.0;
    x.zero_grad();
    weighted_sum(x, c, loss);
    weighted_sum.grad(x, c, loss);
    CHECK(x.grad().at(1) == doctest::Approx(2.0 * 4.0 * 1.5));
  }
  SUBCASE("through data(): a row the adjoint does not read passes, a row it reads raises") {
    ctg::field<double, 2, ctg::grad> u({4, 3}, {.name = "u"});
    u.fill(0.7);
    u.grad().fill(1.0);
    square_step(u, 0);
    u.data()[2 * 3 + 1] = 5.0;  // row 2: the next steps' business
    square_step.grad(u, 0);
    CHECK(u.grad().at(0, 1) == doctest::Approx(1.0 + 2.0 * 0.7));  // its own seed, then 2 u from row 1's
    square_step(u, 0);
    u.data()[0 * 3 + 1] = 5.0;  // row 0: what the adjoint reads
    CHECK_THROWS_WITH_AS(square_step.grad(u, 0), doctest::Contains("CTG-TAPE-003 kernel 'square_step'"),
                         ctg::autodiff_error);
  }
}
#endif  // CTG_HOST_WRITE_CHECKS
