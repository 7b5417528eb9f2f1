// Checkpointed rollouts: the bad inputs (CTG-TAPE-005 to -008), each a clear
// error that leaves the fields as before the rollout (or, at backward(), with
// their final forward values) and the tape usable; and what surrounds a
// rollout on the same tape (launches before and after it that need values it
// overwrites, two rollouts, the free function, ctg::check_gradient).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ctgrad/ctgrad.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ad_test_support.hpp"

namespace {

using vec_t = ctg::field<double, 1, ctg::grad>;
using scal_t = ctg::field<double, 0, ctg::grad>;

constexpr int masses = 5;
constexpr double dt = 0.05;
constexpr auto kick = ctg::kernel<"ck_kick">([](auto x, auto v, auto k) {
  return ctg::range(x.size(), [=](auto i) { return v[i] += -dt * k() * ctg::sin(x[i]); });
});
constexpr auto drift = ctg::kernel<"ck_drift">([](auto x, auto v) {
  return ctg::range(x.size(), [=](auto i) { return x[i] += dt * v[i]; });
});
constexpr auto measure = ctg::kernel<"ck_measure">([](auto x, auto k, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += k() * x[i] * x[i]; });
});
// Before the rollout: a penalty on the initial state (its adjoint needs the
// x the rollout overwrites).
constexpr auto penalty = ctg::kernel<"ck_penalty">([](auto x, auto loss) {
  return ctg::range(x.size(), [=](auto i) { return loss() += 0.1 * x[i] * x[i] * x[i] * x[i]; });
});
// After it: k changed in place (the steps read the old k).
constexpr auto soften = ctg::kernel<"ck_soften">([](auto k) { return k() = 0.5 * k() + 0.1 * k() * k(); });
// Copies x into a buffer (written, not read), and uses it (read).
constexpr auto keep = ctg::kernel<"ck_keep">([](auto x, auto kept) {
  return ctg::range(x.size(), [=](auto i) { return kept[i] = x[i]; });
});
constexpr auto pull = ctg::kernel<"ck_pull">([](auto kept, auto v) {
  return ctg::range(v.size(), [=](auto i) { return v[i] += -0.01 * ctg::sin(kept[i]); });
});

struct pendulums {
  vec_t x{{masses}, {.name = "x"}}, v{{masses}, {.name = "v"}};
  scal_t k{{.name = "k"}}, loss{{.name = "loss"}};
  std::vector<double> start{0.3, 0.7, 1.1, 1.5, 1.9};
  void reset() {
    x.copy_from(start);
    v.fill(0.0);
    k.at() = 1.7;
    loss.at() = 0;
  }
  void step(int) {
    kick(x, v, k);
    drift(x, v);
  }
  // Gradients, final values and loss, flat.
  std::vector<double> outcome() const {
    std::vector<double> out;
    for (auto const& e : {x.grad().to_vector(), v.grad().to_vector(), x.to_vector(), v.to_vector()})
      out.insert(out.end(), e.begin(), e.end());
    out.push_back(std::as_const(k).at());
    out.push_back(k.grad().at());
    out.push_back(std::as_const(loss).at());
    return out;
  }
};

// The gradient of `steps` steps on the full tape.
std::vector<double> full_tape(pendulums& p, int steps) {
  p.reset();
  {
    ctg::tape tape(p.loss);
    for (int t = 0; t < steps; ++t) p.step(t);
    measure(p.x, p.k, p.loss);
    tape.backward();
  }
  return p.outcome();
}

bool same(std::vector<double> const& a, std::vector<double> const& b) { return a == b; }

}  // namespace

TEST_CASE("CTG-TAPE-005: a budget below one state, before anything ran or after the first step; the tape goes on") {
  ad_test::thread_scope one(1);
  pendulums p;
  auto const expected = full_tape(p, 20);
  p.reset();
  ctg::tape tape(p.loss);
  int calls = 0;
  auto step = [&](int t) {
    ++calls;
    p.step(t);
  };
  CHECK_THROWS_WITH_AS(tape.rollout(20, step, ctg::checkpoint{.snapshots = 0}),
                       doctest::Contains("CTG-TAPE-005 ctg::checkpoint{.snapshots = 0}"), ctg::autodiff_error);
  CHECK(calls == 0);
  // x and v, 80 bytes, are what the first step writes; k is read.
  try {
    tape.rollout(20, step, ctg::checkpoint{.bytes = 50});
    FAIL("no error");
  } catch (ctg::autodiff_error const& e) {
    std::string const what = e.what();
    CHECK(what.find("CTG-TAPE-005") != std::string::npos);
    CHECK(what.find("x, v, k, 88 bytes") != std::string::npos);
  }
  CHECK(calls == 1);
  // Nothing lost: the fields are as before the rollout, and the tape records on.
  CHECK(p.x.to_vector() == p.start);
  CHECK(p.v.to_vector() == std::vector<double>(masses, 0.0));
  auto const& info = tape.rollout(20, step, ctg::checkpoint{.bytes = 88 * 3});
  CHECK(info.snapshots == 3);
  measure(p.x, p.k, p.loss);
  tape.backward();
  CHECK(same(p.outcome(), expected));
}

TEST_CASE("CTG-TAPE-006: a step that swaps handles launches on other fields when run again") {
  ad_test::thread_scope one(1);
  pendulums p;
  // Ping-pong between two velocity buffers whose handles the step swaps.
  vec_t w({masses}, {.name = "w"});
  constexpr auto kick_into = ctg::kernel<"ck_kick_into">([](auto x, auto v, auto next_v, auto k) {
    return ctg::range(x.size(), [=](auto i) { return next_v[i] = v[i] - dt * k() * ctg::sin(x[i]); });
  });
  p.reset();
  w.fill(0.0);
  std::vector<double> final_x;
  {
    ctg::tape tape(p.loss);
    vec_t a = p.v, b = w;
    tape.rollout(12, [&](int) {
      kick_into(p.x, a, b, p.k);
      drift(p.x, b);
      std::swap(a, b);
    }, ctg::checkpoint{.snapshots = 3});
    measure(p.x, p.k, p.loss);
    final_x = p.x.to_vector();
    auto const final_v = p.v.to_vector(), final_w = w.to_vector();
    CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("CTG-TAPE-006 rollout step"), ctg::autodiff_error);
    // The fields keep their final forward values.
    CHECK(p.x.to_vector() == final_x);
    CHECK(p.v.to_vector() == final_v);
    CHECK(w.to_vector() == final_w);
  }
  // Fixed: the buffers picked from the step number.
  auto const expected = [&] {
    p.reset();
    w.fill(0.0);
    ctg::tape tape(p.loss);
    for (int t = 0; t < 12; ++t) {
      kick_into(p.x, t % 2 ? w : p.v, t % 2 ? p.v : w, p.k);
      drift(p.x, t % 2 ? p.v : w);
    }
    measure(p.x, p.k, p.loss);
    tape.backward();
    return p.outcome();
  }();
  p.reset();
  w.fill(0.0);
  {
    ctg::tape tape(p.loss);
    tape.rollout(12, [&](int t) {
      kick_into(p.x, t % 2 ? w : p.v, t % 2 ? p.v : w, p.k);
      drift(p.x, t % 2 ? p.v : w);
    }, ctg::checkpoint{.snapshots = 3});
    measure(p.x, p.k, p.loss);
    tape.backward();
  }
  CHECK(same(p.outcome(), expected));
  CHECK(p.x.to_vector() == final_x);  // the swapped handles ran the same trajectory forward
}

TEST_CASE("CTG-TAPE-006: a field the steps only wrote, then read, is carried by no snapshot") {
  ad_test::thread_scope one(1);
  pendulums p;
  vec_t kept({masses}, {.name = "kept"});
  p.reset();
  ctg::tape tape(p.loss);
  auto step = [&](int t) {
    p.step(t);
    if (t < 5)
      keep(p.x, kept);  // written, not read ...
    else
      pull(kept, p.v);  // ... then read from step 5 on
  };
  // With 9 snapshots for 10 steps the forward pass stores the state before
  // every step: the ones before steps 1 to 4 were taken without `kept`.
  CHECK_THROWS_WITH_AS(tape.rollout(10, step, ctg::checkpoint{.snapshots = 9}),
                       doctest::Contains("reads field 'kept', which the steps wrote from step 0 on without reading it"),
                       ctg::autodiff_error);
  CHECK(p.x.to_vector() == p.start);
  CHECK(kept.to_vector() == std::vector<double>(masses, 0.0));
  // Fixed: the rollout starts where the field is first read.
  for (int t = 0; t < 5; ++t) step(t);
  tape.rollout(5, [&](int t) { step(t + 5); }, ctg::checkpoint{.snapshots = 2});
  measure(p.x, p.k, p.loss);
  tape.backward();
  auto const got = p.outcome();
  p.reset();
  kept.fill(0.0);
  {
    ctg::tape full(p.loss);
    for (int t = 0; t < 10; ++t) step(t);
    measure(p.x, p.k, p.loss);
    full.backward();
  }
  CHECK(same(got, p.outcome()));
}

TEST_CASE("CTG-TAPE-006: a step that keeps its own clock passes other numbers when run again") {
  ad_test::thread_scope one(1);
  pendulums p;
  // A forcing that depends on the time and on a push the host computes from
  // it: a number and a fixed-size matrix the kernel takes as arguments.
  constexpr auto force = ctg::kernel<"ck_force">([](auto x, auto v, auto k, double time, Eigen::Vector2d push) {
    return ctg::range(x.size(), [=](auto i) {
      return v[i] += dt * (-k() * ctg::sin(x[i]) + push[1] * ctg::cos(3.0 * time) + push[0] * x[i]);
    });
  });
  auto const push_at = [](double time) { return Eigen::Vector2d(0.2 * time, 0.5); };
  // The full tape runs each step once, so a clock the step advances itself is
  // right there: the reference.
  auto const expected = [&] {
    p.reset();
    ctg::tape tape(p.loss);
    double time = 0;
    for (int t = 0; t < 12; ++t) {
      force(p.x, p.v, p.k, time, push_at(time));
      drift(p.x, p.v);
      time += dt;
    }
    measure(p.x, p.k, p.loss);
    tape.backward();
    return p.outcome();
  }();
  // backward() runs steps 8 to 11 again from a snapshot, when the clock has
  // moved past them: the first run again refused, wherever the clock is read.
  for (bool clock_in_push : {false, true}) {
    CAPTURE(clock_in_push);
    p.reset();
    ctg::tape tape(p.loss);
    double time = 0;
    tape.rollout(12, [&](int) {
      force(p.x, p.v, p.k, clock_in_push ? 0.0 : time, push_at(clock_in_push ? time : 0.0));
      drift(p.x, p.v);
      time += dt;
    }, ctg::checkpoint{.snapshots = 3});
    measure(p.x, p.k, p.loss);
    auto const final_x = p.x.to_vector(), final_v = p.v.to_vector();
    std::string const what = ad_test::message_of<ctg::autodiff_error>([&] { tape.backward(); });
    CHECK(what.find("CTG-TAPE-006 rollout step ") == 0);
    CHECK(what.find(", run again by backward() from a snapshot, launched kernel 'ck_force' (launch #") !=
          std::string::npos);
    CHECK(what.find("with other number or matrix arguments than when it first ran") != std::string::npos);
    CHECK(p.x.to_vector() == final_x);
    CHECK(p.v.to_vector() == final_v);
  }
  // Fixed: the time computed from the step number.
  p.reset();
  {
    ctg::tape tape(p.loss);
    tape.rollout(12, [&](int t) {
      force(p.x, p.v, p.k, t * dt, push_at(t * dt));
      drift(p.x, p.v);
    }, ctg::checkpoint{.snapshots = 3});
    measure(p.x, p.k, p.loss);
    tape.backward();
  }
  auto const got = p.outcome();
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    // t * dt and a sum of dt agree to a few ulps, not to the bit.
    CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-12));
  }
}

TEST_CASE("CTG-TAPE-007: the host writes a field the steps read, between steps or inside one") {
  ad_test::thread_scope one(1);
  pendulums p;
  auto const expected = full_tape(p, 16);
  SUBCASE("between steps: found in the forward pass, the fields put back") {
    p.reset();
    ctg::tape tape(p.loss);
    try {
      tape.rollout(16, [&](int t) {
        if (t == 6) p.k.fill(1.7);  // a write, even of the same value
        p.step(t);
      }, ctg::checkpoint{.snapshots = 4});
      FAIL("no error");
    } catch (ctg::autodiff_error const& e) {
      std::string const what = e.what();
      CHECK(what.find("CTG-TAPE-007 rollout step 6") != std::string::npos);
      CHECK(what.find("field 'k', which the steps read, was written by the host") != std::string::npos);
    }
    CHECK(p.x.to_vector() == p.start);
    CHECK(p.v.to_vector() == std::vector<double>(masses, 0.0));
    // Fixed: set it before the rollout. Reading it through a non-const
    // handle in a step is no write.
    double seen = 0;
    tape.rollout(16, [&](int t) {
      seen += p.k.at();
      p.step(t);
    }, ctg::checkpoint{.snapshots = 4});
    measure(p.x, p.k, p.loss);
    tape.backward();
    CHECK(same(p.outcome(), expected));
    CHECK(seen > 0);
  }
  SUBCASE("before the first launch that reads it: found when backward() runs the step again") {
    p.reset();
    std::vector<double> final_x;
    {
      ctg::tape tape(p.loss);
      tape.rollout(16, [&](int t) {
        if (t == 0) p.k.fill(1.7);
        p.step(t);
      }, ctg::checkpoint{.snapshots = 4});
      measure(p.x, p.k, p.loss);
      final_x = p.x.to_vector();
      CHECK_THROWS_WITH_AS(tape.backward(), doctest::Contains("CTG-TAPE-007 rollout step 0, run again by backward()"),
                           ctg::autodiff_error);
    }
    CHECK(p.x.to_vector() == final_x);
  }
}

TEST_CASE("CTG-TAPE-008: rollouts where none can run") {
  pendulums p;
  p.reset();
  auto step = [&](int t) { p.step(t); };
  {
    ctg::tape tape(p.loss);
    CHECK_THROWS_WITH_AS(tape.rollout(-1, step), doctest::Contains("CTG-TAPE-008"), ctg::autodiff_error);
    CHECK_THROWS_WITH_AS(tape.rollout(4, step, ctg::checkpoint{.snapshots = 2, .bytes = 1000}),
                         doctest::Contains("both .snapshots and .bytes"), ctg::autodiff_error);
    CHECK_THROWS_WITH_AS(tape.rollout(4, [&](int) { tape.rollout(2, step); }, ctg::checkpoint{.snapshots = 2}),
                         doctest::Contains("rollouts do not nest"), ctg::autodiff_error);
    tape.backward();
    CHECK_THROWS_WITH_AS(tape.rollout(4, step), doctest::Contains("after its backward()"), ctg::autodiff_error);
  }
  ctg::tape strict(p.loss, ctg::tape_options{.strict = true});
  CHECK_THROWS_WITH_AS(strict.rollout(4, step, ctg::checkpoint{.snapshots = 2}),
                       doctest::Contains("CTG-TAPE-008 ctg::tape::rollout with a checkpoint budget on a strict tape"),
                       ctg::autodiff_error);
}

TEST_CASE("launches before and after a rollout that need what it overwrites, and two rollouts on one tape") {
  ad_test::thread_scope one(1);
  pendulums p;
  auto record = [&](bool checkpointed) {
    p.reset();
    ctg::tape tape(p.loss);
    penalty(p.x, p.loss);
    auto step = [&](int t) { p.step(t); };
    if (checkpointed) {
      tape.rollout(25, step, ctg::checkpoint{.snapshots = 3});
      soften(p.k);
      tape.rollout(18, step, ctg::checkpoint{.snapshots = 2});
    } else {
      for (int t = 0; t < 25; ++t) step(t);
      soften(p.k);
      for (int t = 0; t < 18; ++t) step(t);
    }
    soften(p.k);
    measure(p.x, p.k, p.loss);
    tape.backward();
    return p.outcome();
  };
  auto const expected = record(false);
  CHECK(same(record(true), expected));
  // The penalty's gradient took part: against central differences of the same loss.
  auto plain = [&](std::vector<double> const& x0) {
    std::vector<double> x = x0, v(masses, 0.0);
    double k = 1.7, loss = 0;
    for (double e : x) loss += 0.1 * e * e * e * e;
    auto steps = [&](int n) {
      for (int t = 0; t < n; ++t)
        for (int i = 0; i < masses; ++i) {
          v[std::size_t(i)] += -dt * k * std::sin(x[std::size_t(i)]);
          x[std::size_t(i)] += dt * v[std::size_t(i)];
        }
    };
    steps(25);
    k = 0.5 * k + 0.1 * k * k;
    steps(18);
    k = 0.5 * k + 0.1 * k * k;
    for (double e : x) loss += k * e * e;
    return loss;
  };
  auto const g = ad_test::fd_gradient(plain, p.start);
  for (int i = 0; i < masses; ++i) CHECK(expected[std::size_t(i)] == doctest::Approx(g[std::size_t(i)]).epsilon(1e-6));
}

TEST_CASE("ctg::rollout: on the recording tape, or a plain loop; inside ctg::check_gradient") {
  pendulums p;
  p.reset();
  int calls = 0;
  CHECK(ctg::rollout(7, [&](int t) { ++calls, p.step(t); }, ctg::checkpoint{.snapshots = 2}) == nullptr);
  CHECK(calls == 7);
  vec_t x0({masses}, {.name = "x0"});
  x0.copy_from(p.start);
  auto simulate = [&] {
    keep(x0, p.x);
    p.v.fill(0.0);
    p.loss.fill(0.0);
    auto const* info = ctg::rollout(30, [&](int t) { p.step(t); }, ctg::checkpoint{.snapshots = 4});
    if (info) CHECK(info->snapshots == 4);
    measure(p.x, p.k, p.loss);
  };
  auto const r = ctg::check_gradient(simulate, p.loss, x0, p.k);
  CHECK(r.worst_relative_error < 1e-6);
}
