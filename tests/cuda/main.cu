// CUDA tests: without a device they report "skipped" (exit code 77, which
// CTest counts as skipped, never as passed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <ctgrad/ctgrad.hpp>
#include <string>

int main(int argc, char** argv) {
  std::string why;
  if (!ctg::cuda::device_available(&why)) {
    std::printf("skipped: the CUDA tests need a GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
