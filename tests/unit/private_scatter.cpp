// Scatters through index fields on more than one thread: a field the offload
// only adds into (forward) or only reads (its gradient, reverse) goes to
// per-thread copies summed after the loop (cpu::private_scatter) when the
// copies hold at most four elements per iteration; otherwise the adds stay
// atomic. Sums of small integers, exact in any order, against the scatter
// written out by hand; the classification of each kernel is asserted.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <ctgrad/ctgrad.hpp>
#include <vector>

#include "ad_test_support.hpp"

namespace {

template <class Offload, int Slots>
constexpr auto ownership_of(ctg::ir::kernel_ir<ctg::detail::tuple<Offload>, Slots> const&) {
  using traits = ctg::ir::offload_traits<Offload>;
  return ctg::ad::slot_ownership<typename traits::body, traits::axes, traits::parallel>{};
}

// bin[i] = (i * 7919) mod bins: every bin hit from all over the loop.
std::vector<int> spread_bins(int n, int bins) {
  std::vector<int> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out[std::size_t(i)] = int((std::int64_t(i) * 7919) % bins);
  return out;
}

}  // namespace

TEST_CASE("forward: += and -= through an index field, per-thread copies and the atomic fallback") {
  int const n = 300007;
  for (int bins : {1000, 2 * n}) {  // few elements: copies; more than the iterations: atomics
    CAPTURE(bins);
    ctg::field<double, 1> w({n}, {.name = "w"}), hist({bins}, {.name = "hist"});
    ctg::field<int, 1> bin({n}, {.name = "bin"});
    auto const b = spread_bins(n, bins);
    for (int i = 0; i < n; ++i) w.at(i) = double(i % 5), bin.at(i) = b[std::size_t(i)];
    auto scatter = ctg::kernel<"histogram">([](auto w, auto hist, auto bin) {
      return ctg::range(w.size(), [=](auto i) {
        return ctg::block(hist[bin[i]] += w[i] + 1.0, hist[bin[(i + 1) % w.size()]] -= 1.0);
      });
    });
    using own = decltype(ownership_of(scatter.ir(w, hist, bin)));
    CHECK(own::template only_accumulated<1>);
    CHECK(!own::template only_accumulated<0>);
    std::vector<double> expected(std::size_t(bins), 0.0);
    for (int i = 0; i < n; ++i) {
      expected[std::size_t(b[std::size_t(i)])] += double(i % 5) + 1.0;
      expected[std::size_t(b[std::size_t((i + 1) % n)])] -= 1.0;
    }
    for (int threads : {1, 4}) {
      CAPTURE(threads);
      ad_test::thread_scope pool(threads);
      for (int round = 0; round < 2; ++round) {
        hist.fill(0.5);  // the copies add to what is there
        scatter(w, hist, bin);
        int wrong = 0;
        for (int k = 0; k < bins; ++k) wrong += hist.at(k) != expected[std::size_t(k)] + 0.5;
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("forward: vectors scattered to both ends of springs") {
  int const masses = 4099, springs = 65536;
  using V = Eigen::Vector2d;
  ctg::field<V, 1> force({masses}, {.name = "force"});
  ctg::field<int, 1> a({springs}, {.name = "a"}), b({springs}, {.name = "b"});
  for (int s = 0; s < springs; ++s) a.at(s) = s % masses, b.at(s) = (s * 31 + 5) % masses;
  auto spread = ctg::kernel<"spring_ends">([](auto force, auto a, auto b) {
    return ctg::range(a.size(), [=](auto s) {
      return ctg::let(ctg::cast<double>(s % 3) * V(1.0, -2.0), [=](auto f) {
        return ctg::block(force[a[s]] += f, force[b[s]] -= f);
      });
    });
  });
  std::vector<V> expected(std::size_t(masses), V::Zero());
  for (int s = 0; s < springs; ++s) {
    V const f = double(s % 3) * V(1.0, -2.0);
    expected[std::size_t(s % masses)] += f;
    expected[std::size_t((s * 31 + 5) % masses)] -= f;
  }
  ad_test::thread_scope pool(4);
  force.fill(V::Zero());
  spread(force, a, b);
  int wrong = 0;
  for (int m = 0; m < masses; ++m) wrong += force.at(m) != expected[std::size_t(m)];
  CHECK(wrong == 0);
}

TEST_CASE("reverse: the gradient of a field read through an index field") {
  int const n = 200003, cells = 5003;
  ctg::field<double, 1, ctg::grad> x({cells}, {.name = "x"}), y({n}, {.name = "y"});
  ctg::field<int, 1> cell({n}, {.name = "cell"});
  auto const c = spread_bins(n, cells);
  for (int i = 0; i < n; ++i) cell.at(i) = c[std::size_t(i)];
  for (int k = 0; k < cells; ++k) x.at(k) = double(k % 3);
  // y[i] = 3 x[cell[i]] + x[cell[i]]^2: dy/dx[cell[i]] = 3 + 2 x[cell[i]].
  auto gather = ctg::kernel<"gather_cells">([](auto x, auto y, auto cell) {
    return ctg::range(y.size(), [=](auto i) { return y[i] = 3.0 * x[cell[i]] + x[cell[i]] * x[cell[i]]; });
  });
  using own = decltype(ownership_of(gather.ir(x, y, cell)));
  CHECK(own::template only_read<0>);
  CHECK(!own::template only_read<1>);
  std::vector<double> expected(std::size_t(cells), 0.0);
  for (int i = 0; i < n; ++i) {
    int const k = c[std::size_t(i)];
    expected[std::size_t(k)] += double(i % 4 + 1) * (3.0 + 2.0 * double(k % 3));
  }
  ad_test::thread_scope pool(4);
  gather(x, y, cell);
  for (int round = 0; round < 2; ++round) {
    x.grad().fill(0.0);
    for (int i = 0; i < n; ++i) y.grad().at(i) = double(i % 4 + 1);
    gather.grad(x, y, cell);
    int wrong = 0;
    for (int k = 0; k < cells; ++k) wrong += x.grad().at(k) != expected[std::size_t(k)];
    CHECK(wrong == 0);
  }
}

TEST_CASE("a field read and added into in one offload is not copied") {
  ctg::field<double, 1> acc({64}, {.name = "acc"});
  ctg::field<int, 1> bin({4096}, {.name = "bin"});
  auto k = ctg::kernel<"read_and_add">([](auto acc, auto bin) {
    return ctg::range(bin.size(), [=](auto i) { return acc[bin[i]] += acc[0] * 0.0 + 1.0; });
  });
  using own = decltype(ownership_of(k.ir(acc, bin)));
  CHECK(!own::template only_accumulated<0>);
}

TEST_CASE("a field passed twice is not copied: the other parameter sees what is added") {
  // Each element is added to by one iteration (perm is a permutation), and
  // the same iteration then reads it through the second parameter.
  int const n = 100003;
  ctg::field<double, 1> a({n}, {.name = "a"}), out({n}, {.name = "out"});
  ctg::field<int, 1> perm({n}, {.name = "perm"});
  for (int i = 0; i < n; ++i) perm.at(i) = int((std::int64_t(i) * 7919) % n), a.at(i) = double(i % 10);
  auto add_then_read = ctg::kernel<"add_then_read">([](auto a, auto b, auto out, auto perm) {
    return ctg::range(perm.size(), [=](auto i) { return ctg::block(a[perm[i]] += 1.0, out[i] = b[perm[i]]); });
  });
  using own = decltype(ownership_of(add_then_read.ir(a, a, out, perm)));
  CHECK(own::template only_accumulated<0>);
  ad_test::thread_scope pool(4);
  add_then_read(a, a, out, perm);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    int const k = int((std::int64_t(i) * 7919) % n);
    wrong += out.at(i) != double(k % 10) + 1.0 || a.at(k) != double(k % 10) + 1.0;
  }
  CHECK(wrong == 0);
}
