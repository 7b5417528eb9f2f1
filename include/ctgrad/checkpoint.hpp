// Checkpointed rollouts: what a ctg::tape needs to reverse T steps while it
// keeps at most S copies of the state (tape.rollout, see tape.hpp).
//
//   ctg::tape tape(loss);
//   tape.rollout(10000, [&](int t) { kick(x, v, k); drift(x, v); },
//                ctg::checkpoint{.snapshots = 100});
//   measure(x, loss);
//   tape.backward();  // recomputes each step from a snapshot before its adjoints
//
// checkpoint_schedule is the binomial schedule of Griewank and Walther
// (Algorithm 799, "revolve", ACM TOMS 26(1), 2000): with S snapshots the
// forward pass stores the state before a few steps and records the last
// step; backward() reverses the steps from the last to the first, each time
// putting back the nearest snapshot, running forward from there (storing new
// snapshots on the way, in the slots that reversed steps freed) and
// recording the step to reverse. Among all schedules that keep at most S
// states and one step's tape at a time, it runs the fewest forward steps:
// with r the smallest integer such that C(S + r, S) >= T, T steps cost
// r T - C(S + r, r - 1) forward steps beyond the T of a full tape.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"

namespace ctg {

// What backward() reports of a checkpointed rollout while it reverses it.
struct rollout_progress {
  int steps = 0;             // steps of the rollout
  int reversed = 0;          // steps whose adjoints have run
  long long recomputed = 0;  // forward steps run again by backward() so far
  long long planned = 0;     // forward steps backward() runs again in all
  double seconds = 0;        // since backward() reached the rollout
};

// The memory a rollout may keep: either a number of snapshots (copies of
// the state the steps carry), or a byte budget for them. Neither: the tape
// records every step, as it does without a rollout.
struct checkpoint {
  std::optional<int> snapshots{};
  std::optional<std::size_t> bytes{};
  // Called by backward() after each step it reverses.
  std::function<void(rollout_progress const&)> progress{};
};

// A progress callback that prints one line to `out` at most every
// `every_seconds`, and one when the last step is reversed.
inline std::function<void(rollout_progress const&)> print_progress(double every_seconds = 1.0,
                                                                  std::FILE* out = stderr) {
  return [every_seconds, out, last = -1e300](rollout_progress const& p) mutable {
    if (p.reversed < p.steps && p.seconds - last < every_seconds) return;
    last = p.seconds;
    std::fprintf(out, "backward: %d/%d steps reversed, %lld/%lld forward steps recomputed, %.1f s\n", p.reversed,
                 p.steps, p.recomputed, p.planned, p.seconds);
    std::fflush(out);
  };
}

class checkpoint_schedule {
 public:
  enum class act {
    store,    // keep the state before step `step`
    advance,  // run steps [step, to) forward, keeping nothing for their adjoints
    record,   // run step `step` forward recording it, then (in backward()) its adjoints
    restore,  // put back the state kept before step `step`
    release,  // drop the state kept before step `step`
  };
  struct action {
    act what;
    int step;
    int to;  // advance only
  };

  checkpoint_schedule() = default;
  // With snapshots >= steps nothing needs recomputing: every step is
  // recorded in the forward pass, as a tape without checkpoints does.
  checkpoint_schedule(int steps, int snapshots) : steps_(steps), snapshots_(snapshots) {
    if (steps < 0) throw autodiff_error("ctg::checkpoint_schedule: a negative number of steps");
    if (snapshots < 1) throw autodiff_error("ctg::checkpoint_schedule: fewer than one snapshot");
    if (records_everything()) {
      for (int t = 0; t < steps; ++t) actions_.push_back({act::record, t, t + 1});
      forward_part_ = actions_.size();
    } else {
      build();
    }
    count();
  }

  int steps() const { return steps_; }
  int snapshots() const { return snapshots_; }
  bool records_everything() const { return snapshots_ >= steps_; }
  std::vector<action> const& actions() const { return actions_; }
  // actions()[0, forward_part()) run in the forward pass; it ends with the
  // record of the last step, whose adjoints backward() runs first.
  std::size_t forward_part() const { return forward_part_; }
  // Forward steps run beyond the T of a full tape (every advance, in the
  // forward pass and in backward(); each step is recorded once).
  long long recomputed_steps() const { return advanced_; }
  // Of those, the ones backward() runs.
  long long recomputed_in_backward() const { return advanced_in_backward_; }
  // The most times one step runs forward (advances and its record).
  int most_runs() const { return most_runs_; }
  // The most states kept at once.
  int most_stored() const { return most_stored_; }
  // The steps before which the forward pass stores the state.
  std::vector<int> stored_in_forward_pass() const {
    std::vector<int> out;
    for (std::size_t k = 0; k < forward_part_; ++k)
      if (actions_[k].what == act::store) out.push_back(actions_[k].step);
    return out;
  }

  // Griewank and Walther's minimum, for T steps and S snapshots that
  // include the one of the initial state: r T - C(S + r, r - 1), r the
  // smallest integer with C(S + r, S) >= T (0 for S >= T: the full tape).
  static long long minimal_recomputations(int steps, int snapshots) {
    if (steps <= 1 || snapshots >= steps) return 0;
    if (snapshots < 1) throw autodiff_error("ctg::checkpoint_schedule: fewer than one snapshot");
    long long const r = repetitions(steps, snapshots);
    return r * steps - binomial(snapshots + r, r - 1);
  }

  // A summary, or with every_action one line per action.
  std::string describe(bool every_action = false) const {
    std::string out = "checkpoint schedule: " + std::to_string(steps_) + " steps, " + std::to_string(snapshots_) +
                      (snapshots_ == 1 ? " snapshot" : " snapshots");
    if (records_everything()) {
      out += ": every step recorded in the forward pass, nothing recomputed\n";
    } else {
      auto const stored = stored_in_forward_pass();
      out += " (binomial: Griewank and Walther)\n  forward pass: stores the state before step";
      out += stored.size() == 1 ? " " : "s ";
      for (std::size_t k = 0; k < stored.size(); ++k) {
        if (k == 12 && stored.size() > 14) {
          out += ", ... (" + std::to_string(stored.size()) + " in all)";
          break;
        }
        out += (k ? ", " : "") + std::to_string(stored[k]);
      }
      out += "; records step " + std::to_string(steps_ - 1) + "\n";
      out += "  backward(): " + std::to_string(advanced_in_backward_) + " forward steps recomputed, " +
             std::to_string(advanced_) + " beyond the " + std::to_string(steps_) + " of a full tape in all (" +
             fixed(double(advanced_) / double(steps_)) + " per step); a step runs forward at most " +
             std::to_string(most_runs_) + " times; at most " + std::to_string(most_stored_) +
             " states kept at once\n";
    }
    if (every_action) {
      for (std::size_t k = 0; k < actions_.size(); ++k) {
        if (k == forward_part_ && !records_everything()) out += "  -- backward():\n";
        auto const& a = actions_[k];
        switch (a.what) {
          case act::store: out += "  store the state before step " + std::to_string(a.step) + "\n"; break;
          case act::advance:
            out += "  advance steps " + std::to_string(a.step) + ".." + std::to_string(a.to - 1) + "\n";
            break;
          case act::record: out += "  record step " + std::to_string(a.step) + "\n"; break;
          case act::restore: out += "  restore the state before step " + std::to_string(a.step) + "\n"; break;
          case act::release: out += "  release the state before step " + std::to_string(a.step) + "\n"; break;
        }
      }
    }
    return out;
  }

 private:
  static long long binomial(long long n, long long k) {
    if (k < 0 || k > n) return 0;
    k = std::min(k, n - k);
    long long b = 1;
    for (long long i = 1; i <= k; ++i) b = b * (n - k + i) / i;  // exact: b * (n-k+i) is divisible by i
    return b;
  }
  // C(s + r, s): the most steps s snapshots reverse with each step run
  // forward at most r times beyond its record; capped, as only comparisons
  // with int step counts matter.
  static long long reach(long long s, long long r) {
    long long b = 1;
    for (long long i = 1; i <= r; ++i) {
      b = b * (s + i) / i;
      if (b > (long long)(1) << 40) return (long long)(1) << 40;
    }
    return b;
  }
  static long long repetitions(long long steps, long long snapshots) {
    long long r = 0;
    while (reach(snapshots, r) < steps) ++r;
    return r;
  }
  // Where to store the next state when l steps remain to reverse from a
  // kept state with c >= 2 snapshots: the first part (kept state to the new
  // one) is reversed later with c snapshots and r - 1 runs per step at most,
  // the rest with c - 1 snapshots and r runs; the largest first part that
  // allows both.
  static int split(int l, int c) {
    long long const r = repetitions(l, c);
    long long m = std::min(reach(c, r - 1), (long long)l - reach(c - 1, r - 1));
    return int(std::clamp(m, 1LL, (long long)l - 1));
  }

  // Emits the actions: reverse steps [lo, hi) from the state kept before lo
  // with c snapshots (that one included), depth-first with an explicit stack.
  void build() {
    struct task {
      bool release;
      int lo, hi, c;
    };
    std::vector<task> pending{{false, 0, steps_, snapshots_}};
    int at = 0;  // the step before which the fields hold the state, or -1
    actions_.push_back({act::store, 0, 0});
    auto go_to = [&](int lo) {
      if (at != lo) actions_.push_back({act::restore, lo, lo});
      at = lo;
    };
    while (!pending.empty()) {
      task const k = pending.back();
      pending.pop_back();
      if (k.release) {
        actions_.push_back({act::release, k.lo, k.lo});
        continue;
      }
      if (k.hi - k.lo == 1) {
        go_to(k.lo);
        actions_.push_back({act::record, k.lo, k.lo + 1});
        at = -1;
      } else if (k.c == 1) {
        for (int i = k.hi - 1; i >= k.lo; --i) {
          go_to(k.lo);
          if (i > k.lo) actions_.push_back({act::advance, k.lo, i});
          actions_.push_back({act::record, i, i + 1});
          at = -1;
        }
      } else {
        int const m = k.lo + split(k.hi - k.lo, k.c);
        go_to(k.lo);
        actions_.push_back({act::advance, k.lo, m});
        actions_.push_back({act::store, m, m});
        at = m;
        pending.push_back({false, k.lo, m, k.c});
        pending.push_back({true, m, m, 0});
        pending.push_back({false, m, k.hi, k.c - 1});
      }
    }
    actions_.push_back({act::release, 0, 0});
    forward_part_ = 0;
    while (forward_part_ < actions_.size() && actions_[forward_part_].what != act::record) ++forward_part_;
    ++forward_part_;
  }

  void count() {
    std::vector<int> runs(std::size_t(steps_), 0);
    int stored = 0;
    for (std::size_t k = 0; k < actions_.size(); ++k) {
      auto const& a = actions_[k];
      if (a.what == act::advance) {
        advanced_ += a.to - a.step;
        if (k >= forward_part_) advanced_in_backward_ += a.to - a.step;
        for (int t = a.step; t < a.to; ++t) ++runs[std::size_t(t)];
      } else if (a.what == act::record) {
        ++runs[std::size_t(a.step)];
      } else if (a.what == act::store) {
        most_stored_ = std::max(most_stored_, ++stored);
      } else if (a.what == act::release) {
        --stored;
      }
    }
    for (int r : runs) most_runs_ = std::max(most_runs_, r);
  }
  static std::string fixed(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
  }

  int steps_ = 0, snapshots_ = 1;
  std::vector<action> actions_;
  std::size_t forward_part_ = 0;
  long long advanced_ = 0, advanced_in_backward_ = 0;
  int most_runs_ = 0, most_stored_ = 0;
};

// What a tape knows of one rollout (tape.rollout returns it; tape.listing()
// prints it).
struct rollout_info {
  int steps = 0;
  // Snapshots the schedule keeps; 0: every step recorded, as without a rollout.
  int snapshots = 0;
  checkpoint_schedule schedule{};
  // The fields the steps carry: written by a step and read by a step.
  std::vector<std::string> state{};
  std::size_t state_bytes = 0;
  // Forward steps run again so far (by backward(), and by the forward pass
  // when a byte budget turned out to hold every step).
  long long recomputed = 0;

  std::string describe() const {
    std::string out = "rollout of " + std::to_string(steps) + " steps";
    if (snapshots == 0) return out + ": every step recorded\n";
    out += ": state ";
    for (std::size_t k = 0; k < state.size(); ++k) out += (k ? ", " : "") + state[k];
    if (state.empty()) out += "(none)";
    out += " (" + std::to_string(state_bytes) + " bytes), " + std::to_string(snapshots) + " snapshots, " +
           std::to_string(recomputed) + " forward steps recomputed so far\n";
    return out + schedule.describe();
  }
};

}  // namespace ctg
