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

# doctest_discover_tests reads the case list as a CMake list, so a case named with a `;` is
# registered under a fragment of its name that selects no case, and passes without running.
function(_cloud_refuse_split_test_names)
  foreach(source IN LISTS ARGN)
    get_filename_component(path "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${path}")
      continue()
    endif()
    file(STRINGS "${path}" split REGEX "TEST_CASE\\(\"[^\"]*;")
    if(split)
      message(FATAL_ERROR "${path}: a test case named with ';' would be registered under part of its "
                          "name and never run; use ',' instead: ${split}")
    endif()
  endforeach()
endfunction()

# cloud_unit_test(<name> [FLOOR_TWIN] SOURCES ... LIBS ...): one doctest binary per library,
# labelled `unit`, discovered test case by test case and named `<component>.<test case>` (so two
# binaries' cases cannot clash, and `ctest -R '^wire\.'` selects a component). FLOOR_TWIN, for
# tests that start a real nats-server (CLOUD_TEST_NATS_SERVER, default the pinned one): each case
# also runs as `<component>.<test case>.floor` on the floor server (cloud_doctest_twins below).
function(cloud_unit_test name)
  cmake_parse_arguments(ARG "FLOOR_TWIN" "COMPONENT" "SOURCES;LIBS" ${ARGN})
  _cloud_refuse_split_test_names(${ARG_SOURCES})
  add_executable(${name} ${ARG_SOURCES} $<TARGET_OBJECTS:cloud_doctest_main>)
  target_link_libraries(${name} PRIVATE doctest::doctest ${ARG_LIBS})
  cloud_warnings(${name})
  if(ARG_FLOOR_TWIN)
    cloud_doctest_twins(${name} "${ARG_COMPONENT}." unit)
  else()
    doctest_discover_tests(${name} TEST_PREFIX "${ARG_COMPONENT}." ADD_LABELS 0 PROPERTIES LABELS unit)
  endif()
endfunction()

# Which nats-server the tests run on (cmake/NatsServer.cmake): every integration test on the
# pinned server, and its twin `<name>.floor` (label `floor` added) on the floor server. The twin
# differs only in the server: NATS_SERVER (tests/support/cloudtest.py: what the harness passes as
# NATS_SERVER_BIN and what a test's own server runs), NATS_SERVER_BIN (the C++ harness,
# tests/cpp_support/cloud_process.cpp, passes the environment through to `cloud`) and
# CLOUD_TEST_NATS_SERVER (the bus tests' launcher, plugins/amqp/bus/tests/nats_server.cpp), with
# NATS_SERVER_VERSION, the version that server reports. `ctest -L floor` or `-R '\.floor$'`
# selects the twins, `-LE floor` the pinned runs.
set(_cloud_server_env_pinned
  "NATS_SERVER=${CLOUD_NATS_SERVER};NATS_SERVER_VERSION=${NATS_SERVER_PINNED}")
set(_cloud_server_env_floor
  "NATS_SERVER=${CLOUD_NATS_SERVER_FLOOR};NATS_SERVER_BIN=${CLOUD_NATS_SERVER_FLOOR};CLOUD_TEST_NATS_SERVER=${CLOUD_NATS_SERVER_FLOOR};NATS_SERVER_VERSION=${NATS_SERVER_FLOOR}")

# _cloud_doctest_properties(<test list variable> <script file> [LABELS ...] [TIMEOUT s]
# [ENVIRONMENT ...] [ENVIRONMENT_MODIFICATION ...]): doctest_discover_tests cannot pass a
# list-valued property (it flattens PROPERTIES, so LABELS "a;b" would come out as LABELS a plus a
# property named b). The tests it discovers are named in <test list variable> when ctest reads the
# directory; a TEST_INCLUDE_FILES script included after its own sets the properties on them, each
# list kept whole in one bracket argument.
function(_cloud_doctest_properties list_var file)
  set(list_props LABELS ENVIRONMENT ENVIRONMENT_MODIFICATION)
  cmake_parse_arguments(P "" "TIMEOUT" "${list_props}" ${ARGN})
  set(props "")
  foreach(prop IN LISTS list_props ITEMS TIMEOUT)
    if(DEFINED P_${prop})
      string(APPEND props " ${prop} [==[${P_${prop}}]==]")
    endif()
  endforeach()
  file(WRITE ${file} "if(${list_var})\n  set_tests_properties(\${${list_var}} PROPERTIES${props})\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()

# cloud_python_test(<name> <file.py> [PINNED_ONLY] [LABELS ...] [TIMEOUT s] [ENV VAR=value ...]
# [ARGS ...]): an integration test written with tests/support/cloudtest.py, run by
# /usr/bin/python3 against the real `cloud` binary of this build; registered twice, <name> on the
# pinned nats-server and <name>.floor on the floor (PINNED_ONLY: only the first, for the interop
# clients). It lives here rather than in tests/support/ because tests/ adds its subfolders
# alphabetically and tests/host comes before tests/support.
get_filename_component(CLOUD_SOURCE_ROOT ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
set(CLOUD_PYTHON /usr/bin/python3 CACHE FILEPATH "Debian's python3 (sees python3-pika)")
function(cloud_python_test name file)
  cmake_parse_arguments(ARG "PINNED_ONLY" "TIMEOUT" "LABELS;ENV;ARGS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  get_filename_component(_file ${file} ABSOLUTE)
  set(_env "PYTHONPATH=${CLOUD_SOURCE_ROOT}/tests/support;PYTHONDONTWRITEBYTECODE=1;CLOUD_BIN=$<TARGET_FILE:cloud>;CLOUD_PLUGIN_DIR=${CLOUD_PLUGIN_OUTPUT_DIR};CLOUD_MANIFEST=${CMAKE_BINARY_DIR}/share/cloud/apps.json;CLOUD_SOURCE_DIR=${CLOUD_SOURCE_ROOT};CLOUD_TEST_NATS_SERVER_BELOW_FLOOR=${CLOUD_NATS_SERVER_BELOW_FLOOR}")
  set(_servers pinned)
  if(NOT ARG_PINNED_ONLY)
    list(APPEND _servers floor)
  endif()
  foreach(server IN LISTS _servers)
    set(_name ${name})
    set(_labels "integration;${ARG_LABELS}")
    if(server STREQUAL floor)
      set(_name ${name}.floor)
      list(APPEND _labels floor)
    endif()
    add_test(NAME ${_name} COMMAND ${CLOUD_PYTHON} -u ${_file} ${ARG_ARGS})
    set_tests_properties(${_name} PROPERTIES
      LABELS "${_labels}"
      TIMEOUT ${ARG_TIMEOUT}
      ENVIRONMENT "${_env};${_cloud_server_env_${server}};${ARG_ENV}")
  endforeach()
endfunction()

# cloud_cpp_integration_test(<target> LABEL <label> SOURCES <file>...): a doctest binary that
# drives the real `cloud` of this build through cloud_test_support (cloud_process, rabbitmq-c,
# raw socket), one ctest per TEST_CASE, named "<label>.<test case>" (so `ctest -R <label>`
# selects them) and labelled "integration;<label>"; each also has its twin
# "<label>.<test case>.floor" on the floor nats-server (label `floor` added). The pinned runs
# unset NATS_SERVER_BIN, so `cloud` launches its default: the pinned server the build copied
# beside its plugins (lib/cloud/bin/nats-server).
function(cloud_cpp_integration_test target)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES" ${ARGN})
  add_executable(${target} ${ARG_SOURCES} $<TARGET_OBJECTS:cloud_doctest_main>)
  target_link_libraries(${target} PRIVATE cloud_test_support doctest::doctest)
  cloud_warnings(${target})
  # The test drives the binaries it does not link: build them first.
  foreach(dep cloud cloud_amqp cloud_pubsub cloud_nats_server)
    if(TARGET ${dep})
      add_dependencies(${target} ${dep})
    endif()
  endforeach()
  cloud_doctest_twins(${target} "${ARG_LABEL}." "integration;${ARG_LABEL}" 180)
  _cloud_doctest_properties(${target}_PINNED ${CMAKE_CURRENT_BINARY_DIR}/${target}_default_server.cmake
    ENVIRONMENT_MODIFICATION "NATS_SERVER_BIN=unset:")
endfunction()

# cloud_doctest_twins(<target> <prefix> <labels> [<timeout>]): discovers <target>'s test cases
# twice, as "<prefix><case>" (pinned nats-server) and "<prefix><case>.floor" (the floor's, label
# `floor` added, the server named by _cloud_server_env_floor). The twin's discovery lists `*`
# (every case) so that doctest_discover_tests, which names its files after the listing's
# arguments, writes files of its own.
function(cloud_doctest_twins target prefix labels)
  set(timeout "")
  if(ARGC GREATER 3)
    set(timeout TIMEOUT ${ARGV3})
  endif()
  doctest_discover_tests(${target} TEST_PREFIX "${prefix}" ADD_LABELS 0 TEST_LIST ${target}_PINNED)
  doctest_discover_tests(${target} TEST_PREFIX "${prefix}" TEST_SUFFIX ".floor" TEST_SPEC "*"
    ADD_LABELS 0 TEST_LIST ${target}_FLOOR)
  _cloud_doctest_properties(${target}_PINNED ${CMAKE_CURRENT_BINARY_DIR}/${target}_pinned_properties.cmake
    LABELS "${labels}" ${timeout} ENVIRONMENT "NATS_SERVER_VERSION=${NATS_SERVER_PINNED}")
  _cloud_doctest_properties(${target}_FLOOR ${CMAKE_CURRENT_BINARY_DIR}/${target}_floor_properties.cmake
    LABELS "${labels};floor" ${timeout} ENVIRONMENT "${_cloud_server_env_floor}")
endfunction()
