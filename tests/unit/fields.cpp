// The host side of ctg::field: allocation, access, companions, copies, views.
#include <doctest/doctest.h>

#include <ctgrad/ctgrad.hpp>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <vector>

TEST_CASE("fields are zero-initialised and aligned, with the shape in the type and the value") {
  ctg::field<double, 3> f(2, 3, 4);
  CHECK(f.size() == 24);
  CHECK(f.shape() == std::array<int, 3>{2, 3, 4});
  CHECK(f.extent(2) == 4);
  CHECK(reinterpret_cast<std::uintptr_t>(f.data()) % 64 == 0);
  for (double v : f.to_vector()) CHECK(v == 0.0);
  f.at(1, 2, 3) = 7.0;
  CHECK(f.to_vector()[23] == 7.0);  // row-major
  ctg::field<float, 0> s;
  CHECK(s.size() == 1);
  CHECK(s.at() == 0.0f);
}

TEST_CASE("companion buffers exist only when the type asks for them") {
  ctg::field<float, 1, ctg::grad | ctg::dual> x(3);
  static_assert(decltype(x)::has_grad);
  static_assert(decltype(x)::has_dual);
  static_assert(!ctg::field<float, 1>::has_grad);
  x.grad().at(1) = 2.0f;
  x.dual().at(2) = 3.0f;
  CHECK(x.grad().at(1) == 2.0f);
  CHECK(x.grad().name() == x.name() + ".grad");
  x.zero_grad();
  CHECK(x.grad().at(1) == 0.0f);
  CHECK(x.dual().at(2) == 3.0f);
  x.zero_dual();
  CHECK(x.dual().at(2) == 0.0f);
  CHECK(x.at(1) == 0.0f);
}

TEST_CASE("a field is a shared handle: copies see the same storage, which outlives the original") {
  std::vector<float> values{1, 2, 3};
  ctg::field<float, 1, ctg::grad> copy;
  {
    ctg::field<float, 1, ctg::grad> x({3}, {.name = "x"});
    x.copy_from(values);
    copy = x;
    CHECK(x.use_count() == 2);
    auto g = x.grad();  // the gradient view keeps the storage alive too
    CHECK(x.use_count() == 3);
  }
  CHECK(copy.use_count() == 1);
  CHECK(copy.name() == "x");
  CHECK(copy.to_vector() == values);
}

// A field brings only ctg into argument-dependent lookup: an unqualified
// call that finds the standard library's function through a using-directive
// stays unambiguous (ctg::detail has functions of the same names).
namespace field_lookup {
using namespace std;
inline auto pair_with_count(ctg::field<float, 1> const& f) { return make_tuple(f, int(f.size())); }
}  // namespace field_lookup

TEST_CASE("an unqualified std call on a field finds std's function alone") {
  ctg::field<float, 1> f({3}, {.name = "f"});
  auto t = field_lookup::pair_with_count(f);
  CHECK(std::get<0>(t).storage() == f.storage());
  CHECK(std::get<1>(t) == 3);
}

TEST_CASE("fill, copies from and to spans and vectors, clone") {
  ctg::field<int, 2> a(2, 3);
  a.fill(5);
  CHECK(a.to_vector() == std::vector<int>(6, 5));
  std::vector<int> src(6);
  std::iota(src.begin(), src.end(), 0);
  a.copy_from(std::span<int const>(src));
  std::vector<int> dst(6);
  a.copy_to(std::span<int>(dst));
  CHECK(dst == src);
  CHECK(a.at(1, 0) == 3);
  auto b = a.clone(ctg::host);
  a.at(0, 0) = 42;
  CHECK(b.at(0, 0) == 0);
  CHECK_THROWS_AS(a.copy_from(std::vector<int>(5)), ctg::launch_error);
}

TEST_CASE("Eigen views of scalar fields") {
  ctg::field<float, 2> m(2, 3);
  m.map() << 1, 2, 3, 4, 5, 6;
  CHECK(m.at(1, 0) == 4.0f);
  ctg::field<double, 1> v(4);
  v.map().setLinSpaced(4, 0.0, 3.0);
  CHECK(v.at(3) == 3.0);
  CHECK(v.map().sum() == 6.0);
  ctg::field<Eigen::Vector3f, 1> p(2);
  p.at(1) = Eigen::Vector3f(1, 2, 3);
  CHECK(p.flat().size() == 6);
  CHECK(p.flat()(5) == 3.0f);
}

TEST_CASE("element types: integers, masks, Eigen vectors and matrices") {
  ctg::field<std::int64_t, 1> big(2);
  big.at(1) = std::int64_t(1) << 40;
  CHECK(big.at(1) == std::int64_t(1) << 40);
  ctg::field<bool, 1> mask(3);
  mask.copy_from(std::vector<bool>{false, true, false});
  mask.at(2) = true;
  CHECK(mask.to_vector() == std::vector<bool>{false, true, true});
  ctg::field<std::uint8_t, 1> bytes(2);
  bytes.at(0) = 255;
  CHECK(bytes.at(0) == 255);
  ctg::field<Eigen::Matrix2d, 1, ctg::grad> mats(2);
  CHECK(mats.at(0).isZero());
  mats.grad().at(1)(0, 1) = 4.0;
  CHECK(mats.grad().at(1)(0, 1) == 4.0);
}

#if CTG_BOUNDS_CHECK
TEST_CASE("out-of-range host indices raise an error naming the field and index") {
  ctg::field<float, 2> f({2, 3}, {.name = "grid"});
  CHECK_THROWS_WITH_AS(f.at(2, 0), "field 'grid': index (2, 0) is outside its shape (2, 3)", ctg::index_error);
  CHECK_THROWS_AS(f.at(0, -1), ctg::index_error);
}

TEST_CASE("out-of-range indices inside a kernel raise after the launch, naming kernel and parameter") {
  ctg::field<float, 1> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  auto k = ctg::kernel<"shifted">([](auto x, auto y) { return ctg::range(4, [=](auto i) { return y[i] = x[i + 1]; }); });
  CHECK_THROWS_WITH_AS(k(x, y), "kernel 'shifted': index (4) is out of range for parameter #0 (field 'x', shape (4))",
                       ctg::index_error);
}

TEST_CASE("an out-of-range index of a 2-D access inside a kernel is reported with both of its indices") {
  ctg::field<float, 2> g({2, 3}, {.name = "g"}), out({2, 3}, {.name = "out"});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) g.at(i, j) = float(10 * i + j);
  // Only iteration (1, 2) reads outside: g(1, 3).
  auto k = ctg::kernel<"diagonal_shift">(
      [](auto g, auto out) { return ctg::each(out, [=](auto i, auto j) { return out(i, j) = g(i, j + i); }); });
  CHECK_THROWS_WITH_AS(k(g, out),
                       "kernel 'diagonal_shift': index (1, 3) is out of range for parameter #0 (field 'g', shape (2, 3))",
                       ctg::index_error);
}
#endif

TEST_CASE("launch errors: empty handles and device fields without CUDA") {
  ctg::field<float, 1> empty;
  ctg::field<float, 1> x(2);
  auto k = ctg::kernel<"copy">([](auto a, auto b) { return ctg::range(2, [=](auto i) { return b[i] = a[i]; }); });
  CHECK_THROWS_AS(k(empty, x), ctg::launch_error);
#if !defined(CTG_HAS_CUDA)
  CHECK_THROWS_AS((ctg::field<float, 1>({2}, {.space = ctg::device})), ctg::launch_error);
#endif
}
