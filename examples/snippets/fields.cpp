// docs/01-kernels.md, "Fields": declaring fields and using them from the host.
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <vector>

#include "check.hpp"

int main() {
  // [snippet: declare]
  ctg::field<float, 1> a(100);                          // 100 floats, no gradient
  ctg::field<double, 2, ctg::grad> u({64, 32}, {.name = "u"});  // with a gradient buffer
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});      // rank 0: one value
  ctg::field<Eigen::Vector2d, 2> x({10, 8}, {.name = "x"});     // Eigen element type
  ctg::field<double, 1, ctg::grad | ctg::dual> p({3}, {.name = "p"});  // gradient and tangent
  ctg::field<int, 1> ids({3}, {.name = "ids"});         // integers carry no gradient
  // [snippet end]

  // [snippet: host]
  u.at(3, 4) = 1.5;                     // one element (rank 0: loss.at())
  a.fill(0.25f);                        // every element
  ids.copy_from(std::vector<int>{7, 8, 9});
  std::vector<float> values = a.to_vector();
  x.at(0, 0) = Eigen::Vector2d(1.0, 2.0);
  double total = u.map().sum();         // rank 2: an Eigen::Map of a row-major matrix
  u.grad().fill(0.0);                   // .grad() is a field of the same shape
  u.zero_grad();                        // the same, shorter
  p.dual().at(1) = 1.0;                 // the tangent buffer
  auto shared = u;                      // a handle: copies share the storage
  shared.at(0, 0) = 2.0;                // ... so u.at(0, 0) is 2 now
  // [snippet end]

  check(values.size() == 100 && values[99] == 0.25f, "fill / to_vector");
  check(total == 1.5, "map().sum()");
  check(u.at(0, 0) == 2.0 && u.use_count() == 2, "shared handle");
  check(u.extent(0) == 64 && u.size() == 64 * 32 && u.name() == "u" && loss.at() == 0.0, "shape, name, zero init");
  check(ids.at(2) == 9 && x.at(0, 0).y() == 2.0 && p.dual().at(1) == 1.0, "host access");
  return 0;
}
