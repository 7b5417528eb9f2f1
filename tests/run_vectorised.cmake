# Builds the vectorised tests (tests/CMakeLists.txt), the blocks longer
# than clang's fold expressions (tests/unit/long_blocks.cpp) and the
# dependence checks' kernels (tests/unit/checks_dependence.cpp: clang once
# crashed on a walk of their guards that g++ compiled) with another compiler
# of CTGRAD_DIAGNOSTIC_COMPILERS, as a release build would (-O3, index checks
# off, warnings as errors), and runs them: each compiler's loop hints
# (config.hpp, CTG_INDEPENDENT_ITERATIONS) must compile without a warning
# and give the same gradients.
#   cmake -DCOMPILER=... -DSOURCE_DIR=... -DINCLUDES=a;b -DOUTPUT=... -P run_vectorised.cmake
set(flags -std=c++20 -O3 -DNDEBUG -DCTG_BOUNDS_CHECK=0 -Wall -Wextra -Wpedantic -Werror -pthread)
set(includes -I${SOURCE_DIR}/include -I${SOURCE_DIR}/tests/unit -I${SOURCE_DIR}/tests)
foreach(d IN LISTS INCLUDES)
  # The compiler's own directories stay where the compiler puts them.
  if(NOT d STREQUAL "/usr/include" AND NOT d STREQUAL "/usr/local/include" AND NOT d MATCHES "NOTFOUND$")
    list(APPEND includes -isystem ${d})
  endif()
endforeach()
set(sources ${SOURCE_DIR}/tests/unit/main.cpp ${SOURCE_DIR}/tests/unit/stencil_gather.cpp
            ${SOURCE_DIR}/tests/unit/forward_basics.cpp ${SOURCE_DIR}/tests/vectorised/vector_math.cpp
            ${SOURCE_DIR}/tests/vectorised/vector_math_scalar.cpp ${SOURCE_DIR}/tests/unit/long_blocks.cpp
            ${SOURCE_DIR}/tests/unit/checks_dependence.cpp)
execute_process(COMMAND ${COMPILER} ${flags} ${includes} ${sources} -o ${OUTPUT} RESULT_VARIABLE built
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT built EQUAL 0)
  message(FATAL_ERROR "${COMPILER} could not build the vectorised tests:\n${out}")
endif()
execute_process(COMMAND ${OUTPUT} RESULT_VARIABLE ran OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT ran EQUAL 0)
  message(FATAL_ERROR "the vectorised tests built by ${COMPILER} failed")
endif()
