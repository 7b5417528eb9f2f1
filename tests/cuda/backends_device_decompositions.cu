// The decomposition bodies shared with the CPU backend
// (tests/shared/decompositions.hpp) on device fields: svd, polar and sym_eig
// losses in float and double against Eigen, central differences and the
// host's run of the same kernels. tests/unit/backends_host_decompositions.cpp
// runs them on host fields.
#include "../shared/decompositions.hpp"

CTGRAD_REGISTER_BACKEND_TESTS(CTGRAD_DECOMPOSITION_TESTS, device)
