# Runs one compile-fail check (cmake -P); called by the compile_fail.* and
# compile_ok.* tests, once per compiler.
#   COMPILER  the compiler          FLAGS   its arguments joined by "|", the source last
#   MODE      ko or ok              SOURCE  the source file (for messages)
#   EXPECT    regex the diagnostics must match (ko)
#   KERNEL, FUNC, PARAMETER  names the first error must show (ko, optional)
#   CHARACTERS  ON when the compiler shows names as character packs
#   MAX_LINES   the most lines the diagnostics may take (ko, optional)
#
# ko passes only when the compilation FAILS, its output matches EXPECT and
# names what it must, in at most MAX_LINES lines. Lines that contain
# "expected-error" are dropped first, so a compiler that echoes the source
# line holding the expectation cannot satisfy the regex by itself.
foreach(v COMPILER FLAGS MODE SOURCE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ctgradCompileFail.cmake: ${v} is not set")
  endif()
endforeach()

string(REPLACE "|" ";" FLAGS "${FLAGS}")
execute_process(
  COMMAND ${COMPILER} ${FLAGS}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)

if(MODE STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message("${out}")
    message(FATAL_ERROR "${SOURCE}: the control variant (-DCTG_CONTROL) must compile")
  endif()
  return()
endif()

string(REGEX REPLACE "[^\n]*expected-error[^\n]*" "" filtered "${out}")
if(rc EQUAL 0)
  message("${out}")
  message(FATAL_ERROR "${SOURCE}: compiled, but it must fail with /${EXPECT}/")
endif()
if(NOT filtered MATCHES "${EXPECT}")
  message("${out}")
  message(FATAL_ERROR "${SOURCE}: failed to compile, but not with /${EXPECT}/ (output above)")
endif()

# A name as the compiler prints it: "fwd" or 'f', 'w', 'd'.
function(_ctgrad_spelled name out_var)
  if(CHARACTERS)
    string(LENGTH "${name}" n)
    math(EXPR last "${n} - 1")
    set(parts)
    foreach(k RANGE 0 ${last})
      string(SUBSTRING "${name}" ${k} 1 ch)
      list(APPEND parts "'${ch}'")
    endforeach()
    list(JOIN parts ", " spelled)
  else()
    set(spelled "\"${name}\"")
  endif()
  set(${out_var} "${spelled}" PARENT_SCOPE)
endfunction()

foreach(what KERNEL FUNC)
  if(DEFINED ${what} AND NOT "${${what}}" STREQUAL "")
    _ctgrad_spelled("${${what}}" spelled)
    string(FIND "${out}" "${spelled}" at)
    if(at EQUAL -1)
      message("${out}")
      message(FATAL_ERROR "${SOURCE}: the diagnostics do not name the ${what} as ${spelled}")
    endif()
  endif()
endforeach()
if(DEFINED PARAMETER AND NOT "${PARAMETER}" STREQUAL "")
  string(FIND "${out}" "parameter<${PARAMETER}," at)
  if(at EQUAL -1)
    message("${out}")
    message(FATAL_ERROR "${SOURCE}: the diagnostics do not name field parameter #${PARAMETER}")
  endif()
endif()

if(DEFINED MAX_LINES AND NOT "${MAX_LINES}" STREQUAL "")
  string(REGEX MATCHALL "\n" newlines "${out}")
  list(LENGTH newlines lines)
  if(lines GREATER MAX_LINES)
    message("${out}")
    message(FATAL_ERROR "${SOURCE}: ${lines} lines of diagnostics, at most ${MAX_LINES} allowed")
  endif()
endif()
message(STATUS "${SOURCE}: fails to compile with /${EXPECT}/ as expected")
