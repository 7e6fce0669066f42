enable_testing()
list(APPEND CMAKE_MODULE_PATH ${doctest_DIR})
include(doctest)

# doctest's main lives in one generated translation unit shared by every test binary, so a
# test binary may have any number of *_test.cpp sources (defining
# DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN on each source would define main once per source).
set(_cloud_doctest_main ${CMAKE_BINARY_DIR}/cloud_doctest_main.cpp)
file(WRITE ${_cloud_doctest_main}.in
  "#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN\n#include <doctest/doctest.h>\n")
configure_file(${_cloud_doctest_main}.in ${_cloud_doctest_main} COPYONLY)
add_library(cloud_doctest_main OBJECT ${_cloud_doctest_main})
target_link_libraries(cloud_doctest_main PUBLIC doctest::doctest)

# cloud_unit_test(<name> SOURCES ... LIBS ...): one doctest binary per library, labelled
# `unit`, discovered test case by test case and named `<component>.<test case>` (so two
# binaries' cases cannot clash, and `ctest -R '^wire\.'` selects a component). A second label
# cannot be passed: doctest_discover_tests appends its own LABELS after PROPERTIES.
function(cloud_unit_test name)
  cmake_parse_arguments(ARG "" "COMPONENT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} $<TARGET_OBJECTS:cloud_doctest_main>)
  target_link_libraries(${name} PRIVATE doctest::doctest ${ARG_LIBS})
  cloud_warnings(${name})
  doctest_discover_tests(${name} TEST_PREFIX "${ARG_COMPONENT}." ADD_LABELS 0 PROPERTIES LABELS unit)
endfunction()

# cloud_python_test(<name> <file.py> [LABELS ...] [TIMEOUT s] [ENV VAR=value ...] [ARGS ...]): an
# integration test written with tests/support/cloudtest.py, run by /usr/bin/python3 against the
# real `cloud` binary of this build. It lives here rather than in tests/support/ because
# tests/ adds its subfolders alphabetically and tests/host comes before tests/support.
get_filename_component(CLOUD_SOURCE_ROOT ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
set(CLOUD_PYTHON /usr/bin/python3 CACHE FILEPATH "Debian's python3 (sees python3-pika)")
function(cloud_python_test name file)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;ENV;ARGS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  get_filename_component(_file ${file} ABSOLUTE)
  add_test(NAME ${name} COMMAND ${CLOUD_PYTHON} -u ${_file} ${ARG_ARGS})
  set_tests_properties(${name} PROPERTIES
    LABELS "integration;${ARG_LABELS}"
    TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "PYTHONPATH=${CLOUD_SOURCE_ROOT}/tests/support;PYTHONDONTWRITEBYTECODE=1;CLOUD_BIN=$<TARGET_FILE:cloud>;CLOUD_PLUGIN_DIR=${CLOUD_PLUGIN_OUTPUT_DIR};CLOUD_MANIFEST=${CMAKE_BINARY_DIR}/share/cloud/apps.json;CLOUD_SOURCE_DIR=${CLOUD_SOURCE_ROOT};NATS_SERVER=${NATS_SERVER_EXECUTABLE};${ARG_ENV}")
endfunction()

# cloud_cpp_integration_test(<target> LABEL <label> SOURCES <file>...): a doctest binary that
# drives the real `cloud` of this build through cloud_test_support (cloud_process, rabbitmq-c,
# raw socket), one ctest per TEST_CASE, named "<label>.<test case>" (so `ctest -R <label>`
# selects them) and labelled "integration;<label>".
function(cloud_cpp_integration_test target)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES" ${ARGN})
  add_executable(${target} ${ARG_SOURCES} $<TARGET_OBJECTS:cloud_doctest_main>)
  target_link_libraries(${target} PRIVATE cloud_test_support doctest::doctest)
  cloud_warnings(${target})
  # The test drives the binaries it does not link: build them first.
  foreach(dep cloud cloud_amqp cloud_pubsub)
    if(TARGET ${dep})
      add_dependencies(${target} ${dep})
    endif()
  endforeach()
  doctest_discover_tests(${target} TEST_PREFIX "${ARG_LABEL}." ADD_LABELS 0
    PROPERTIES LABELS "integration;${ARG_LABEL}" TIMEOUT 180)
endfunction()
