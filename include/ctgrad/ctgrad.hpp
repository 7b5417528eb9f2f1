// ctgrad: differentiable compute kernels as C++ lambdas.
#pragma once
#include "config.hpp"
#include "element.hpp"
#include "errors.hpp"
#include "field.hpp"
#include "ir/custom.hpp"
#include "ir/expr.hpp"
#include "check/diagnostics.hpp"
#include "check_gradient.hpp"
#include "kernel.hpp"
#include "tape.hpp"
#include "lower/builders.hpp"
