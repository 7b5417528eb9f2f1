// The library's runtime, compiled once for the unit tests: they are built
// with CTG_SEPARATE_COMPILATION=1 (tests/CMakeLists.txt), so their other
// files only declare it.
#include <ctgrad/src.hpp>
