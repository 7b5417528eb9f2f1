# Helpers for ctgrad's own tests, examples and benchmarks (not installed).
include_guard(GLOBAL)

set(CTGRAD_COMPILE_FAIL_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/ctgradCompileFail.cmake")

# The test programs use doctest (Debian: doctest-dev).
macro(_ctgrad_find_doctest)
  if(NOT TARGET doctest::doctest)
    find_package(doctest REQUIRED)
  endif()
endmacro()

# The sanitizers of CTGRAD_SANITIZE. UBSan's checks on every pointer use
# (alignment, null, object-size, pointer-overflow) and ASan's use-after-scope
# poisoning of every local are left out: an invalid access is still ASan's to
# report, and on these template-heavy tests the two sets cost more compile time
# than all the rest of the instrumentation (one unit-test TU at -O1: 52 s bare,
# 209 s with every check, 77 s with this set).
#
# The debug information names files relative to the source tree
# (-fdebug-prefix-map): with it, ccache leaves the build directory out of its
# hash (with CCACHE_BASEDIR set to the source tree, as scripts/test.sh does),
# so that a fresh clone reuses the objects of another; without it every clone
# recompiled these tests from scratch.
set(CTGRAD_SANITIZER_COMPILE_OPTIONS
  -O1 -g1 -fno-omit-frame-pointer "-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=."
  -fsanitize=address,undefined -fno-sanitize-recover=all
  -fno-sanitize=alignment,null,object-size,pointer-overflow
  -fno-sanitize-address-use-after-scope)
set(CTGRAD_SANITIZER_LINK_OPTIONS -fsanitize=address,undefined)
set(CTGRAD_SANITIZER_ENVIRONMENT
  "ASAN_OPTIONS=abort_on_error=1:detect_stack_use_after_return=1:strict_init_order=1"
  "UBSAN_OPTIONS=print_stacktrace=1")

# ctgrad_add_test_executable(NAME <name> SOURCES <files...>)
#   A doctest executable linked to ctgrad::ctgrad, registered as CTest test
#   <name>; built and run under the sanitizers when CTGRAD_SANITIZE is on.
function(ctgrad_add_test_executable)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "ctgrad_add_test_executable(NAME <name> SOURCES <files...>)")
  endif()
  _ctgrad_find_doctest()
  add_executable(${arg_NAME} ${arg_SOURCES})
  target_link_libraries(${arg_NAME} PRIVATE ctgrad::ctgrad ctgrad_project_warnings doctest::doctest)
  add_test(NAME ${arg_NAME} COMMAND ${arg_NAME})
  set_tests_properties(${arg_NAME} PROPERTIES TIMEOUT 600)
  if(CTGRAD_SANITIZE)
    # After the build type's flags on the command line, so that -O1 wins.
    target_compile_options(${arg_NAME} PRIVATE ${CTGRAD_SANITIZER_COMPILE_OPTIONS})
    target_link_options(${arg_NAME} PRIVATE ${CTGRAD_SANITIZER_LINK_OPTIONS})
    set_tests_properties(${arg_NAME} PROPERTIES ENVIRONMENT "${CTGRAD_SANITIZER_ENVIRONMENT}")
  endif()
endfunction()

# ctgrad_add_cuda_test(NAME <name> SOURCES <files.cu...>)
#   Like ctgrad_add_test_executable for CUDA sources, linked to ctgrad::cuda.
#   The program exits 77 (printing why) when no GPU is usable: CTest reports
#   that as skipped.
function(ctgrad_add_cuda_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME" "SOURCES")
  if(NOT arg_NAME OR NOT arg_SOURCES)
    message(FATAL_ERROR "ctgrad_add_cuda_test(NAME <name> SOURCES <files...>)")
  endif()
  if(NOT TARGET ctgrad::cuda)
    message(FATAL_ERROR "ctgrad_add_cuda_test: the CUDA backend is not enabled")
  endif()
  _ctgrad_find_doctest()
  add_executable(${arg_NAME} ${arg_SOURCES})
  target_link_libraries(${arg_NAME} PRIVATE ctgrad::cuda ctgrad_project_warnings doctest::doctest)
  add_test(NAME ${arg_NAME} COMMAND ${arg_NAME})
  set_tests_properties(${arg_NAME} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
endfunction()

# ---- compile-fail tests ------------------------------------------------------
# Every compile-fail test runs with each compiler of
# CTGRAD_DIAGNOSTIC_COMPILERS (the project's C++ compiler and any of
# clang++-14, clang++-19 that are installed; nvcc for .cu files), calling the
# compiler directly so that the check sees exactly what a user would.
#
# <file> carries its expected diagnostic as a line
#     // expected-error {{REGEX}}
# and, for the gradient diagnostics, what the error must name:
#     // expected-kernel {{name}}  // expected-func {{outer -> inner}}
#     // expected-parameter {{N}}  // expected-lines {{12}}
# compile_fail.<compiler>.<stem> must fail with REGEX (and the names, in at
# most that many lines); compile_ok.<compiler>.<stem> compiles the file with
# -DCTG_CONTROL and must succeed.

# A compiler's tag (gcc12, clang14, nvcc13) and whether it prints string
# template arguments as numbers or braces (then names are character packs).
function(_ctgrad_compiler_tag compiler out_tag out_chars)
  execute_process(COMMAND "${compiler}" --version OUTPUT_VARIABLE v ERROR_VARIABLE v)
  set(chars OFF)
  if(v MATCHES "clang version ([0-9]+)")
    set(tag "clang${CMAKE_MATCH_1}")
    if(CMAKE_MATCH_1 LESS 18)
      set(chars ON)
    endif()
  elseif(v MATCHES "release ([0-9]+)\\.")
    set(tag "nvcc${CMAKE_MATCH_1}")
    set(chars ON)
  elseif(v MATCHES "\\) ([0-9]+)\\.[0-9]+")
    set(tag "gcc${CMAKE_MATCH_1}")
  else()
    get_filename_component(tag "${compiler}" NAME)
  endif()
  set(${out_tag} "${tag}" PARENT_SCOPE)
  set(${out_chars} "${chars}" PARENT_SCOPE)
endfunction()

function(_ctgrad_add_compile_fail_test file lang)
  cmake_parse_arguments(PARSE_ARGV 2 arg "FAIL_ONLY" "" "")
  get_filename_component(file "${file}" ABSOLUTE)
  get_filename_component(stem "${file}" NAME_WE)

  file(STRINGS "${file}" expect_lines REGEX "//[ \t]*expected-error[ \t]*{{.*}}")
  list(LENGTH expect_lines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${file}: needs exactly one line '// expected-error {{REGEX}}' (found ${n})")
  endif()
  string(REGEX REPLACE ".*expected-error[ \t]*{{(.*)}}.*" "\\1" regex "${expect_lines}")
  if(regex STREQUAL "")
    message(FATAL_ERROR "${file}: empty expected-error regex")
  endif()
  set(names)
  foreach(what kernel func parameter lines)
    file(STRINGS "${file}" line REGEX "//[ \t]*expected-${what}[ \t]*{{.*}}")
    if(line)
      string(REGEX REPLACE ".*expected-${what}[ \t]*{{(.*)}}.*" "\\1" value "${line}")
      string(TOUPPER "${what}" key)
      if(key STREQUAL "LINES")
        set(key MAX_LINES)
      endif()
      list(APPEND names "-D${key}=${value}")
    endif()
  endforeach()
  # Reconfigure when the expectations change.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")

  get_target_property(eigen_dirs Eigen3::Eigen INTERFACE_INCLUDE_DIRECTORIES)
  set(common -I${PROJECT_SOURCE_DIR}/include)
  foreach(d IN LISTS eigen_dirs)
    list(APPEND common -isystem ${d})
  endforeach()
  if(lang STREQUAL "CUDA")
    set(compilers "${CMAKE_CUDA_COMPILER}")
    list(APPEND common -std=c++20 -x cu -arch=sm_90 --expt-relaxed-constexpr --extended-lambda
         -diag-suppress=20012 -DCTG_HAS_CUDA=1 -c -o ${CMAKE_CURRENT_BINARY_DIR}/${stem}.compile_fail.o)
  else()
    set(compilers ${CTGRAD_DIAGNOSTIC_COMPILERS})
    list(APPEND common -std=c++20 -fsyntax-only)
  endif()

  foreach(compiler IN LISTS compilers)
    _ctgrad_compiler_tag("${compiler}" tag chars)
    # The flags travel as one argument, joined by "|" (a ;-list would split).
    string(REPLACE ";" "|" ko_flags "${common};${file}")
    string(REPLACE ";" "|" ok_flags "${common};-DCTG_CONTROL;${file}")
    add_test(NAME compile_fail.${tag}.${stem}
      COMMAND ${CMAKE_COMMAND} "-DCOMPILER=${compiler}" "-DFLAGS=${ko_flags}" -DMODE=ko "-DSOURCE=${file}"
        "-DEXPECT=${regex}" -DCHARACTERS=${chars} ${names} -P "${CTGRAD_COMPILE_FAIL_SCRIPT}")
    set_tests_properties(compile_fail.${tag}.${stem} PROPERTIES TIMEOUT 600 LABELS compile)
    if(NOT arg_FAIL_ONLY)
      add_test(NAME compile_ok.${tag}.${stem}
        COMMAND ${CMAKE_COMMAND} "-DCOMPILER=${compiler}" "-DFLAGS=${ok_flags}" -DMODE=ok "-DSOURCE=${file}"
          -P "${CTGRAD_COMPILE_FAIL_SCRIPT}")
      set_tests_properties(compile_ok.${tag}.${stem} PROPERTIES TIMEOUT 600 LABELS compile)
    endif()
  endforeach()
endfunction()

# ctgrad_add_compile_fail_test(<file.cpp>)
#   Tests compile_fail.<compiler>.<stem> and compile_ok.<compiler>.<stem>.
function(ctgrad_add_compile_fail_test file)
  _ctgrad_add_compile_fail_test("${file}" CXX)
endfunction()

# ctgrad_add_cuda_compile_fail_test(<file> [FAIL_ONLY])
#   The same for nvcc (needs the CUDA backend), which compiles <file> as CUDA.
#   FAIL_ONLY: only compile_fail.nvcc<N>.<stem> runs (a .cpp test, whose
#   control the host compilers build already).
function(ctgrad_add_cuda_compile_fail_test file)
  if(NOT TARGET ctgrad::cuda)
    message(FATAL_ERROR "ctgrad_add_cuda_compile_fail_test: the CUDA backend is not enabled")
  endif()
  _ctgrad_add_compile_fail_test("${file}" CUDA ${ARGN})
endfunction()

# ctgrad_add_example(<name> <file> [TEST_NAME <test>] [ARGS <args...>])
#   An example program, run by CTest test <test> (default example.<file stem>)
#   with ARGS.
function(ctgrad_add_example name file)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "TEST_NAME" "ARGS")
  if(NOT arg_TEST_NAME)
    get_filename_component(stem "${file}" NAME_WE)
    set(arg_TEST_NAME "example.${stem}")
  endif()
  add_executable(${name} ${file})
  if(file MATCHES "\\.cu$")
    target_link_libraries(${name} PRIVATE ctgrad::cuda ctgrad_project_warnings)
  else()
    target_link_libraries(${name} PRIVATE ctgrad::ctgrad ctgrad_project_warnings)
  endif()
  add_test(NAME ${arg_TEST_NAME} COMMAND ${name} ${arg_ARGS})
  set_tests_properties(${arg_TEST_NAME} PROPERTIES TIMEOUT 600 LABELS example)
endfunction()
