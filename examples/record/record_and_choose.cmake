# The three commands of examples/record/README.md, run on record_workload:
#   cmake -DCLI=allotheque-trace -DWORKLOAD=record_workload -DWORK_DIR=dir -P record_and_choose.cmake
# Fails (with the commands' output) unless the program runs correctly under the
# tracer, the summary reads the trace, and the replay ranks the allocators and
# recommends one.
foreach(var CLI WORKLOAD WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "record_and_choose.cmake: ${var} not set")
  endif()
endforeach()
file(MAKE_DIRECTORY ${WORK_DIR})
set(trace ${WORK_DIR}/workload.trace)
file(REMOVE ${trace})

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("$ ${name}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: exit status ${rc}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

function(expect what)
  string(FIND "${step_output}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in the output above")
  endif()
endfunction()

# 1. Record: the program's own output and exit status come through.
run_step("allotheque-trace record -o workload.trace -- record_workload 5"
         ${CLI} record -o ${trace} -- ${WORKLOAD} 5)
expect("record_workload: 5 rounds, checksum")
if(NOT EXISTS ${trace})
  message(FATAL_ERROR "record wrote no trace")
endif()

# 2. Summarise: sizes, peaks, lifetimes (no symbols: addr2line is optional).
run_step("allotheque-trace summary --no-symbols workload.trace"
         ${CLI} summary --no-symbols ${trace})
expect("record_workload")

# 3. Replay on glibc and allotheque's heaps (the peers need their libraries),
#    ranked, with a recommendation.
run_step("allotheque-trace replay --allocators glibc,pmr,kingsley,quickfit,velox,medius,lea --repeat 1 workload.trace"
         ${CLI} replay --allocators glibc,pmr,kingsley,quickfit,velox,medius,lea --repeat 1 ${trace})
foreach(a glibc pmr kingsley quickfit velox medius lea)
  if(NOT step_output MATCHES "\\| [0-9]+ +\\| ${a} +\\|")
    message(FATAL_ERROR "no ranked row for ${a}")
  endif()
endforeach()
expect("recommended:")
