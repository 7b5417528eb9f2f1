# ctgrad::mpi: fields decomposed over MPI ranks (include/ctgrad/mpi/), created
# only when an MPI with C++ support is found; nothing else depends on it.
#
# The C++ bindings of MPI-2 are skipped: ctgrad uses the C API, and OpenMPI's
# bindings do not compile warning-free.
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "Skip the MPI-2 C++ bindings")
find_package(MPI COMPONENTS CXX QUIET)
set(CTGRAD_MPI_ENABLED OFF)
if(MPI_CXX_FOUND)
  set(CTGRAD_MPI_ENABLED ON)
  add_library(ctgrad_mpi INTERFACE)
  add_library(ctgrad::mpi ALIAS ctgrad_mpi)
  # Installed and exported with the core (find_package(ctgrad COMPONENTS mpi)).
  set_target_properties(ctgrad_mpi PROPERTIES EXPORT_NAME mpi)
  list(APPEND _ctgrad_export_targets ctgrad_mpi)
  target_link_libraries(ctgrad_mpi INTERFACE ctgrad MPI::MPI_CXX)
  target_compile_definitions(ctgrad_mpi INTERFACE CTG_HAS_MPI=1 OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  find_program(CTGRAD_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
  message(STATUS "ctgrad: MPI ${MPI_CXX_VERSION} found, ctgrad::mpi enabled (tests: ctest -L mpi)")
else()
  message(STATUS "ctgrad: no MPI found, ctgrad::mpi and its tests (label mpi) are skipped; "
                 "install libopenmpi-dev openmpi-bin (scripts/deps.sh does)")
endif()
