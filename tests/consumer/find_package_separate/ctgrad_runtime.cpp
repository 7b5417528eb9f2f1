// The one translation unit that defines ctgrad's runtime.
#include <ctgrad/src.hpp>
