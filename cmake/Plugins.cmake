# cloud_add_plugin(<target> SOURCES ... LIBS ...): a Boost.DLL plugin, built as
# ${CLOUD_PLUGIN_OUTPUT_DIR}/lib<target>.so with hidden visibility, so that only the three
# symbols CLOUD_PLUGIN exports are visible (plugin_api/include/plugin_api/export.hpp).
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
endfunction()
