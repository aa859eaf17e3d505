# Replay's malloc rows against the real thing (ctest trace_replay_vs_preload_*,
# docs/trace.md "Do the malloc rows match the libraries?"): records PROGRAM
# (preload_program --program NAME), replays the trace on glibc and every
# shipped malloc library, runs PROGRAM itself under LD_PRELOAD of each
# library, and requires replay's peak memory for each row within TOLERANCE
# (per mille) of the real run's. Both figures are the growth of the resident
# set over the work (tools/common/process_memory.hpp), the median of REPEAT
# runs.
#
#   cmake -DCLI=... -DPROGRAM=... -DNAME=sizes|<olden program> -DHEAPS=a;b
#         -DLIBS=/path/liballotheque_malloc_a.so;... -DWORK_DIR=... [-DREPEAT=3] [-DTOLERANCE=150]
#         -P replay_vs_preload.cmake
if(NOT DEFINED REPEAT)
  set(REPEAT 3)
endif()
if(NOT DEFINED TOLERANCE)
  set(TOLERANCE 150)
endif()
file(MAKE_DIRECTORY ${WORK_DIR})
set(trace ${WORK_DIR}/${NAME}.atq)
set(json ${WORK_DIR}/${NAME}.json)
file(REMOVE ${trace} ${json})
set(args --program ${NAME} --scale quick)

# 1. Record, under glibc.
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD ${CLI} record -o ${trace} -- ${PROGRAM} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "record failed (${rc}):\n${out}${err}")
endif()

# 2. Replay on glibc and the malloc rows.
set(rows glibc)
foreach(heap IN LISTS HEAPS)
  list(APPEND rows malloc-${heap})
endforeach()
string(REPLACE ";" "," allocators "${rows}")
execute_process(COMMAND ${CLI} replay --repeat ${REPEAT} --allocators ${allocators} --json ${json} ${trace}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "replay failed (${rc})")
endif()
file(READ ${json} doc)
string(JSON n LENGTH "${doc}" results)
math(EXPR last "${n} - 1")

# The library a row ran, as the JSON names it: the one the build made, and
# the one the real runs preload.
set(i 0)
foreach(heap IN LISTS HEAPS)
  list(GET LIBS ${i} lib)
  math(EXPR i "${i} + 1")
  file(REAL_PATH ${lib} lib_${heap})
endforeach()

set(report "")
set(failures "")
foreach(row IN LISTS rows)
  # Replay's figure.
  set(replay_peak "")
  foreach(k RANGE ${last})
    string(JSON name GET "${doc}" results ${k} allocator)
    if(name STREQUAL row)
      string(JSON status GET "${doc}" results ${k} status)
      if(NOT status STREQUAL "ok")
        string(JSON note ERROR_VARIABLE none GET "${doc}" results ${k} note)
        message(FATAL_ERROR "${row}: ${status}: ${note}")
      endif()
      string(JSON replay_peak GET "${doc}" results ${k} peak_os_bytes)
      string(JSON kind GET "${doc}" results ${k} kind)
      if(row STREQUAL "glibc")
        set(lib "")
      else()
        string(REGEX REPLACE "^malloc-" "" heap ${row})
        set(lib ${lib_${heap}})
        string(JSON used GET "${doc}" results ${k} library)
        if(NOT kind STREQUAL "allotheque-malloc" OR NOT used STREQUAL lib)
          message(FATAL_ERROR "${row}: replayed as ${kind} with ${used}, expected allotheque-malloc with ${lib}")
        endif()
      endif()
    endif()
  endforeach()
  if(replay_peak STREQUAL "")
    message(FATAL_ERROR "${json} has no row ${row}")
  endif()

  # The real runs' figure.
  set(peaks "")
  foreach(r RANGE 1 ${REPEAT})
    if(lib STREQUAL "")
      set(env --unset=LD_PRELOAD)
    else()
      set(env LD_PRELOAD=${lib})
    endif()
    execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} ${PROGRAM} ${args}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${row}: ${PROGRAM} ${args} failed (${rc}):\n${out}${err}")
    endif()
    string(JSON active GET "${out}" malloc_library)
    if(row STREQUAL "glibc")
      set(want glibc)
    else()
      set(want allotheque)
    endif()
    if(NOT active STREQUAL want)
      message(FATAL_ERROR "${row}: the real run's malloc is '${active}', expected '${want}'")
    endif()
    string(JSON peak GET "${out}" peak_rss_delta_bytes)
    list(APPEND peaks ${peak})
  endforeach()
  list(SORT peaks COMPARE NATURAL)
  math(EXPR mid "${REPEAT} / 2")
  list(GET peaks ${mid} real_peak)
  if(real_peak LESS 4096)
    set(real_peak 4096)
  endif()

  # Per mille, signed: replay over real, minus one.
  math(EXPR diff "(${replay_peak} - ${real_peak}) * 1000 / ${real_peak}")
  math(EXPR real_kb "${real_peak} / 1024")
  math(EXPR replay_kb "${replay_peak} / 1024")
  string(APPEND report "  ${row}: real ${real_kb} KiB (runs: ${peaks}), replay ${replay_kb} KiB: ${diff} per mille\n")
  if(diff GREATER ${TOLERANCE} OR diff LESS -${TOLERANCE})
    list(APPEND failures ${row})
  endif()
endforeach()
message("${NAME}: replay's peak memory against the real run under LD_PRELOAD (median of ${REPEAT}):\n${report}")
if(failures)
  message(FATAL_ERROR "${NAME}: replay is more than ${TOLERANCE} per mille off the real run for: ${failures}")
endif()
