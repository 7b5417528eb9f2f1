# Configures, builds and runs a consumer project of ctgrad (cmake -P).
#   MODE            find_package | add_subdirectory
#   SOURCE_DIR      the consumer project      BINARY_DIR  its build tree (wiped)
#   GENERATOR       CMake generator           CXX_COMPILER, CONFIG
#   find_package:     MAIN_BUILD_DIR (ctgrad build tree to install), INSTALL_PREFIX
#   add_subdirectory: CTGRAD_SOURCE_DIR
foreach(v MODE SOURCE_DIR BINARY_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer.cmake: ${v} is not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(run)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "run: ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${pretty}")
  endif()
endfunction()

set(configure_args
  -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}"
  -DCTGRAD_CUDA=OFF)

if(MODE STREQUAL "find_package")
  file(REMOVE_RECURSE "${INSTALL_PREFIX}")
  run("${CMAKE_COMMAND}" --install "${MAIN_BUILD_DIR}" --prefix "${INSTALL_PREFIX}" --config "${CONFIG}")
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${INSTALL_PREFIX}")
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND configure_args "-DCTGRAD_SOURCE_DIR=${CTGRAD_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: unknown MODE '${MODE}'")
endif()

file(REMOVE_RECURSE "${BINARY_DIR}")
run("${CMAKE_COMMAND}" ${configure_args})
run("${CMAKE_COMMAND}" --build "${BINARY_DIR}" --config "${CONFIG}")

# The consumer projects name their program ctgrad_consumer.
set(exe "${BINARY_DIR}/ctgrad_consumer")
if(NOT EXISTS "${exe}" AND EXISTS "${BINARY_DIR}/${CONFIG}/ctgrad_consumer${CMAKE_EXECUTABLE_SUFFIX}")
  set(exe "${BINARY_DIR}/${CONFIG}/ctgrad_consumer")
endif()
run("${exe}")
message(STATUS "consumer (${MODE}) built and ran")
