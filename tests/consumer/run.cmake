# Driver for the packaging ctests. Run with `cmake -D... -P run.cmake`.
#
#   MODE                  install | headers_only | component | subdir | fetch
#   ALLOTHEQUE_SOURCE_DIR allotheque source root
#   ALLOTHEQUE_BINARY_DIR allotheque build tree (MODE=install: what gets installed)
#
# install:      `cmake --install` of the (built) test tree, then find_package.
# headers_only: a fresh tree configured with ALLOTHEQUE_HEADERS_ONLY=ON and no
#               build type, installed with plain `cmake --install` without
#               building anything; the build type must have defaulted to
#               Release and nothing compiled may reach the prefix.
# component:    a fresh tree with the default options (malloc and tools ON
#               where supported), never built, installed with
#               `--component headers`: only headers, package and licence.
#   CONSUMER_SOURCE_DIR   consumer project to configure
#   WORK_DIR              scratch directory (wiped first)
#   CONSUMER_GENERATOR, CONSUMER_CXX_COMPILER, CONSUMER_CONFIG, EXPECTED_VERSION
cmake_minimum_required(VERSION 3.25)

foreach(v MODE ALLOTHEQUE_SOURCE_DIR CONSUMER_SOURCE_DIR WORK_DIR EXPECTED_VERSION)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run.cmake: ${v} is not set")
  endif()
endforeach()
if(NOT CONSUMER_CONFIG)
  set(CONSUMER_CONFIG Release)
endif()

function(run_step what)
  message(STATUS "[${MODE}] ${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[${MODE}] ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")

# Generator and compiler, for the consumer and for a fresh allotheque tree.
set(toolchain_args "")
if(CONSUMER_GENERATOR)
  list(APPEND toolchain_args -G "${CONSUMER_GENERATOR}")
endif()
if(CONSUMER_CXX_COMPILER)
  list(APPEND toolchain_args -DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER})
endif()

set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" ${toolchain_args}
  -DCMAKE_BUILD_TYPE=${CONSUMER_CONFIG}
  # Only the prefix we install to may satisfy find_package(allotheque).
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)

if(MODE MATCHES "^(install|headers_only|component)$")
  set(install_args --prefix "${prefix}" --config ${CONSUMER_CONFIG})
  if(MODE STREQUAL "install")
    if(NOT ALLOTHEQUE_BINARY_DIR)
      message(FATAL_ERROR "run.cmake: ALLOTHEQUE_BINARY_DIR is not set")
    endif()
    set(installed_tree "${ALLOTHEQUE_BINARY_DIR}")
  else()
    # A fresh allotheque tree, configured and never built.
    set(installed_tree "${WORK_DIR}/allotheque")
    set(lib_args -S "${ALLOTHEQUE_SOURCE_DIR}" -B "${installed_tree}" ${toolchain_args})
    if(MODE STREQUAL "headers_only")
      list(APPEND lib_args -DALLOTHEQUE_HEADERS_ONLY=ON)
    else()
      list(APPEND lib_args -DALLOTHEQUE_BUILD_TESTS=OFF -DALLOTHEQUE_BUILD_BENCHMARKS=OFF
                           -DALLOTHEQUE_BUILD_EXAMPLES=OFF)
      list(APPEND install_args --component headers)
    endif()
    run_step("configure allotheque" ${CMAKE_COMMAND} ${lib_args})
    if(NOT CONSUMER_GENERATOR MATCHES "Multi-Config|Visual Studio|Xcode")
      file(STRINGS "${installed_tree}/CMakeCache.txt" type_line REGEX "^CMAKE_BUILD_TYPE:")
      if(NOT type_line MATCHES "=Release$")
        message(FATAL_ERROR "[${MODE}] no build type given, expected Release, got '${type_line}'")
      endif()
    endif()
  endif()
  run_step("install" ${CMAKE_COMMAND} --install "${installed_tree}" ${install_args})
  foreach(f include/allotheque/version.hpp include/allotheque/allotheque.hpp share/doc/allotheque/LICENSE)
    if(NOT EXISTS "${prefix}/${f}")
      message(FATAL_ERROR "[${MODE}] ${f} missing from the install prefix")
    endif()
  endforeach()
  file(GLOB_RECURSE config_file "${prefix}/*/allothequeConfig.cmake")
  if(NOT config_file)
    message(FATAL_ERROR "[${MODE}] allothequeConfig.cmake missing from the install prefix")
  endif()
  if(NOT MODE STREQUAL "install")
    file(GLOB_RECURSE compiled "${prefix}/*.so" "${prefix}/*.so.*" "${prefix}/*.a" "${prefix}/bin/*")
    if(compiled)
      message(FATAL_ERROR "[${MODE}] a headers-only install installed compiled files: ${compiled}")
    endif()
  endif()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${prefix})
elseif(MODE STREQUAL "subdir" OR MODE STREQUAL "fetch")
  list(APPEND configure_args -DALLOTHEQUE_SOURCE_DIR=${ALLOTHEQUE_SOURCE_DIR})
else()
  message(FATAL_ERROR "run.cmake: unknown MODE '${MODE}'")
endif()

run_step("configure" ${CMAKE_COMMAND} ${configure_args})

if(DEFINED installed_tree)
  # Make sure the package really came from our prefix.
  file(STRINGS "${build}/CMakeCache.txt" dir_line REGEX "^allotheque_DIR:")
  string(REGEX REPLACE "^allotheque_DIR:[A-Z]+=" "" found_dir "${dir_line}")
  file(REAL_PATH "${prefix}" real_prefix)
  file(REAL_PATH "${found_dir}" real_found)
  string(FIND "${real_found}" "${real_prefix}/" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "[${MODE}] allotheque found at '${found_dir}', not under '${prefix}'")
  endif()
endif()

run_step("build" ${CMAKE_COMMAND} --build "${build}" --config ${CONSUMER_CONFIG} --parallel 2)

set(exe "${build}/consumer")
if(NOT EXISTS "${exe}")
  file(GLOB_RECURSE exe "${build}/consumer" "${build}/consumer.exe")
endif()
execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "[${MODE}] consumer says: ${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "[${MODE}] consumer exited with ${rc}")
endif()
if(NOT out MATCHES "^allotheque ${EXPECTED_VERSION} ")
  message(FATAL_ERROR "[${MODE}] consumer printed an unexpected version: ${out}")
endif()
