// ctgrad over MPI: fields decomposed into blocks of rows over ranks, halo
// exchanges and global sums as differentiable steps of a ctg::tape (see
// docs/07-distributed.md). Link ctgrad::mpi.
#pragma once
#include "dfield.hpp"
#include "grid.hpp"
#include "halo.hpp"
#include "launch.hpp"
