# The install layout is the build tree's (README, "Layout"): the host finds its manifest and
# plugins relative to its own path, so these destinations are fixed, not GNUInstallDirs'.
set(CLOUD_BIN_INSTALL_DIR bin)
set(CLOUD_PLUGIN_INSTALL_DIR lib/cloud/plugins)
set(CLOUD_DATA_INSTALL_DIR share/cloud)

# `cloud_package_contents` builds only what is installed, so packaging need not compile every
# test and benchmark (packaging/CMakeLists.txt adds its generated documents).
add_custom_target(cloud_package_contents)

# cloud_ship(<target> <install(TARGETS) arguments>): installs the target and adds it to
# cloud_package_contents.
function(cloud_ship target)
  install(TARGETS ${target} ${ARGN})
  add_dependencies(cloud_package_contents ${target})
endfunction()
