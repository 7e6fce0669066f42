enable_testing()
list(APPEND CMAKE_MODULE_PATH ${doctest_DIR})
include(doctest)

# cloud_unit_test(<name> SOURCES ... LIBS ...): one doctest binary per library, labelled
# `unit` and the component, discovered test case by test case.
function(cloud_unit_test name)
  cmake_parse_arguments(ARG "" "COMPONENT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE doctest::doctest ${ARG_LIBS})
  target_compile_definitions(${name} PRIVATE DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN)
  cloud_warnings(${name})
  doctest_discover_tests(${name} ADD_LABELS 0 PROPERTIES LABELS "unit;${ARG_COMPONENT}")
endfunction()
