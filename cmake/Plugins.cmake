# cloud_add_plugin(<target> SOURCES ... LIBS ...): a Boost.DLL plugin, built as
# ${CLOUD_PLUGIN_OUTPUT_DIR}/lib<target>.so with hidden visibility, so that only the three
# symbols CLOUD_PLUGIN exports are visible (plugin_api/include/plugin_api/export.hpp).
include(Install)

function(cloud_add_plugin target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE cloud_plugin_api ${ARG_LIBS})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME ${target}
    LIBRARY_OUTPUT_DIRECTORY ${CLOUD_PLUGIN_OUTPUT_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # A plugin that forgets a symbol must fail at link time, not when the host loads it.
  target_link_options(${target} PRIVATE LINKER:--no-undefined)
  cloud_warnings(${target})
  # Decided once every directory is configured: test plugins move out of the plugin directory
  # after this call (tests/host/CMakeLists.txt). EVAL, because DEFER expands variables late.
  cmake_language(EVAL CODE
    "cmake_language(DEFER DIRECTORY [[${CMAKE_SOURCE_DIR}]] CALL _cloud_ship_plugin [[${target}]])")
endfunction()

# A plugin ships when it lands in the build's plugin directory (build tree = install layout).
function(_cloud_ship_plugin target)
  get_target_property(dir ${target} LIBRARY_OUTPUT_DIRECTORY)
  if(dir STREQUAL CLOUD_PLUGIN_OUTPUT_DIR)
    cloud_ship(${target} LIBRARY DESTINATION ${CLOUD_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
