// The runtime of ctgrad_settings_tests, compiled with the host-write checks
// off (tests/CMakeLists.txt); the test's own unit has them on.
#include <ctgrad/src.hpp>

static_assert(!CTG_HOST_WRITE_CHECKS, "this unit is built with the host-write checks off");
