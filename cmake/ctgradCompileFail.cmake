# Runs one compile-fail check (cmake -P); called by the compile_fail.* tests.
#   BUILD_DIR  build tree          TARGET  the <stem>_ko object target
#   CONFIG     build configuration EXPECT  regex the diagnostics must match
#   SOURCE     the source file (for messages)
#
# Passes only when the build FAILS and its output matches EXPECT. Lines that
# contain "expected-error" are dropped first, so a compiler that echoes the
# source line holding the expectation cannot satisfy the regex by itself.
foreach(v BUILD_DIR TARGET EXPECT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ctgradCompileFail.cmake: ${v} is not set")
  endif()
endforeach()

set(config_args)
if(CONFIG)
  set(config_args --config "${CONFIG}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" ${config_args}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)

string(REGEX REPLACE "[^\n]*expected-error[^\n]*" "" filtered "${out}")

if(rc EQUAL 0)
  message("${out}")
  message(FATAL_ERROR "${SOURCE}: compiled, but it must fail with /${EXPECT}/")
endif()
if(NOT filtered MATCHES "${EXPECT}")
  message("${out}")
  message(FATAL_ERROR "${SOURCE}: failed to compile, but not with /${EXPECT}/ (output above)")
endif()
message(STATUS "${SOURCE}: fails to compile with /${EXPECT}/ as expected")
