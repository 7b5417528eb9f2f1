// Exceptions for what only a launch or a host call can see. Compile-time
// findings are static_asserts with IDs (see docs/04-diagnostics.md).
#pragma once
#include <stdexcept>
#include <string>

namespace ctg {

// Base of every ctgrad runtime error.
struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An index outside a field's shape, caught by the checked accessors (debug
// builds or CTG_BOUNDS_CHECK=1).
struct index_error : error {
  using error::error;
};

// A launch whose arguments do not fit the kernel: shape mismatch, fields in
// different memory spaces, a missing gradient buffer; or a kernel whose code
// builds a statement and drops it (CTG-EXPR-010, ir/statement_trace.hpp).
struct launch_error : error {
  using error::error;
};

// A gradient computation that cannot proceed correctly: adstack overflow,
// aliasing of differentiable storage, tape misuse.
struct autodiff_error : error {
  using error::error;
};

// A CUDA runtime failure, with the kernel name and CUDA's own message.
struct cuda_error : error {
  using error::error;
};

}  // namespace ctg
