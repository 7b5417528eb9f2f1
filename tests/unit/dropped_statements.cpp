// CTG-EXPR-010 at the launch: a statement built on a line of its own and
// neither returned nor listed in a block is reported, naming the kernel, the
// field and the func, before anything runs; kernels that keep every statement
// (however they pass them around) are not.
#include <doctest/doctest.h>

#include <atomic>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <thread>
#include <utility>

#include "ad_test_support.hpp"

using namespace ctg::literals;

namespace {

// The message of the launch_error `launch` throws ("" if it throws none).
template <class Launch>
std::string launch_message(Launch&& launch) {
  return ad_test::message_of<ctg::launch_error>(launch);
}

bool contains(std::string const& s, std::string const& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a store dropped from a loop body that returns another statement is an error at the launch") {
  ctg::field<double, 1> a({4}, {.name = "a"}), b({4}, {.name = "b"});
  auto fill = ctg::kernel<"fill">([](auto a, auto b) {
    return ctg::range(a.size(), [=](auto i) {
      a[i] = 3.0;  // dropped: the body returns only the store into b
      return b[i] = 1.0;
    });
  });
  std::string const what = launch_message([&] { fill(a, b); });
  CHECK(contains(what, "kernel 'fill'"));
  CHECK(contains(what, "CTG-EXPR-010"));
  CHECK(contains(what, "a store into parameter #0 (field 'a'"));
  CHECK(contains(what, "Fix: return it"));
  // Reported before the launch ran: nothing was written.
  for (int i = 0; i < 4; ++i) {
    CHECK(std::as_const(a).at(i) == 0.0);
    CHECK(std::as_const(b).at(i) == 0.0);
  }
}

TEST_CASE("an assignment to a func's argument on a line of its own is CTG-EXPR-017 at the launch") {
  // Kept in the body, the same assignment fails to compile with the ID
  // (tests/compile_fail/expr017_assign_argument.cpp); dropped, only the
  // launch can see it, and the func would have returned v * 2 + 1 had the
  // argument been a reference.
  ctg::field<double, 1> x({4}, {.name = "x"}), y({4}, {.name = "y"});
  auto twice_plus_one = ctg::func<"twice_plus_one">([](auto e, auto v) {
    e = v * 2.0;  // a value: changes nothing the caller sees
    return e + 1.0;
  });
  auto k = ctg::kernel<"assign_argument">([=](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = twice_plus_one(y[i], x[i]); });
  });
  x.fill(1.0);
  std::string const what = launch_message([&] { k(x, y); });
  CHECK(contains(what, "kernel 'assign_argument' in func 'twice_plus_one'"));
  CHECK(contains(what, "CTG-EXPR-017 assignment to a value"));
  CHECK(contains(what, "Fix: a func that updates an element takes the field and the index"));
  for (int i = 0; i < 4; ++i) CHECK(std::as_const(y).at(i) == 0.0);
}

TEST_CASE("dropped statements of every kind are named, with the func that built them") {
  ctg::field<float, 1> x({8}, {.name = "x"}), y({8}, {.name = "y"});
  SUBCASE("an accumulation in a func") {
    auto add_twice = ctg::func<"add_twice">([](auto y, auto i, auto v) {
      y[i] += v;  // dropped
      return y[i] += v;
    });
    auto k = ctg::kernel<"accumulate">(
        [=](auto x, auto y) { return ctg::range(x.size(), [=](auto i) { return add_twice(y, i, x[i]); }); });
    std::string const what = launch_message([&] { k(x, y); });
    CHECK(contains(what, "kernel 'accumulate' in func 'add_twice'"));
    CHECK(contains(what, "an accumulation into parameter #1 (field 'y'"));
  }
  SUBCASE("a loop at the top of the kernel") {
    auto k = ctg::kernel<"two_loops">([](auto x, auto y) {
      ctg::range(x.size(), [=](auto i) { return x[i] = 1.0f; });  // dropped
      return ctg::range(y.size(), [=](auto i) { return y[i] = 2.0f; });
    });
    CHECK(contains(launch_message([&] { k(x, y); }), "a loop is written on a line of its own"));
  }
  SUBCASE("an if_, a block and a let local") {
    auto k = ctg::kernel<"branches">([](auto x, auto y) {
      return ctg::range(x.size(), [=](auto i) {
        return ctg::let(x[i], [=](auto v) {
          ctg::if_(v > 0.0f, y[i] = v);  // dropped
          return y[i] = -v;
        });
      });
    });
    CHECK(contains(launch_message([&] { k(x, y); }), "an if_ is written"));
    auto b = ctg::kernel<"blocks">([](auto x, auto y) {
      return ctg::range(x.size(), [=](auto i) {
        ctg::block(x[i] = 1.0f, y[i] = 2.0f);  // dropped
        return ctg::nothing;
      });
    });
    CHECK(contains(launch_message([&] { b(x, y); }), "a ctg::block is written"));
    auto l = ctg::kernel<"locals">([](auto x, auto y) {
      return ctg::range(x.size(), [=](auto i) {
        return ctg::let(x[i], [=](auto v) {
          v = v * 2.0f;  // dropped: y[i] receives x[i]
          return y[i] = v;
        });
      });
    });
    CHECK(contains(launch_message([&] { l(x, y); }), "an assignment to a let local"));
  }
  SUBCASE("k.grad reports it too, before touching a gradient") {
    ctg::field<double, 1, ctg::grad> u({4}, {.name = "u"}), w({4}, {.name = "w"});
    auto k = ctg::kernel<"grad_drop">([](auto u, auto w) {
      return ctg::range(u.size(), [=](auto i) {
        w[i] = u[i] * u[i];  // dropped
        return w[i] = u[i];
      });
    });
    w.grad().fill(1.0);
    CHECK(contains(launch_message([&] { k.grad(u, w); }), "a store into parameter #1 (field 'w'"));
    for (int i = 0; i < 4; ++i) CHECK(std::as_const(u).grad().at(i) == 0.0);
  }
}

TEST_CASE("statements kept in variables, reused, passed to funcs and built in every construct are not reported") {
  constexpr int n = 6;
  ctg::field<double, 1> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<double, 2> m({n, 3}, {.name = "m"});
  ctg::field<double, 0> hi({.name = "hi"});
  for (int i = 0; i < n; ++i) x.at(i) = i + 1.0;
  hi.at() = -1.0;
  auto scaled = ctg::func<"scaled">([](auto x, auto i) { return 2.0 * x[i]; });
  auto apply = ctg::func<"apply">([](auto s) { return ctg::block(s); });  // a statement as an argument
  auto k = ctg::kernel<"keeps_all">([=](auto x, auto y, auto m, auto hi) {
    auto first = ctg::range(x.size(), [=](auto i) {
      auto store = (y[i] = scaled(x, i));           // kept in a variable, then listed
      auto again = (y[i] = y[i] + 1.0);             // listed twice below
      return ctg::block(store, again, again,        // y = 2x + 2
                        ctg::static_range<3>([=](auto j) { return m(i, j) = x[i] * (j + 1); }),
                        ctg::let(0.0, [=](auto acc) {
                          return ctg::block(ctg::while_(acc < 2.0, acc += 1.0),
                                            ctg::if_(i > 2, apply(m(i, 0_c) = m(i, 0_c) + acc)));
                        }),
                        ctg::atomic_max(hi(), x[i]));
    });
    return ctg::block(first, ctg::nothing);
  });
  CHECK_NOTHROW(k(x, y, m, hi));
  for (int i = 0; i < n; ++i) {
    double const xi = i + 1.0;
    CHECK(std::as_const(y).at(i) == doctest::Approx(2 * xi + 2));
    CHECK(std::as_const(m).at(i, 0) == doctest::Approx(xi + (i > 2 ? 2.0 : 0.0)));
    CHECK(std::as_const(m).at(i, 2) == doctest::Approx(3 * xi));
  }
  CHECK(std::as_const(hi).at() == doctest::Approx(double(n)));
}

TEST_CASE("the count is per thread: a kernel that keeps its statements launches cleanly beside one that drops") {
  ctg::field<float, 1> a({64}, {.name = "a"}), b({64}, {.name = "b"});
  auto good = ctg::kernel<"good">([](auto a) { return ctg::range(a.size(), [=](auto i) { return a[i] = 1.0f; }); });
  auto bad = ctg::kernel<"bad">([](auto b) {
    return ctg::range(b.size(), [=](auto i) {
      b[i] = 1.0f;
      return b[i] = 2.0f;
    });
  });
  std::atomic<int> good_errors{0}, bad_errors{0};
  std::thread t([&] {
    for (int r = 0; r < 200; ++r) {
      try {
        good(a);
      } catch (ctg::error const&) {
        ++good_errors;
      }
    }
  });
  for (int r = 0; r < 200; ++r) {
    try {
      bad(b);
    } catch (ctg::launch_error const&) {
      ++bad_errors;
    }
  }
  t.join();
  CHECK(good_errors == 0);
  CHECK(bad_errors == 200);
}

TEST_CASE("on a tape, a launch that drops a statement throws and the tape's gradient is that of the other launches") {
  // loss = sum_i (3 x_i)^2; d loss / d x_i = 18 x_i.
  constexpr int n = 5;
  ctg::field<double, 1, ctg::grad> x({n}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<double, 0, ctg::grad> loss({.name = "loss"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.5 + i;
  auto triple = ctg::kernel<"triple">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = 3.0 * x[i]; });
  });
  auto scale_in_place = ctg::kernel<"scale_in_place">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) {
      y[i] = 2.0 * y[i];  // dropped
      return x[i] = x[i];
    });
  });
  auto square_sum = ctg::kernel<"square_sum">([](auto y, auto loss) {
    return ctg::range(y.size(), [=](auto i) { return loss() += y[i] * y[i]; });
  });
  {
    ctg::tape tape(loss);
    triple(x, y);
    CHECK(contains(launch_message([&] { scale_in_place(x, y); }), "kernel 'scale_in_place'"));
    square_sum(y, loss);
    tape.backward();
  }
  double expected_loss = 0;
  for (int i = 0; i < n; ++i) {
    double const xi = 0.5 + i;
    expected_loss += 9 * xi * xi;
    CHECK(std::as_const(x).grad().at(i) == doctest::Approx(18 * xi));
  }
  CHECK(std::as_const(loss).at() == doctest::Approx(expected_loss));
}
