# instructions_heaps' quick run (ctest `instructions_heaps_run`, where tests
# are built): every heap it lists on every pattern for a few thousand steps, without
# valgrind; each must exit 0 and print one JSON line per pattern.
#
#   cmake -DEXE=<instructions_heaps> -P smoke_test.cmake
if(NOT EXE)
  message(FATAL_ERROR "instructions smoke test: -DEXE=<instructions_heaps> is required")
endif()
# The heaps: the program's own list.
execute_process(COMMAND ${EXE} --list RESULT_VARIABLE rc OUTPUT_VARIABLE heaps ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "instructions_heaps --list: exit ${rc}\n${err}")
endif()
string(REGEX REPLACE "\n$" "" heaps "${heaps}")
string(REPLACE "\n" ";" heaps "${heaps}")
list(LENGTH heaps count)
if(count EQUAL 0)
  message(FATAL_ERROR "instructions_heaps --list: no heap")
endif()
foreach(heap IN LISTS heaps)
  execute_process(COMMAND ${EXE} --heap ${heap} --pattern all --steps 2000
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "instructions_heaps --heap ${heap}: exit ${rc}\n${err}")
  endif()
  string(REGEX MATCHALL "\"pattern\": \"[a-z]+\"" lines "${out}")
  list(LENGTH lines n)
  if(NOT n EQUAL 3)
    message(FATAL_ERROR "instructions_heaps --heap ${heap}: ${n} pattern lines, expected 3\n${out}")
  endif()
endforeach()
