# The install layout is the build tree's (README, "Layout"): the host finds its manifest and
# plugins relative to its own path, so these destinations are fixed, not GNUInstallDirs'.
set(CLOUD_BIN_INSTALL_DIR bin)
set(CLOUD_PLUGIN_INSTALL_DIR lib/cloud/plugins)
set(CLOUD_DATA_INSTALL_DIR share/cloud)
# Helper programs of the plugins: the pinned nats-server (pubsub's default, found relative to the
# plugin library as ../bin/nats-server).
set(CLOUD_HELPER_INSTALL_DIR lib/cloud/bin)

# `cloud_package_contents` builds only what is installed, so packaging need not compile every
# test and benchmark (packaging/CMakeLists.txt adds its generated documents).
add_custom_target(cloud_package_contents)

# cloud_ship(<target> <install(TARGETS) arguments>): installs the target and adds it to
# cloud_package_contents.
function(cloud_ship target)
  install(TARGETS ${target} ${ARGN})
  add_dependencies(cloud_package_contents ${target})
endfunction()

# The pinned nats-server (cmake/NatsServer.cmake), copied into the build tree where it is
# installed, lib/cloud/bin/nats-server, so that the build tree runs as installed (scripts/run).
# Stripped on the way, as Debian strips the binaries it ships; `--version` and the module list
# `go version -m` reads (packaging/debian/copyright) survive stripping.
set(CLOUD_NATS_SERVER_SHIPPED ${CMAKE_BINARY_DIR}/${CLOUD_HELPER_INSTALL_DIR}/nats-server)
add_custom_command(OUTPUT ${CLOUD_NATS_SERVER_SHIPPED}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/${CLOUD_HELPER_INSTALL_DIR}
  COMMAND ${CMAKE_COMMAND} -E copy ${CLOUD_NATS_SERVER} ${CLOUD_NATS_SERVER_SHIPPED}.tmp
  COMMAND ${CMAKE_STRIP} ${CLOUD_NATS_SERVER_SHIPPED}.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${CLOUD_NATS_SERVER_SHIPPED}.tmp ${CLOUD_NATS_SERVER_SHIPPED}
  DEPENDS ${CLOUD_NATS_SERVER}
  COMMENT "nats-server ${NATS_SERVER_PINNED} -> ${CLOUD_HELPER_INSTALL_DIR}/nats-server"
  VERBATIM)
add_custom_target(cloud_nats_server ALL DEPENDS ${CLOUD_NATS_SERVER_SHIPPED})
add_dependencies(cloud_package_contents cloud_nats_server)
install(PROGRAMS ${CLOUD_NATS_SERVER_SHIPPED} DESTINATION ${CLOUD_HELPER_INSTALL_DIR})
