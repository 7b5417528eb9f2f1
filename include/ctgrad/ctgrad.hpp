// ctgrad: differentiable compute kernels as C++ lambdas.
#pragma once
#include "config.hpp"
#include "element.hpp"
#include "errors.hpp"
#include "field.hpp"
#include "ir/expr.hpp"
#include "kernel.hpp"
#include "lower/builders.hpp"
