// ctgrad: differentiable compute kernels as C++ lambdas.
#pragma once
#include "config.hpp"
#include "element.hpp"
#include "errors.hpp"
#include "field.hpp"
#include "view.hpp"
// The kernel language first: an error in a kernel then shows a short include chain.
#include "lower/builders.hpp"
#include "lower/normalize.hpp"
#include "ir/custom.hpp"
#include "ir/expr.hpp"
#include "ir/decompositions.hpp"
#include "ad/decomposition_rules.hpp"
#include "check/diagnostics.hpp"
#include "check_gradient.hpp"
#include "kernel.hpp"
#include "tape.hpp"
#include "checkpoint.hpp"
