// Interleaved iterations (eval/interleave.hpp, ad/interleave.hpp): the
// forward and reverse passes of a 1-D parallel offload whose body carries a
// value through a nested loop step several iterations together on the host.
// Every result is compared bit for bit with the same body run as a
// serial_range (one iteration after another, never interleaved), and
// against a plain C++ loop or finite differences, on launch sizes below, at
// and around the number of lanes, on one and several threads; which kernels
// interleave is asserted, so that the comparison cannot pass on the plain
// path.
#include <doctest/doctest.h>

#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

using doctest::Approx;
using namespace ctg::literals;

namespace {

using f1 = ctg::field<float, 1, ctg::grad>;
using d1 = ctg::field<double, 1, ctg::grad>;

// v = sin(v) a + x[i] b, `iters` times: a chain of dependent operations.
constexpr auto recurrence_body = [](auto x, auto out, int iters, float a, float b) {
  return [=](auto i) {
    return ctg::let(0.0f, [=](auto v) {
      return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * a + x[i] * b; }), out[i] = v);
    });
  };
};
auto recurrence = ctg::kernel<"recurrence">([](auto x, auto out, int iters, float a, float b) {
  return ctg::range(x.size(), recurrence_body(x, out, iters, a, b));
});
auto recurrence_serial = ctg::kernel<"recurrence_serial">([](auto x, auto out, int iters, float a, float b) {
  return ctg::serial_range(x.size(), recurrence_body(x, out, iters, a, b));
});

// Two carried locals (one a vector) through two nested invariant loops, a
// local declared inside the outer one, an index guard, an if_ and a loop
// whose bound differs between iterations (these two run on each iteration
// in turn), and two stores after the loops; the nested loops' indices are
// read.
constexpr auto rich_body = [](auto x, auto y, auto z, int outer, int inner, double c) {
  return [=](auto i) {
    return ctg::let(x[i], ctg::vec(x[i], 1.0), [=](auto s, auto p) {
      return ctg::block(
          ctg::range(outer, [=](auto k) {
            return ctg::let(0.5 * s, [=](auto t) {
              return ctg::block(
                  ctg::range(inner, [=](auto j) {
                    return s = ctg::select(i > 2, ctg::sin(s) * c + t, s * c) + x[i] * 0.1 + 0.01 * j;
                  }),
                  ctg::if_(s > 0.0, p = ctg::vec(p[1_c] + s, p[0_c] * c - 0.1 * k), p = ctg::vec(p[0_c] - s, p[1_c])),
                  ctg::range(i % 3, [=](auto) { return s = s * 0.9 + 0.01; }));
            });
          }),
          y[i] = s + p[0_c], z[i] = p[1_c] * s);
    });
  };
};
auto rich = ctg::kernel<"rich">([](auto x, auto y, auto z, int outer, int inner, double c) {
  return ctg::range(x.size(), rich_body(x, y, z, outer, inner, c));
});
auto rich_serial = ctg::kernel<"rich_serial">([](auto x, auto y, auto z, int outer, int inner, double c) {
  return ctg::serial_range(x.size(), rich_body(x, y, z, outer, inner, c));
});

// Funcs (one whose value comes from a let block, one that stores), a
// custom gradient and assignments to one component of a vector local, in
// and after the stepped loop.
inline auto soft = ctg::custom_gradient<"soft_abs">(ad_test::soft_abs{1e-3});
inline auto squash = ctg::func<"squash">([](auto t) {
  return ctg::let(ctg::tanh(t), [=](auto c) { return ctg::block(ctg::result(c * (1.5 - 0.5 * c * c))); });
});
inline auto put = ctg::func<"put">([](auto out, auto i, auto value) { return out[i] = value; });
constexpr auto funcs_body = [](auto x, auto y, int steps) {
  return [=](auto i) {
    return ctg::let(ctg::vec(x[i], 0.5), [=](auto p) {
      return ctg::block(ctg::range(steps, [=](auto j) {
                          return ctg::block(p[0_c] = squash(p[0_c] * 1.3 + p[1_c]) + 0.01 * j,
                                            p[1_c] = soft(p[1_c] - p[0_c]) * 0.7);
                        }),
                        put(y, i, p[0_c] * p[1_c] + x[i]));
    });
  };
};
auto funcs = ctg::kernel<"funcs">([](auto x, auto y, int steps) { return ctg::range(x.size(), funcs_body(x, y, steps)); });
auto funcs_serial = ctg::kernel<"funcs_serial">(
    [](auto x, auto y, int steps) { return ctg::serial_range(x.size(), funcs_body(x, y, steps)); });

// Sizes below, at and around the lanes, and launches that the pool splits
// into chunks whose lengths are not multiples of the lanes.
constexpr int sizes[] = {1, 7, 8, 9, 17, 1001, 5003};

}  // namespace

TEST_CASE("interleaved iterations: the recurrence and its adjoint, bit for bit the serial order, on 1-3 threads") {
  static_assert(decltype(recurrence)::interleaves_forward<f1, f1, int, float, float>());
  static_assert(decltype(recurrence)::interleaves_adjoint<f1, f1, int, float, float>());
  static_assert(!decltype(recurrence_serial)::interleaves_forward<f1, f1, int, float, float>());
  constexpr int iters = 37;
  constexpr float a = 0.9f, b = 0.7f;
  for (int threads : {1, 2, 3}) {
    ad_test::thread_scope scope(threads);
    for (int n : sizes) {
      f1 x({n}, {.name = "x"}), out({n}, {.name = "out"}), serial_out({n}, {.name = "serial_out"});
      for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.37f * float(i)) + 0.1f;
      recurrence(x, out, iters, a, b);
      recurrence_serial(x, serial_out, iters, a, b);
      for (int i = 0; i < n; ++i) {
        float v = 0.0f;
        for (int j = 0; j < iters; ++j) v = std::sin(v) * a + x.at(i) * b;
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(out.at(i) == serial_out.at(i));
        REQUIRE(out.at(i) == Approx(v).epsilon(1e-6));
      }
      // The adjoint: x's gradient from out's seed, by hand (v_{j+1} =
      // sin(v_j) a + x b: dx += g b, g <- g a cos(v_j)) and serially.
      auto seed = [&](f1& o) {
        for (int i = 0; i < n; ++i) o.grad().at(i) = 1.0f + 0.25f * std::cos(0.3f * float(i));
      };
      seed(out);
      recurrence.grad(x, out, iters, a, b);
      std::vector<float> const interleaved = x.grad().to_vector();
      x.zero_grad();
      seed(serial_out);
      recurrence_serial.grad(x, serial_out, iters, a, b);
      for (int i = 0; i < n; ++i) {
        std::vector<float> history(iters);
        float v = 0.0f;
        for (int j = 0; j < iters; ++j) history[std::size_t(j)] = v, v = std::sin(v) * a + x.at(i) * b;
        float g = 1.0f + 0.25f * std::cos(0.3f * float(i)), dx = 0.0f;
        for (int j = iters - 1; j >= 0; --j) dx += g * b, g = g * a * std::cos(history[std::size_t(j)]);
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(interleaved[std::size_t(i)] == x.grad().at(i));
        REQUIRE(interleaved[std::size_t(i)] == Approx(dx).epsilon(1e-5));
        REQUIRE(out.grad().at(i) == 0.0f);  // the store's seed is consumed
      }
      // The value and the gradient in one sweep, interleaved too.
      static_assert(decltype(recurrence)::fuses_value_and_gradient<f1, f1, int, float, float>());
      f1 fused_out({n}, {.name = "fused_out"});
      seed(fused_out);
      x.zero_grad();
      recurrence.value_and_grad(x, fused_out, iters, a, b);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(fused_out.at(i) == serial_out.at(i));
        REQUIRE(x.grad().at(i) == interleaved[std::size_t(i)]);
      }
    }
  }
}

TEST_CASE("interleaved iterations: nested loops, a vector local, guards, an if_ and varying bounds, bit for bit") {
  static_assert(decltype(rich)::interleaves_forward<d1, d1, d1, int, int, double>());
  static_assert(decltype(rich)::interleaves_adjoint<d1, d1, d1, int, int, double>());
  for (int threads : {1, 2, 3}) {
    ad_test::thread_scope scope(threads);
    for (int n : sizes) {
      d1 x({n}, {.name = "x"}), y({n}, {.name = "y"}), z({n}, {.name = "z"});
      d1 sy({n}, {.name = "sy"}), sz({n}, {.name = "sz"});
      for (int i = 0; i < n; ++i) x.at(i) = std::cos(0.11 * i) - 0.3;
      rich(x, y, z, 3, 5, 0.8);
      rich_serial(x, sy, sz, 3, 5, 0.8);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(y.at(i) == sy.at(i));
        REQUIRE(z.at(i) == sz.at(i));
      }
      // The adjoint, bit for bit the serial one, and against finite
      // differences of the serial kernel on a few elements.
      auto seed = [&](d1& yy, d1& zz) {
        for (int i = 0; i < n; ++i) yy.grad().at(i) = 1.0 + 0.1 * (i % 7), zz.grad().at(i) = 0.5 - 0.05 * (i % 5);
      };
      seed(y, z);
      rich.grad(x, y, z, 3, 5, 0.8);
      std::vector<double> const interleaved = x.grad().to_vector();
      x.zero_grad();
      seed(sy, sz);
      rich_serial.grad(x, sy, sz, 3, 5, 0.8);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(interleaved[std::size_t(i)] == x.grad().at(i));
      }
      for (int i : {0, n / 2, n - 1}) {
        auto loss_at = [&](double xi) {
          d1 xx({n}, {.name = "xx"}), yy({n}, {.name = "yy"}), zz({n}, {.name = "zz"});
          for (int k = 0; k < n; ++k) xx.at(k) = x.at(k);
          xx.at(i) = xi;
          rich_serial(xx, yy, zz, 3, 5, 0.8);
          return (1.0 + 0.1 * (i % 7)) * yy.at(i) + (0.5 - 0.05 * (i % 5)) * zz.at(i);
        };
        double const h = 1e-6, x0 = x.at(i);
        INFO("n = " << n << ", i = " << i);
        CHECK(interleaved[std::size_t(i)] == Approx((loss_at(x0 + h) - loss_at(x0 - h)) / (2 * h)).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("interleaved iterations: funcs, a custom gradient and component assignments, bit for bit") {
  static_assert(decltype(funcs)::interleaves_forward<d1, d1, int>());
  static_assert(decltype(funcs)::interleaves_adjoint<d1, d1, int>());
  for (int threads : {1, 3}) {
    ad_test::thread_scope scope(threads);
    for (int n : sizes) {
      d1 x({n}, {.name = "x"}), y({n}, {.name = "y"}), sy({n}, {.name = "sy"});
      for (int i = 0; i < n; ++i) x.at(i) = std::sin(0.21 * i) * 0.8;
      funcs(x, y, 6);
      funcs_serial(x, sy, 6);
      for (int i = 0; i < n; ++i) y.grad().at(i) = sy.grad().at(i) = 1.0 - 0.01 * (i % 9);
      funcs.grad(x, y, 6);
      std::vector<double> const interleaved = x.grad().to_vector();
      x.zero_grad();
      funcs_serial.grad(x, sy, 6);
      for (int i = 0; i < n; ++i) {
        INFO("n = " << n << ", i = " << i << ", threads = " << threads);
        REQUIRE(y.at(i) == sy.at(i));
        REQUIRE(interleaved[std::size_t(i)] == x.grad().at(i));
      }
      // One element's gradient against finite differences of the serial kernel.
      int const i = n / 2;
      auto value_at = [&](double xi) {
        d1 xx({n}, {.name = "xx"}), yy({n}, {.name = "yy"});
        for (int k = 0; k < n; ++k) xx.at(k) = x.at(k);
        xx.at(i) = xi;
        funcs_serial(xx, yy, 6);
        return (1.0 - 0.01 * (i % 9)) * yy.at(i);
      };
      double const h = 1e-6, x0 = x.at(i);
      CHECK(interleaved[std::size_t(i)] == Approx((value_at(x0 + h) - value_at(x0 - h)) / (2 * h)).epsilon(1e-6));
    }
  }
}

TEST_CASE("interleaved iterations: an adstack overflow in a lane is reported as without lanes") {
  // The while_ runs on each lane in turn, inside the stepped loop, and
  // needs more snapshots than the capacity allows for the larger inputs.
  auto grows = ctg::kernel<"grows", ctg::adstack_capacity<4>>([](auto x, auto out, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = v * 0.9 + 0.05; }),
                          ctg::while_(v < 10.0, v = v * 1.5 + x[i]), out[i] = v);
      });
    });
  });
  static_assert(decltype(grows)::interleaves_adjoint<d1, d1, int>());
  constexpr int n = 19;
  d1 x({n}, {.name = "x"}), out({n}, {.name = "out"});
  for (int i = 0; i < n; ++i) x.at(i) = 0.05 + 0.01 * i;
  grows(x, out, 3);
  out.grad().fill(1.0);
  bool thrown = false;
  try {
    grows.grad(x, out, 3);
  } catch (ctg::autodiff_error const& e) {
    thrown = true;
    std::string const what = e.what();
    CHECK(what.find("grows") != std::string::npos);
    CHECK(what.find("adstack overflow") != std::string::npos);
  }
  CHECK(thrown);
}

TEST_CASE("interleaved iterations: only bodies whose serial order interleaving keeps, bit for bit") {
  // An accumulation (its sum would round in another order).
  auto accumulates = ctg::kernel<"accumulates">([](auto x, auto loss, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = v * 0.5 + x[i]; }), loss() += v);
      });
    });
  });
  static_assert(!decltype(accumulates)::interleaves_forward<d1, ctg::field<double, 0, ctg::grad>, int>());
  // A store inside the nested loop.
  auto stores_in_loop = ctg::kernel<"stores_in_loop">([](auto x, auto y, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::range(iters, [=](auto) { return ctg::block(v = v * 0.5 + x[i], y[i] = v); });
      });
    });
  });
  static_assert(!decltype(stores_in_loop)::interleaves_forward<d1, d1, int>());
  // A field read and written.
  auto updates = ctg::kernel<"updates">([](auto x, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = v * 0.5 + 1.0; }), x[i] = v);
      });
    });
  });
  static_assert(!decltype(updates)::interleaves_forward<d1, int>());
  // No loop carrying a local: a loop whose locals are its own, and a map.
  auto own_locals = ctg::kernel<"own_locals">([](auto x, auto y, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::block(ctg::range(iters, [=](auto) {
                          return ctg::let(x[i], [=](auto v) { return v = v * 2.0; });
                        }),
                        y[i] = x[i]);
    });
  });
  static_assert(!decltype(own_locals)::interleaves_forward<d1, d1, int>());
  auto map = ctg::kernel<"map">([](auto x, auto y) {
    return ctg::range(x.size(), [=](auto i) { return y[i] = ctg::sin(x[i]) * x[i]; });
  });
  static_assert(!decltype(map)::interleaves_forward<d1, d1>());
  // Every iteration reads p[0], whose gradient they all add into: the
  // forward pass interleaves, the adjoint does not (the sum would round in
  // another order).
  auto shared_read = ctg::kernel<"shared_read">([](auto x, auto p, auto y, int iters) {
    return ctg::range(x.size(), [=](auto i) {
      return ctg::let(x[i], [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = ctg::sin(v) * p[0]; }), y[i] = v);
      });
    });
  });
  static_assert(decltype(shared_read)::interleaves_forward<d1, d1, d1, int>());
  static_assert(!decltype(shared_read)::interleaves_adjoint<d1, d1, d1, int>());
  // Two axes: only 1-D offloads interleave.
  auto grid = ctg::kernel<"grid">([](auto u, auto w, int iters) {
    return ctg::ndrange(u.shape(0_c), u.shape(1_c), [=](auto i, auto j) {
      return ctg::let(0.0, [=](auto v) {
        return ctg::block(ctg::range(iters, [=](auto) { return v = v * 0.5 + u(i, j); }), w(i, j) = v);
      });
    });
  });
  static_assert(!decltype(grid)::interleaves_forward<ctg::field<double, 2>, ctg::field<double, 2>, int>());
  CHECK(true);
}
