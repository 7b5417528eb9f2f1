// The library's runtime, compiled once for the CUDA tests and by nvcc, with
// the device memory support their fields need: they are built with
// CTG_SEPARATE_COMPILATION=1 (tests/CMakeLists.txt).
#include <ctgrad/src.hpp>
