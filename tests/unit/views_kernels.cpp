// Views of user memory in kernels: an array of structs differentiated in
// place (k.grad, k.fwd, a tape), views made again each step, aliasing seen
// through views. Expected values are closed forms.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <ctgrad/view.hpp>
#include <cmath>
#include <vector>

using namespace ctg::literals;

namespace {

struct particle {
  Eigen::Vector3d x;
  Eigen::Vector3d v;
  double m;
};

std::vector<particle> make_particles(int n) {
  std::vector<particle> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    p[std::size_t(i)] = {Eigen::Vector3d(0.1 * i, 1.0 - 0.2 * i, 0.5), Eigen::Vector3d(1.0, -0.5 * i, 0.25 * i),
                         1.0 + 0.5 * i};
  return p;
}

auto drift = ctg::kernel<"drift">([](auto x, auto v, double dt) {
  return ctg::range(x.size(), [=](auto i) { return x[i] = x[i] + dt * v[i]; });
});
auto energy = ctg::kernel<"energy">([](auto x, auto m, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += m[i] * ctg::norm_sqr(x[i]); });
});

}  // namespace

TEST_CASE("members of an array of structs are differentiated in place on a tape") {
  int const n = 5;
  double const dt = 0.1;
  auto particles = make_particles(n);
  auto const initial = particles;
  std::vector<particle> grads(particles.size(), particle{Eigen::Vector3d::Zero(), Eigen::Vector3d::Zero(), 0.0});
  auto x = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
  auto v = ctg::view_member<ctg::grad>(particles, &particle::v, {.name = "v", .grad = &grads[0].v});
  auto m = ctg::view_member<ctg::grad>(particles, &particle::m, {.name = "m", .grad = &grads[0].m});
  static_assert(std::is_same_v<decltype(x), ctg::field<Eigen::Vector3d, 1, ctg::grad | ctg::strided>>);
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  {
    ctg::tape t(loss);
    drift(x, v, dt);
    drift(x, v, dt);
    energy(x, m, loss);
    t.backward();
  }
  double expected_loss = 0;
  for (int i = 0; i < n; ++i) {
    auto const& p0 = initial[std::size_t(i)];
    Eigen::Vector3d const xf = p0.x + 2 * dt * p0.v;
    expected_loss += p0.m * xf.squaredNorm();
    CHECK((particles[std::size_t(i)].x - xf).norm() < 1e-12);            // written in place
    CHECK((particles[std::size_t(i)].v - p0.v).norm() == 0.0);           // other members untouched
    CHECK(particles[std::size_t(i)].m == p0.m);
    CHECK((x.grad().at(i) - 2 * p0.m * xf).norm() < 1e-12);              // dL/dx0
    CHECK((grads[std::size_t(i)].v - 4 * dt * p0.m * xf).norm() < 1e-12);  // dL/dv, in the user's buffer
    CHECK(std::abs(grads[std::size_t(i)].m - xf.squaredNorm()) < 1e-12);   // dL/dm
    CHECK(grads[std::size_t(i)].x.norm() == 0.0);  // the user's buffer outside the gradient views
  }
  CHECK(std::abs(loss.at() - expected_loss) < 1e-12);
}

TEST_CASE("views made again each step share one storage, so the tape sees writes through any of them") {
  auto particles = make_particles(4);
  auto const initial = particles;
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  auto first = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
  {
    ctg::tape t(loss);
    for (int step = 0; step < 3; ++step) {
      auto x = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x"});
      auto v = ctg::view_member(particles, &particle::v, {.name = "v"});
      CHECK(x.storage() == first.storage());
      drift(x, v, 0.5);
    }
    auto m = ctg::view_member(particles, &particle::m, {.name = "m"});
    energy(first, m, loss);
    t.backward();
  }
  for (std::size_t i = 0; i < particles.size(); ++i) {
    Eigen::Vector3d const xf = initial[i].x + 1.5 * initial[i].v;
    CHECK((first.grad().at(int(i)) - 2 * initial[i].m * xf).norm() < 1e-12);
  }

  // A kernel whose adjoint needs x, then a host write through another handle
  // on the same memory: the tape must notice (one version record).
  auto square = ctg::kernel<"square">([](auto x, auto loss) {
    return ctg::range(x.size(), [=](auto i) { return loss() += ctg::norm_sqr(x[i]) * ctg::norm_sqr(x[i]); });
  });
  ctg::tape t(loss);
  square(first, loss);
  auto again = ctg::view_member<ctg::grad>(particles, &particle::x, {.name = "x again"});
  again.at(0) = Eigen::Vector3d(9.0, 9.0, 9.0);
  CHECK_THROWS_WITH_AS(t.backward(), doctest::Contains("CTG-TAPE-003"), ctg::autodiff_error);
}

TEST_CASE("forward mode on a strided view") {
  struct sample {
    float pad;
    double x;
    double y;
  };
  std::vector<sample> s(6);
  std::vector<double> tangent_x(6 * 3, 0.0), tangent_y(6 * 3, 0.0);  // same layout: stride 3 doubles
  for (int i = 0; i < 6; ++i) s[std::size_t(i)].x = 0.3 * i, tangent_x[std::size_t(3 * i)] = 1.0 + i;
  auto x = ctg::strided_view<ctg::dual>(&s[0].x, {6}, {sizeof(sample)}, {.name = "x", .dual = tangent_x.data()});
  auto y = ctg::strided_view<ctg::dual>(&s[0].y, {6}, {sizeof(sample)}, {.name = "y", .dual = tangent_y.data()});
  auto k = ctg::kernel<"sine">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
  });
  k.fwd(x, y);
  for (int i = 0; i < 6; ++i) {
    double const xi = 0.3 * i;
    CHECK(s[std::size_t(i)].y == doctest::Approx(std::sin(xi) * xi));
    CHECK(tangent_y[std::size_t(3 * i)] == doctest::Approx((std::cos(xi) * xi + std::sin(xi)) * (1.0 + i)));
  }
}

TEST_CASE("the gradient and tangent buffers ctgrad allocates for a strided view are packed") {
  struct cell {
    float tag;
    double a;
    double b;
  };
  struct total_record {
    int id;
    double total;
  };
  int const n = 7;
  std::vector<cell> cells(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) cells[std::size_t(i)] = {float(100 + i), 0.2 + 0.15 * i, -1.0};
  std::vector<total_record> totals(1, total_record{42, 0.0});
  auto a = ctg::view_member<ctg::grad | ctg::dual>(cells, &cell::a, {.name = "a"});
  auto b = ctg::view_member<ctg::grad>(cells, &cell::b, {.name = "b"});
  auto total = ctg::view_member<ctg::grad>(totals, &total_record::total, {.name = "total"});
  CHECK(a.strides()[0] == std::int64_t(sizeof(cell)));
  CHECK(a.grad().strides()[0] == std::int64_t(sizeof(double)));
  CHECK(a.dual().strides()[0] == std::int64_t(sizeof(double)));

  // b[i] = a^3 and a sum into one element of a strided field (its seed is
  // read once per chunk, through the packed gradient).
  auto k = ctg::kernel<"cube_and_sum">([](auto a, auto b, auto total) {
    return ctg::range(a.size(), [=](auto i) {
      return ctg::block(b[i] = a[i] * a[i] * a[i], total[0] += ctg::sin(a[i]));
    });
  });
  std::vector<double> seeds(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) seeds[std::size_t(i)] = 1.0 + 0.5 * i;
  b.grad().copy_from(seeds);
  total.grad().at(0) = 0.25;
  k(a, b, total);
  k.grad(a, b, total);
  double expected_total = 0;
  for (int i = 0; i < n; ++i) {
    double const ai = 0.2 + 0.15 * i;
    expected_total += std::sin(ai);
    CHECK(cells[std::size_t(i)].b == doctest::Approx(ai * ai * ai));
    CHECK(cells[std::size_t(i)].tag == float(100 + i));  // neighbours untouched
    CHECK(a.grad().at(i) == doctest::Approx(3 * ai * ai * seeds[std::size_t(i)] + 0.25 * std::cos(ai)));
    CHECK(a.grad().data()[i] == doctest::Approx(3 * ai * ai * seeds[std::size_t(i)] + 0.25 * std::cos(ai)));
  }
  CHECK(totals[0].total == doctest::Approx(expected_total));
  CHECK(totals[0].id == 42);

  // Forward mode: the tangent of a packed; a second view of b's memory adds
  // its own packed tangent to the storage the first view made.
  auto y = ctg::view_member<ctg::dual>(cells, &cell::b, {.name = "y"});
  CHECK(y.storage() == b.storage());
  CHECK(y.dual().strides()[0] == std::int64_t(sizeof(double)));
  std::vector<double> tangents(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) tangents[std::size_t(i)] = 2.0 - 0.25 * i;
  a.dual().copy_from(tangents);
  auto square = ctg::kernel<"square">([](auto a, auto y) {
    return ctg::range(a.size(), [=](auto i) { return y[i] = a[i] * a[i]; });
  });
  square.fwd(a, y);
  for (int i = 0; i < n; ++i) {
    double const ai = 0.2 + 0.15 * i;
    CHECK(cells[std::size_t(i)].b == doctest::Approx(ai * ai));
    CHECK(y.dual().at(i) == doctest::Approx(2 * ai * tangents[std::size_t(i)]));
  }
  a.zero_grad();
  CHECK(a.grad().to_vector() == std::vector<double>(std::size_t(n), 0.0));
  CHECK(cells[3].a == doctest::Approx(0.2 + 0.45));  // zeroing the gradient left the values
}

TEST_CASE("Eigen matrices keep their storage order: f(i, j) is m(i, j)") {
  Eigen::MatrixXd colmajor = Eigen::MatrixXd::Zero(3, 4);
  auto f = ctg::view(colmajor, {.name = "m"});
  static_assert(std::is_same_v<decltype(f), ctg::field<double, 2, ctg::strided>>);
  CHECK(f.shape() == std::array<int, 2>{3, 4});
  auto fill = ctg::kernel<"fill">([](auto f) {
    return ctg::ndrange(f.shape(0_c), f.shape(1_c), [=](auto i, auto j) { return f(i, j) = i * 10 + j; });
  });
  fill(f);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) CHECK(colmajor(i, j) == 10.0 * i + j);

  // The columns of a 3 x n matrix as n vectors.
  Eigen::Matrix<double, 3, Eigen::Dynamic> positions = Eigen::Matrix<double, 3, Eigen::Dynamic>::Zero(3, 5);
  auto cols = ctg::view_vectors(positions, {.name = "positions"});
  static_assert(std::is_same_v<decltype(cols)::value_type, Eigen::Vector3d>);
  auto place = ctg::kernel<"place">([](auto p) {
    return ctg::range(p.size(), [=](auto i) { return p[i] = ctg::vec(1.0 * i, 2.0 * i, 3.0); });
  });
  place(cols);
  for (int i = 0; i < 5; ++i) CHECK(positions.col(i) == Eigen::Vector3d(i, 2 * i, 3));
}
