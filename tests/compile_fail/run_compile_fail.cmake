# Compiles one file with -fsyntax-only and checks the outcome.
#   -DCXX=<compiler> -DSOURCE=<file.cpp> -DINCLUDES=<dir;dir> [-DFLAGS=<flag;flag>]
# The file's first line says what to expect:
#   // expect: <regex>     compilation must fail and the diagnostics match <regex>
#   // expect-first: <regex>  as expect:, and the first error is the one matching
#                           (a library that promises a readable first error)
#   // expect-success      compilation must succeed (a control)
foreach(v CXX SOURCE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_compile_fail.cmake: ${v} not set")
  endif()
endforeach()

file(STRINGS "${SOURCE}" first_line LIMIT_COUNT 1)
set(expect_success OFF)
set(expect_first OFF)
if(first_line MATCHES "^// expect-success")
  set(expect_success ON)
elseif(first_line MATCHES "^// expect: (.+)$")
  set(expected "${CMAKE_MATCH_1}")
elseif(first_line MATCHES "^// expect-first: (.+)$")
  set(expected "${CMAKE_MATCH_1}")
  set(expect_first ON)
else()
  message(FATAL_ERROR "${SOURCE}: first line must be '// expect: <regex>', '// expect-first: <regex>' or '// expect-success'")
endif()

set(include_flags "")
foreach(dir IN LISTS INCLUDES)
  if(dir)
    list(APPEND include_flags "-I${dir}")
  endif()
endforeach()

execute_process(
  COMMAND ${CXX} -std=c++20 -fsyntax-only ${FLAGS} ${include_flags} ${SOURCE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)

if(expect_success)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} should compile but failed:\n${err}")
  endif()
  message(STATUS "${SOURCE}: compiles, as expected")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected with: ${expected}")
endif()
if(NOT "${out}${err}" MATCHES "${expected}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but not with the expected message '${expected}':\n${err}")
endif()
if(expect_first)
  # g++ and clang++ both write "file:line:col: error: message" on one line.
  string(REGEX MATCH "[^\n]*error: [^\n]*" first_error "${out}${err}")
  if(NOT first_error MATCHES "${expected}")
    message(FATAL_ERROR "${SOURCE}: the expected message '${expected}' is not the first error, which is:\n${first_error}")
  endif()
endif()
message(STATUS "${SOURCE}: rejected with the expected message")
