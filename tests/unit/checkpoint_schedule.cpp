// ctg::checkpoint_schedule: the binomial schedule is valid (it reverses every
// step once, from the last to the first, never keeping more than S states)
// and runs the fewest forward steps possible, pinned against a dynamic
// program over all schedules of that kind written out here.
#include <doctest/doctest.h>

#include <algorithm>
#include <ctgrad/checkpoint.hpp>
#include <set>
#include <string>
#include <vector>

namespace {

using act = ctg::checkpoint_schedule::act;

// The fewest forward steps (beyond recording each step once) that reverse
// l steps from a kept state with c states kept at once, that one included:
// either recompute from the kept state every time (c = 1), or run m steps,
// keep the state there, reverse the last l - m steps with one state fewer
// and then the first m with all c.
struct optimum {
  std::vector<std::vector<long long>> cost;
  optimum(int steps, int snapshots)
      : cost(std::size_t(steps) + 1, std::vector<long long>(std::size_t(snapshots) + 1, 0)) {
    for (int l = 2; l <= steps; ++l)
      for (int c = 1; c <= snapshots; ++c) {
        if (c == 1) {
          cost[l][c] = (long long)l * (l - 1) / 2;
          continue;
        }
        long long best = -1;
        for (int m = 1; m < l; ++m) {
          long long const here = m + cost[std::size_t(l - m)][std::size_t(c - 1)] + cost[std::size_t(m)][std::size_t(c)];
          if (best < 0 || here < best) best = here;
        }
        cost[l][c] = best;
      }
  }
  long long operator()(int l, int c) const { return cost[std::size_t(l)][std::size_t(c)]; }
};

// Runs the actions on a model of the fields and checks each one is possible
// where it stands; returns the forward steps they ran beyond the records.
long long replay(ctg::checkpoint_schedule const& s) {
  int const steps = s.steps();
  std::set<int> stored;
  int at = 0;               // the step before which the fields hold the state; -1: none
  int next = steps - 1;     // the step to reverse next
  long long advanced = 0;
  std::size_t most = 0;
  std::vector<int> runs(std::size_t(steps), 0);
  for (std::size_t k = 0; k < s.actions().size(); ++k) {
    auto const& a = s.actions()[k];
    CAPTURE(k);
    switch (a.what) {
      case act::store:
        REQUIRE(at == a.step);
        stored.insert(a.step);
        most = std::max(most, stored.size());
        break;
      case act::advance:
        REQUIRE(at == a.step);
        REQUIRE(a.to > a.step);
        REQUIRE(a.to <= next);  // never beyond the step to reverse
        for (int t = a.step; t < a.to; ++t) ++runs[std::size_t(t)];
        advanced += a.to - a.step;
        at = a.to;
        break;
      case act::record:
        REQUIRE(at == a.step);
        REQUIRE(a.step == next);
        ++runs[std::size_t(a.step)];
        --next;
        at = -1;  // the adjoints leave the fields at no step boundary
        if (k + 1 == s.forward_part()) CHECK(a.step == steps - 1);
        break;
      case act::restore:
        REQUIRE(stored.count(a.step) == 1);
        at = a.step;
        break;
      case act::release:
        REQUIRE(stored.count(a.step) == 1);
        stored.erase(a.step);
        break;
    }
  }
  CHECK(next == -1);
  CHECK(stored.empty());
  CHECK(int(most) <= s.snapshots());
  CHECK(int(most) == s.most_stored());
  CHECK(*std::max_element(runs.begin(), runs.end()) == s.most_runs());
  return advanced;
}

}  // namespace

TEST_CASE("the binomial schedule is valid and minimal for every T <= 40 and S < T") {
  optimum const best(40, 40);
  for (int steps = 2; steps <= 40; ++steps)
    for (int snapshots = 1; snapshots < steps; ++snapshots) {
      CAPTURE(steps);
      CAPTURE(snapshots);
      ctg::checkpoint_schedule const s(steps, snapshots);
      long long const advanced = replay(s);
      CHECK(advanced == s.recomputed_steps());
      CHECK(advanced == best(steps, snapshots));
      CHECK(ctg::checkpoint_schedule::minimal_recomputations(steps, snapshots) == best(steps, snapshots));
      // The forward pass runs steps 0..T-2 once and records the last.
      CHECK(s.recomputed_in_backward() == advanced - (steps - 1));
      CHECK(s.stored_in_forward_pass().front() == 0);
    }
}

TEST_CASE("the binomial schedule at larger sizes: the dynamic program and the closed form") {
  optimum const best(300, 12);
  for (int steps : {57, 100, 128, 255, 300})
    for (int snapshots : {2, 3, 5, 8, 12}) {
      CAPTURE(steps);
      CAPTURE(snapshots);
      ctg::checkpoint_schedule const s(steps, snapshots);
      CHECK(replay(s) == best(steps, snapshots));
    }
  // Closed form (Griewank and Walther): r T - C(S + r, r - 1), with r the
  // smallest integer such that C(S + r, S) >= T. T = 10000, S = 100:
  // C(102, 2) = 5151 < 10000 <= C(103, 3) = 176851, so r = 3 and
  // 3 * 10000 - C(103, 2) = 30000 - 5253.
  ctg::checkpoint_schedule const big(10000, 100);
  CHECK(big.recomputed_steps() == 30000 - 5253);
  CHECK(replay(big) == 30000 - 5253);
  CHECK(big.most_runs() == 4);  // three advances and the record
  // S = 1: every step recomputed from the start, T (T - 1) / 2.
  CHECK(ctg::checkpoint_schedule(1000, 1).recomputed_steps() == 1000LL * 999 / 2);
  // S = ceil(sqrt(T)) for T = 1024: C(34, 2) = 561 < 1024 <= C(35, 3) = 6545,
  // r = 3: 3 * 1024 - C(35, 2) = 3072 - 595.
  CHECK(ctg::checkpoint_schedule(1024, 32).recomputed_steps() == 3072 - 595);
}

TEST_CASE("with as many snapshots as steps the schedule records every step and recomputes nothing") {
  for (int steps : {1, 2, 7}) {
    ctg::checkpoint_schedule const s(steps, steps);
    CHECK(s.records_everything());
    CHECK(s.recomputed_steps() == 0);
    CHECK(s.forward_part() == std::size_t(steps));
    CHECK(ctg::checkpoint_schedule::minimal_recomputations(steps, steps + 3) == 0);
  }
}

TEST_CASE("the schedule prints what it stores and recomputes") {
  ctg::checkpoint_schedule const s(10, 3);
  // T = 10, S = 3: C(5, 2) = 10 >= 10, r = 2: 2 * 10 - C(5, 1) = 15.
  CHECK(s.recomputed_steps() == 15);
  std::string const text = s.describe(true);
  CHECK(text.find("10 steps, 3 snapshots") != std::string::npos);
  CHECK(text.find("15 beyond the 10 of a full tape") != std::string::npos);
  CHECK(text.find("record step 9\n  -- backward():") != std::string::npos);
  CHECK(text.find("store the state before step 0") != std::string::npos);
  auto const stored = s.stored_in_forward_pass();
  std::string line = "stores the state before steps ";
  for (std::size_t k = 0; k < stored.size(); ++k) line += (k ? ", " : "") + std::to_string(stored[k]);
  CHECK(text.find(line + "; records step 9") != std::string::npos);
  CHECK_THROWS_AS(ctg::checkpoint_schedule(10, 0), ctg::autodiff_error);
}
