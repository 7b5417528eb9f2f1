// The test bodies shared with the CPU backend (tests/shared/kernels.hpp) on
// device fields: maps, reductions and scatters with atomics, adstack loops,
// vector elements and tangents, a mass-spring scatter, launch errors across
// memory spaces, a tape of two device launches. tests/unit/backends_host.cpp
// runs the same bodies on host fields.
#include "../shared/kernels.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_KERNEL_TESTS, device)
