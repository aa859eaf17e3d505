# order_bench's smoke test (ctest `order_bench_checksums`, where tests are
# built): every workload at a small size under each kind of variant that runs
# without LD_PRELOAD (std containers on malloc and on the heaps, the hinted
# containers, reorganize(), the room layer, the packed reference). Each run
# must succeed and print its JSON line, and within a workload every variant
# must report the same checksum: the containers hold the same elements in the
# same order whatever placed or moved them. Under the dev preset's ASan this
# also runs the hinted containers and reorganize() over the real heaps.
#
#   cmake -DEXE=<order_bench> -P smoke_test.cmake
if(NOT EXE)
  message(FATAL_ERROR "order smoke test: -DEXE=<order_bench> is required")
endif()

set(variants   # one variant's arguments, separated by "|"
    "--allocator|malloc"
    "--allocator|packed"
    "--allocator|velox"
    "--allocator|medius|--layout|isolated"
    "--allocator|velox|--container|hinted"
    "--allocator|medius|--container|hinted|--reorganize|1"
    "--allocator|malloc|--container|hinted|--hint|none|--reorganize|1"
    "--allocator|room|--container|hinted|--fill|25"
    "--allocator|quickfit"
    "--allocator|segregated|--container|hinted")
foreach(workload map set list graph scene)
  set(sizes --n 3000 --lookups 500 --passes 1 --roots 1 --edits 2000)
  unset(expected)
  foreach(v IN LISTS variants)
    string(REPLACE "|" " " shown "${v}")
    string(REPLACE "|" ";" args "${v}")
    if(workload MATCHES "^(graph|scene)$" AND shown MATCHES "reorganize|--hint none")
      continue()   # the benchmark's own structures: no reorganize(), hints always
    endif()
    execute_process(COMMAND ${EXE} --workload ${workload} ${sizes} ${args}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "order ${workload} ${shown}: exit ${rc}\n${err}")
    endif()
    string(JSON sum ERROR_VARIABLE json_error GET "${out}" checksum)
    if(json_error)
      message(FATAL_ERROR "order ${workload} ${shown}: no JSON line (${json_error})\n${out}")
    endif()
    if(NOT DEFINED expected)
      set(expected "${sum}")
    elseif(NOT sum STREQUAL expected)
      message(FATAL_ERROR "order ${workload} ${shown}: checksum ${sum}, the first variant gave ${expected}")
    endif()
    message(STATUS "order ${workload} ${shown}: ${sum}")
  endforeach()
endforeach()
