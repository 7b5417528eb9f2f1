// The definitions of ctgrad's runtime, for a program built with
// CTG_SEPARATE_COMPILATION=1 (config.hpp): include this header in exactly one
// of its translation units, before any other ctgrad header, and build that
// unit with the others' CTG_HAS_CUDA and CTG_CPU_SERIAL (see config.hpp).
//
//   // ctgrad_runtime.cpp
//   #include <ctgrad/src.hpp>
#pragma once

#if !defined(CTG_SEPARATE_COMPILATION) || !CTG_SEPARATE_COMPILATION
#  error \
      "<ctgrad/src.hpp> defines the runtime of a program built with CTG_SEPARATE_COMPILATION=1; without it every header defines the runtime inline, so do not include src.hpp"
#endif
#if defined(CTG_RUNTIME_DEFINITIONS)
#  error \
      "<ctgrad/src.hpp> must come before any other ctgrad header in its translation unit: the headers it includes give the definitions only on their first inclusion"
#endif

#define CTG_COMPILING_RUNTIME 1
#include "ctgrad.hpp"
