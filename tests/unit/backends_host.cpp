// The test bodies shared with the CUDA backend (tests/shared/kernels.hpp) on
// host fields: maps, reductions and scatters, adstack loops, vector elements
// and tangents, a mass-spring scatter, launch errors, a tape of two launches.
// tests/cuda/backends_device.cu runs the same bodies on device fields.
#include "../shared/kernels.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_KERNEL_TESTS, host)
