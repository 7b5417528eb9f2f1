// The race checker (docs/03-backends.md, docs/04-diagnostics.md#ctg-launch-002):
// a parallel loop whose iterations read what other iterations write is
// reported at launch, and its double-buffered repair passes.
#include <ctgrad/ctgrad.hpp>

#include <cstdio>
#include <string>

using namespace ctg::literals;

int main() {
  ctg::field<double, 1> a({8}, {.name = "chain"}), b({8}, {.name = "next"});
  a.fill(0.0);
  b.fill(0.0);
  bool reported = false;
  // [snippet: launch002]
  using namespace ctg::literals;  // for 0_c, 1_c, ...
  // Fails at launch: iteration i reads a[i], which iteration i - 1 writes.
  auto shift = ctg::kernel<"chain_shift", ctg::race_check>([](auto a) {
    return ctg::range(a.shape(0_c) - 1, [=](auto i) { return a[i + 1] = a[i] + 1.0; });
  });
  try {
    shift(a);
  } catch (ctg::launch_error const& e) {
    // CTG-LAUNCH-002 kernel 'chain_shift': the forward pass of its offload #0
    // depends on the order of its iterations: run in order and in reverse
    // order, the values of parameter #0 (field 'chain', shape (8)) differ
    // first at (2) (2 against 1). ...
    std::printf("%s\n", e.what());
    reported = std::string(e.what()).find("CTG-LAUNCH-002") != std::string::npos;
  }
  // Fixed: the new values go to a second field.
  auto shift_into = ctg::kernel<"shift_into", ctg::race_check>([](auto from, auto to) {
    return ctg::range(from.shape(0_c) - 1, [=](auto i) { return to[i + 1] = from[i] + 1.0; });
  });
  shift_into(a, b);
  // [snippet end]
  bool const fixed = b.at(7) == 1.0 && b.at(0) == 0.0 && a.at(7) == 0.0;
  return reported && fixed ? 0 : 1;
}
