# Helpers for ctgrad's own tests, examples and benchmarks (not installed).
include_guard(GLOBAL)

set(CTGRAD_COMPILE_FAIL_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/ctgradCompileFail.cmake")

# The test programs use doctest (Debian: doctest-dev).
macro(_ctgrad_find_doctest)
  if(NOT TARGET doctest::doctest)
    find_package(doctest REQUIRED)
  endif()
endmacro()

# ctgrad_add_test_executable(NAME <name> SOURCES <files...>)
#   A doctest executable linked to ctgrad::ctgrad, registered as CTest test <name>.
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

# Shared part of the compile-fail helpers.
#   <file> carries its expected diagnostic as a line
#       // expected-error {{REGEX}}
#   <stem>_ko compiles it as is and must fail with REGEX in the diagnostics;
#   <stem>_ok compiles it with -DCTG_CONTROL and must succeed. Both targets are
#   EXCLUDE_FROM_ALL; the CTest tests build them.
function(_ctgrad_add_compile_fail_test file lang)
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
  # Reconfigure when the expectation changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")

  if(lang STREQUAL "CUDA")
    set(target_stem "${stem}_cu")
    set(link_target ctgrad::cuda)
    set(test_suffix "cuda.${stem}")
  else()
    set(target_stem "${stem}")
    set(link_target ctgrad::ctgrad)
    set(test_suffix "${stem}")
  endif()

  foreach(variant ko ok)
    set(tgt ${target_stem}_${variant})
    add_library(${tgt} OBJECT "${file}")
    set_target_properties(${tgt} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    target_link_libraries(${tgt} PRIVATE ${link_target} ctgrad_project_warnings)
  endforeach()
  target_compile_definitions(${target_stem}_ok PRIVATE CTG_CONTROL)

  set(build_dir "${CMAKE_BINARY_DIR}")
  add_test(NAME compile_fail.${test_suffix}
    COMMAND ${CMAKE_COMMAND}
      "-DBUILD_DIR=${build_dir}" "-DTARGET=${target_stem}_ko" "-DCONFIG=$<CONFIG>"
      "-DEXPECT=${regex}" "-DSOURCE=${file}"
      -P "${CTGRAD_COMPILE_FAIL_SCRIPT}")
  add_test(NAME compile_ok.${test_suffix}
    COMMAND ${CMAKE_COMMAND} --build "${build_dir}" --target ${target_stem}_ok --config $<CONFIG>)
  set_tests_properties(compile_fail.${test_suffix} compile_ok.${test_suffix} PROPERTIES
    RESOURCE_LOCK ctgrad_build_tree
    TIMEOUT 600
    LABELS compile)
endfunction()

# ctgrad_add_compile_fail_test(<file.cpp>)
#   Tests compile_fail.<stem> (must fail to compile with the expected-error
#   regex in the diagnostics) and compile_ok.<stem> (the same file with
#   -DCTG_CONTROL must compile).
function(ctgrad_add_compile_fail_test file)
  _ctgrad_add_compile_fail_test("${file}" CXX)
endfunction()

# ctgrad_add_cuda_compile_fail_test(<file.cu>)
#   The same for CUDA sources (needs the CUDA backend): tests
#   compile_fail.cuda.<stem> and compile_ok.cuda.<stem>.
function(ctgrad_add_cuda_compile_fail_test file)
  if(NOT TARGET ctgrad::cuda)
    message(FATAL_ERROR "ctgrad_add_cuda_compile_fail_test: the CUDA backend is not enabled")
  endif()
  _ctgrad_add_compile_fail_test("${file}" CUDA)
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
