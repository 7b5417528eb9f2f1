// docs/04-diagnostics.md: the fixed versions of kernels that a diagnostic
// rejects (the failing ones cannot be programs; tests/compile_fail/ holds
// them where there is a test), and the errors only a launch can see.
#include <ctgrad/ctgrad.hpp>

#include <Eigen/Core>
#include <string>

#include "check.hpp"

using namespace ctg::literals;

namespace {
bool mentions(ctg::error const& e, char const* id) { return std::string(e.what()).find(id) != std::string::npos; }
}  // namespace

int main() {
  ctg::field<double, 1, ctg::grad> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  ctg::field<Eigen::Vector2d, 1> p({4}, {.name = "p"});
  ctg::field<int, 1> ids({4}, {.name = "ids"});
  x.fill(0.5);

  // [snippet: expr001]
  // Fails: std::string, a dynamic Eigen::VectorXd, ... in a kernel expression.
  Eigen::Vector2d const offset(1.0, 2.0);  // fixed-size Eigen values are fine
  auto shift = ctg::kernel<"shift">([=](auto p) {
    return ctg::range(p.size(), [=](auto i) { return p[i] = p[i] + offset; });
  });
  // [snippet end]
  shift(p);
  check(p.at(3).y() == 2.0, "expr001");

  // [snippet: expr003]
  // Fails: ids[i] = ids[i] % 2.5 (% takes integers). Cast or use floor:
  auto parity = ctg::kernel<"parity">([](auto ids, auto y) {
    return ctg::range(ids.size(), [=](auto i) {
      return ctg::block(ids[i] = i % 2, y[i] = ctg::cast<double>(i) - 2.5 * ctg::floor(ctg::cast<double>(i) / 2.5));
    });
  });
  // [snippet end]
  parity(ids, y);
  check(ids.at(3) == 1 && y.at(3) == 0.5, "expr003");

  // [snippet: expr004]
  // Fails: y[i] *= 2.0 (there is no atomic multiply). Where no other
  // iteration touches y[i], write the product out:
  auto twice = ctg::kernel<"twice">([](auto y) {
    return ctg::range(y.size(), [=](auto i) { return y[i] = y[i] * 2.0; });
  });
  // [snippet end]
  twice(y);
  check(y.at(3) == 1.0, "expr004");

  // [snippet: expr005-010]
  // Fails: ctg::block(ctg::result(v), y[i] = v) (result must come last), and a
  // body that returns a value where a statement belongs: [=](auto i) { return x[i] * 2.0; }.
  auto square = ctg::kernel<"square">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return y[i] = ctg::let(x[i], [=](auto v) { return ctg::block(v = v * v, ctg::result(v)); });
    });
  });
  // [snippet end]
  square(x, y);
  check(y.at(0) == 0.25, "expr005/010");

  // [snippet: expr008]
  // Fails: y[x[i] * 2.0] (an index must be an integer). Convert explicitly:
  auto gather = ctg::kernel<"gather">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = x[ctg::cast<int>(x[i] * 2.0)]; });
  });
  // [snippet end]
  gather(x, y);
  check(y.at(0) == 0.5, "expr008");

  // [snippet: expr009-013]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  // Fails: x[i][0_c] (x holds scalars), p[i] = 1.0 (a scalar into a vector)
  // and y[i] = p[i] (a vector into a scalar). Write components or build vectors:
  auto split = ctg::kernel<"split">([](auto p, auto y) {
    return ctg::range(p.size(), [=](auto i) {
      return ctg::block(y[i] = p[i][0_c] + p[i][1_c], p[i] = ctg::vec(y[i], 1.0), p[i][1_c] = 3.0);
    });
  });
  // [snippet end]
  split(p, y);
  check(y.at(0) == 3.0 && p.at(0).x() == 3.0 && p.at(0).y() == 3.0, "expr009/013");

  // [snippet: expr011]
  // Fails: ctg::while_(my_func_with_a_loop(v) > 0, ...). Compute the condition
  // into a local inside the loop instead:
  auto halve = ctg::kernel<"halve", ctg::adstack_capacity<16>>([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i] * 100.0, true, [=](auto v, auto go) {
        return ctg::block(ctg::while_(go, ctg::block(v = v * 0.5, go = v > 1.0)), y[i] = v);
      });
    });
  });
  // [snippet end]
  halve(x, y);
  check(y.at(0) < 1.0 && y.at(0) > 0.5, "expr011");

  // [snippet: expr012]
  // Fails: ctg::atomic_max(v, x[i]) on a local v, or on a vector element.
  // The destination is a scalar field element:
  ctg::field<double, 0> top;
  auto largest = ctg::kernel<"largest">([](auto x, auto top) {
    return ctg::range(x.size(), [=](auto i) { return ctg::atomic_max(top(), x[i]); });
  });
  // [snippet end]
  largest(x, top);
  check(top.at() == 0.5, "expr012");

  // [snippet: field]
  // Fails: ctg::field<std::complex<double>, 1> (CTG-FIELD-002), a rank-5 field
  // (CTG-FIELD-003), and g.grad() where g has no ctg::grad (CTG-FIELD-004).
  ctg::field<Eigen::Vector2d, 4> fine({2, 2, 2, 2}, {.name = "fine"});  // Eigen fixed-size, rank <= 4
  ctg::field<double, 1, ctg::grad> g({4}, {.name = "g"});
  g.grad().fill(0.0);
  // [snippet end]
  check(fine.size() == 16, "field");

  // [snippet: launch001]
  // Fails: k(x, std::vector<double>{...}) or k(x, Eigen::VectorXd(...)):
  // kernel arguments are fields, plain numbers and fixed-size Eigen values.
  auto offset_by = ctg::kernel<"offset_by">([](auto p, double dx, double dy) {
    return ctg::range(p.size(), [=](auto i) { return p[i] = p[i] + ctg::vec(dx, dy); });
  });
  offset_by(p, 1.0, -1.0);
  // [snippet end]
  check(p.at(0).x() == 4.0, "launch001");

  // [snippet: ad012]
  auto add = ctg::kernel<"add">([](auto a, auto b) {
    return ctg::range(a.size(), [=](auto i) { return b[i] = a[i] + 1.0; });
  });
  try {
    add.grad(x, x);  // the same differentiable field twice
  } catch (ctg::autodiff_error const& e) {
    // kernel 'add': CTG-AD-012 parameter #0 (field 'x', shape (4)) and parameter #1 (field 'x', shape (4))
    // share one storage (or views of overlapping memory) that the kernel writes, or that has a gradient ...
  }
  ctg::field<double, 1, ctg::grad> copy = x.clone(ctg::host);  // a second field with the same values
  add.grad(x, copy);
  // [snippet end]
  bool raised = false;
  try {
    add.grad(x, x);
  } catch (ctg::autodiff_error const& e) {
    raised = mentions(e, "CTG-AD-012");
  }
  check(raised, "ad012");

  // [snippet: overflow]
  auto grow = ctg::kernel<"grow", ctg::adstack_capacity<3>>([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) { return ctg::block(ctg::while_(v < 100.0, v = v * v + 1.0), y[i] = v); });
    });
  });
  grow(x, y);  // 0.5 -> 1.25 -> 2.56 -> 7.57 -> 58.3 -> 3400: five iterations
  try {
    grow.grad(x, y);
  } catch (ctg::autodiff_error const& e) {
    // kernel 'grow': adstack overflow in the ...: a thread needed ... bytes, ... were available;
    // raise ctg::adstack_capacity<N> (N = iterations per loop)
  }
  // [snippet end]
  raised = false;
  try {
    grow.grad(x, y);
  } catch (ctg::autodiff_error const& e) {
    raised = std::string(e.what()).find("adstack overflow") != std::string::npos;
  }
  check(raised, "adstack overflow");
  return 0;
}
