#pragma once
#include <ctgrad/ctgrad.hpp>

// x <- x + dt * sin(x), launched from step.cpp.
void step(ctg::field<double, 1, ctg::grad> const& x, double dt);
