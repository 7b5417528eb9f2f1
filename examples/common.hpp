// What the simulation examples share besides the SVG writer: command-line
// options (--quick, --out DIR, --iters N), a progress line per iteration and
// the pass/fail verdict that the --quick runs under CTest turn into an exit
// code.
#pragma once
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace example {

struct options {
  bool quick = false;       // small problem, few iterations, checked (CTest runs this)
  std::string out = ".";    // where the pictures go
  int iterations = -1;      // -1: the example's default
};

inline options parse(int argc, char** argv, char const* what) {
  options o;
  for (int k = 1; k < argc; ++k) {
    if (!std::strcmp(argv[k], "--quick")) {
      o.quick = true;
    } else if (!std::strcmp(argv[k], "--out") && k + 1 < argc) {
      o.out = argv[++k];
    } else if (!std::strcmp(argv[k], "--iters") && k + 1 < argc) {
      o.iterations = std::atoi(argv[++k]);
    } else {
      std::printf("%s\n\nusage: %s [--quick] [--out DIR] [--iters N]\n"
                  "  --quick    small problem and few iterations; exit code 1 unless the loss falls\n"
                  "             and the gradient check passes (what CTest runs)\n"
                  "  --out DIR  directory for the SVG pictures (default: the current directory)\n"
                  "  --iters N  number of gradient-descent iterations\n",
                  what, argv[0]);
      std::exit(std::strcmp(argv[k], "--help") ? 2 : 0);
    }
  }
  std::filesystem::create_directories(o.out);
  return o;
}

// The path of a picture in the output directory.
inline std::string picture(options const& o, std::string const& name) {
  return (std::filesystem::path(o.out) / name).string();
}

class stopwatch {
 public:
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  void restart() { start_ = clock::now(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_ = clock::now();
};

inline void progress(int iteration, double loss, double grad_norm, double seconds) {
  std::printf("iter %4d  loss %.6e  |grad| %.3e  %7.1f ms/iter\n", iteration, loss, grad_norm, seconds * 1e3);
  std::fflush(stdout);
}

// Prints the outcome; true when the loss fell by at least `factor` and the
// gradient check's worst relative error is below `bound`.
inline bool verdict(double first_loss, double last_loss, double factor, double grad_error, double bound) {
  bool const fell = last_loss * factor <= first_loss;
  bool const agrees = grad_error < bound;
  std::printf("loss %.6e -> %.6e (%.1fx, required %.0fx): %s\n", first_loss, last_loss,
              last_loss > 0 ? first_loss / last_loss : 0.0, factor, fell ? "ok" : "FAILED");
  std::printf("gradient check: worst relative error %.2e (bound %.0e): %s\n", grad_error, bound,
              agrees ? "ok" : "FAILED");
  return fell && agrees;
}

// Prints what ctg::check_gradient found.
template <class Check>
void print_check(Check const& check) {
  std::printf("gradient check: worst relative error %.2e over %d coefficients (%s)\n", check.worst_relative_error,
              check.checked, check.worst.c_str());
}

// Prints what the tape of one rollout kept for the adjoints: the launches it
// recorded and the bytes of field values it saved because a later launch
// overwrote them (peak: the most alive at once, during backward()).
template <class Tape>
void print_tape(Tape const& tape) {
  std::printf("tape: %zu launches, %.2f MB of field values saved for the adjoints (peak %.2f MB)\n", tape.size(),
              double(tape.bytes_saved()) / 1e6, double(tape.peak_bytes_saved()) / 1e6);
}

// The end of every example: names its two pictures and, in --quick mode,
// turns the verdict into the exit status CTest reads.
inline int finish(options const& o, std::string const& name, double first_loss, double last_loss, double factor,
                  double grad_error) {
  std::printf("pictures: %s, %s\n", picture(o, name + "_loss.svg").c_str(), picture(o, name + "_final.svg").c_str());
  if (!o.quick) return 0;
  return verdict(first_loss, last_loss, factor, grad_error, 1e-4) ? 0 : 1;
}

}  // namespace example
