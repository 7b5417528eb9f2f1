// Views of user memory on the host: layouts, adoptions, one storage per
// layout, and the errors for bad input (CTG-FIELD-005 to -009, -011).
#include <doctest/doctest.h>

#include <ctgrad/field.hpp>
#include <ctgrad/view.hpp>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace {
struct body {
  float mass;
  Eigen::Vector3f x;
  int id;
};
}  // namespace

TEST_CASE("a member of an array of structs is a strided field on that memory") {
  std::vector<body> bodies(4);
  for (int i = 0; i < 4; ++i) bodies[std::size_t(i)] = {1.0f + i, Eigen::Vector3f(float(i), 0.0f, 0.0f), 10 + i};
  auto x = ctg::view_member(bodies, &body::x, {.name = "x"});
  CHECK(x.strides()[0] == std::int64_t(sizeof(body)));
  CHECK(x.data() == &bodies[0].x);
  CHECK(x.at(2) == Eigen::Vector3f(2.0f, 0.0f, 0.0f));
  x.at(3) = Eigen::Vector3f(7.0f, 8.0f, 9.0f);
  CHECK(bodies[3].x == Eigen::Vector3f(7.0f, 8.0f, 9.0f));
  CHECK(bodies[3].mass == 4.0f);  // the neighbours stay
  CHECK(bodies[3].id == 13);
  x.fill(Eigen::Vector3f::Ones());
  CHECK(bodies[1].x == Eigen::Vector3f::Ones());
  CHECK(bodies[1].id == 11);
  auto ids = ctg::view_member(bodies, &body::id, {.name = "ids"});
  CHECK(ids.to_vector() == std::vector<int>{10, 11, 12, 13});
  ids.copy_from(std::vector<int>{5, 6, 7, 8});
  CHECK(bodies[2].id == 7);
  CHECK(bodies[2].x == Eigen::Vector3f::Ones());
  // The gradient ctgrad allocates is packed and zeroed, whatever the values' strides.
  auto m = ctg::view_member<ctg::grad>(bodies, &body::mass, {.name = "mass"});
  static_assert(std::is_same_v<decltype(m.grad()), ctg::field<float, 1, ctg::strided>>);
  CHECK(m.strides()[0] == std::int64_t(sizeof(body)));
  CHECK(m.grad().strides()[0] == std::int64_t(sizeof(float)));
  CHECK(m.view().grad.stride[0] == std::int64_t(sizeof(float)));
  CHECK(m.grad().to_vector() == std::vector<float>(4, 0.0f));
  m.grad().at(1) = 2.0f;
  m.zero_grad();
  CHECK(m.grad().at(1) == 0.0f);
}

TEST_CASE("std::span, std::vector and raw pointers are viewed packed, without a copy") {
  std::vector<double> values{1, 2, 3, 4, 5, 6};
  auto v = ctg::view(values, {.name = "values"});
  static_assert(std::is_same_v<decltype(v), ctg::field<double, 1>>);
  CHECK(v.data() == values.data());
  v.at(0) = 10;
  CHECK(values[0] == 10);
  std::vector<double> more{1, 2, 3, 4, 5, 6};
  auto s = ctg::view<ctg::grad>(std::span<double>(more).subspan(3), {.name = "tail"});
  CHECK(s.size() == 3);
  CHECK(s.at(0) == 4);
  auto grid = ctg::view(more.data(), {1, 3}, {.name = "grid"});
  CHECK(grid.at(0, 2) == 3);
  grid.at(0, 0) = 0.5;  // the two halves of `more` are separate views
  CHECK(more[0] == 0.5);
  CHECK(grid.strides() == std::array<std::int64_t, 2>{24, 8});
  CHECK(s.storage() != grid.storage());
  double scalar = 4.5;
  auto one = ctg::view(&scalar, {.name = "one"});
  CHECK(one.at() == 4.5);
  // Eigen vectors and maps.
  Eigen::VectorXf ev = Eigen::VectorXf::LinSpaced(5, 0.0f, 4.0f);
  auto e = ctg::view(ev, {.name = "ev"});
  CHECK(e.at(3) == 3.0f);
  std::vector<double> pairs{10, -1, 3, -1, 5, -1};
  Eigen::Map<Eigen::VectorXd, 0, Eigen::InnerStride<2>> every_other(pairs.data(), 3);
  auto odd = ctg::view(every_other, {.name = "every other"});
  static_assert(decltype(odd)::is_strided);
  CHECK(odd.to_vector() == std::vector<double>{10, 3, 5});
  auto even = ctg::strided_view(pairs.data() + 1, {3}, {16}, {.name = "between"});  // interleaved: no overlap
  CHECK(even.to_vector() == std::vector<double>{-1, -1, -1});
}

TEST_CASE("views of one layout share one storage and its versions; a different layout that overlaps is refused") {
  std::vector<float> data(8, 0.0f);
  auto a = ctg::view(data, {.name = "a"});
  auto b = ctg::view(data.data(), {8}, {.name = "b"});
  CHECK(a.storage() == b.storage());
  auto const before = a.version();
  b.fill(1.0f);
  CHECK(a.version() == before + 1);
  // A part of the memory a live view covers is another layout of it.
  CHECK_THROWS_WITH_AS(ctg::view(data.data() + 2, {3}, {.name = "middle"}), doctest::Contains("CTG-FIELD-008"),
                       ctg::launch_error);
  // Once the other views are gone, the memory can be viewed another way.
  std::vector<float> other(8, 0.0f);
  {
    auto whole = ctg::view(other, {.name = "whole"});
  }
  CHECK_NOTHROW(ctg::strided_view(other.data(), {4}, {8}, {.name = "even"}));
}

TEST_CASE("overlap of layouts, decided from residues or block lists") {
  using ctg::detail::element_layout;
  auto line = [](std::int64_t n, std::int64_t stride, std::size_t bytes) {
    element_layout l;
    l.rank = 1;
    l.element_bytes = bytes;
    l.extent[0] = n;
    l.stride[0] = stride;
    return l;
  };
  alignas(8) static unsigned char memory[4096];
  // x (12 bytes at 0) and v (12 bytes at 12) in 28-byte structs: disjoint.
  CHECK_FALSE(ctg::detail::layouts_overlap(memory, line(10, 28, 12), memory + 12, line(10, 28, 12)));
  CHECK(ctg::detail::layouts_overlap(memory, line(10, 28, 12), memory + 8, line(10, 28, 12)));
  // The last element of one range touches the first byte of the other.
  CHECK(ctg::detail::layouts_overlap(memory, line(4, 8, 8), memory + 24, line(4, 8, 8)));
  CHECK_FALSE(ctg::detail::layouts_overlap(memory, line(4, 8, 8), memory + 32, line(4, 8, 8)));
  // Rows 0..3 of a 4 x 4 float matrix against its column 1 (stride 16): overlap at (k, 1).
  element_layout row = line(4, 4, 4);
  CHECK(ctg::detail::layouts_overlap(memory + 16, row, memory + 4, line(4, 16, 4)));
  // Strides 12 and 8 (gcd 4, elements of 4 bytes): only the block lists decide; 0,12,24 vs 4,12: 12 is shared.
  CHECK(ctg::detail::layouts_overlap(memory, line(3, 12, 4), memory + 4, line(2, 8, 4)));
  CHECK_FALSE(ctg::detail::layouts_overlap(memory, line(3, 12, 4), memory + 4, line(1, 8, 4)));
}

TEST_CASE("bad input is an error naming the field") {
  std::vector<body> bodies(3);
  SUBCASE("null pointer: CTG-FIELD-005") {
    float* none = nullptr;
    CHECK_THROWS_WITH_AS(ctg::view(none, {4}, {.name = "p"}), doctest::Contains("CTG-FIELD-005 field 'p'"),
                         ctg::launch_error);
    CHECK_NOTHROW(ctg::view(none, {0}, {.name = "empty"}));
  }
  SUBCASE("extents that overflow: CTG-FIELD-006") {
    static float cell;
    std::int64_t const big = std::int64_t(1) << 40;
    CHECK_THROWS_WITH_AS(ctg::view(&cell, {big}, {.name = "big"}), doctest::Contains("CTG-FIELD-006 field 'big'"),
                         ctg::launch_error);
    CHECK_THROWS_WITH_AS(ctg::view(&cell, {-1}, {.name = "neg"}), doctest::Contains("CTG-FIELD-006"),
                         ctg::launch_error);
    CHECK_THROWS_WITH_AS(ctg::view(&cell, {1 << 30, 1 << 30, 1 << 30}, {.name = "cube"}),
                         doctest::Contains("CTG-FIELD-006 field 'cube'"), ctg::launch_error);
    CHECK_THROWS_WITH_AS(ctg::strided_view(&cell, {1 << 30}, {std::int64_t(1) << 40}, {.name = "far"}),
                         doctest::Contains("CTG-FIELD-006 field 'far'"), ctg::launch_error);
  }
  SUBCASE("misaligned or overlapping strides: CTG-FIELD-007") {
    alignas(16) static double cells[16];
    CHECK_THROWS_WITH_AS(ctg::strided_view(cells, {4}, {12}, {.name = "odd"}),
                         doctest::Contains("CTG-FIELD-007 field 'odd'"), ctg::launch_error);
    CHECK_THROWS_WITH_AS(ctg::strided_view(cells, {4}, {-8}, {.name = "back"}), doctest::Contains("CTG-FIELD-007"),
                         ctg::launch_error);
    CHECK_THROWS_WITH_AS(ctg::strided_view(cells, {2, 4}, {16, 8}, {.name = "folded"}),
                         doctest::Contains("overlap each other"), ctg::launch_error);
    auto* shifted = reinterpret_cast<double*>(reinterpret_cast<unsigned char*>(cells) + 4);
    CHECK_THROWS_WITH_AS(ctg::view(shifted, {2}, {.name = "shifted"}), doctest::Contains("CTG-FIELD-007"),
                         ctg::launch_error);
  }
  SUBCASE("a gradient buffer that is the values: CTG-FIELD-008") {
    CHECK_THROWS_WITH_AS(ctg::view_member<ctg::grad>(bodies, &body::mass, {.name = "m", .grad = &bodies[0].mass}),
                         doctest::Contains("CTG-FIELD-008 field 'm'"), ctg::launch_error);
  }
  SUBCASE("a gradient buffer that is another live view's values, in either order: CTG-FIELD-008") {
    struct cell {
      double a;
      double b;
    };
    std::vector<cell> c(3, cell{2.0, 5.0});
    {
      auto a = ctg::view_member<ctg::grad>(c, &cell::a, {.name = "a", .grad = &c[0].b});
      CHECK_THROWS_WITH_AS(ctg::view_member(c, &cell::b, {.name = "b"}),
                           doctest::Contains("CTG-FIELD-008 field 'b': the values of this view and the gradient "
                                             "buffer of the live view 'a' share bytes"),
                           ctg::launch_error);
    }
    {
      auto b = ctg::view_member(c, &cell::b, {.name = "b"});
      CHECK_THROWS_WITH_AS(ctg::view_member<ctg::grad>(c, &cell::a, {.name = "a", .grad = &c[0].b}),
                           doctest::Contains("CTG-FIELD-008 field 'a': the gradient buffer of this view and the "
                                             "values of the live view 'b' share bytes"),
                           ctg::launch_error);
      // Gradient memory apart from every viewed member (laid out like the values) is fine.
      std::vector<cell> grads(3, cell{0.0, 0.0});
      CHECK_NOTHROW(ctg::view_member<ctg::grad>(c, &cell::a, {.name = "a", .grad = &grads[0].a}));
    }
    CHECK(c[0].b == 5.0);  // nothing was written
  }
  SUBCASE("device memory without CUDA: CTG-FIELD-011") {
#if !defined(CTG_HAS_CUDA)
    CHECK_THROWS_WITH_AS(ctg::view_member(bodies, &body::mass, {.name = "m", .space = ctg::device}),
                         doctest::Contains("CTG-FIELD-011 field 'm'"), ctg::launch_error);
#endif
  }
}

TEST_CASE("a view outliving the owner it was given: CTG-FIELD-009 where checks are on") {
  auto memory = std::make_shared<std::vector<double>>(4, 1.0);
  auto v = ctg::view(*memory, {.name = "owned elsewhere", .owner = memory});
  CHECK(v.at(1) == 1.0);
  memory.reset();
#if CTG_VIEW_CHECKS
  CHECK_THROWS_WITH_AS(v.view(), doctest::Contains("CTG-FIELD-009 field 'owned elsewhere'"), ctg::launch_error);
#endif
  std::weak_ptr<void const> gone;
  {
    auto tmp = std::make_shared<int>(0);
    gone = tmp;
  }
  std::vector<double> fresh(2);
  CHECK_THROWS_WITH_AS(ctg::view(fresh, {.name = "late", .owner = gone}), doctest::Contains("CTG-FIELD-009"),
                       ctg::launch_error);
}
