// The decomposition bodies shared with the CUDA backend
// (tests/shared/decompositions.hpp) on host fields: svd, polar and sym_eig
// losses in float and double against Eigen and central differences.
// tests/cuda/backends_device_decompositions.cu runs them on device fields.
#include "../shared/decompositions.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_DECOMPOSITION_TESTS, host)
