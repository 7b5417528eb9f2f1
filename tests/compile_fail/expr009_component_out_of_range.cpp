// CTG-EXPR-009: a compile-time component index past the end of the vector
// (2_c on a 2-vector, the habit of 1-based indexing). The types see it;
// before this check the kernel compiled and read past the element. The
// control reads the last component.
// expected-lines {{45}}
#include <ctgrad/ctgrad.hpp>

using namespace ctg::literals;

int main() {
  ctg::field<Eigen::Vector2d, 1, ctg::grad> p({4}, {.name = "p"});
  ctg::field<double, 1, ctg::grad> height({4}, {.name = "height"});
  auto k = ctg::kernel<"height_of">([](auto p, auto height) {
#if defined(CTG_CONTROL)
    return ctg::range(p.size(), [=](auto i) { return height[i] = p[i][1_c]; });
#else
    return ctg::range(p.size(), [=](auto i) { return height[i] = p[i][2_c]; });
#endif
  });
  k(p, height);  // expected-error {{CTG-EXPR-009 component index out of range}}
  k.grad(p, height);
}
