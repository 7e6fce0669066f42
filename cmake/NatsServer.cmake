# The nats-server binaries this build uses. Their versions come from one file,
# cmake/nats-server.versions (also read by scripts/install-deps, which builds both into the
# tools folder):
#   CLOUD_NATS_SERVER        the pinned release: the embedded default. The build copies it to
#                            <build>/lib/cloud/bin/nats-server (cmake/Install.cmake), which is what
#                            pubsub launches when NATS_SERVER_BIN is unset and what the .deb ships.
#   CLOUD_NATS_SERVER_FLOOR  the floor (the oldest supported line): the `.floor` twin of every integration test
#                            and bus test runs on it (cmake/Testing.cmake).
#   CLOUD_NATS_SERVER_BELOW_FLOOR  Debian 12's 2.9.10 (package nats-server): only the fail-closed
#                            test's fixture, a server the amqp plugin must refuse.
# Configure fails when the pinned or the floor binary is missing or reports another version.
set(CLOUD_NATS_SERVER_VERSIONS_FILE ${CMAKE_CURRENT_LIST_DIR}/nats-server.versions)
set_property(DIRECTORY ${CMAKE_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CLOUD_NATS_SERVER_VERSIONS_FILE})
file(STRINGS ${CLOUD_NATS_SERVER_VERSIONS_FILE} _cloud_versions REGEX "^[A-Z_]+=")
foreach(_line IN LISTS _cloud_versions)
  string(REGEX MATCH "^([A-Z_]+)=(.*)$" _ "${_line}")
  set(${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
endforeach()
foreach(_key NATS_SERVER_PINNED NATS_SERVER_FLOOR)
  if(NOT ${_key} MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR "${CLOUD_NATS_SERVER_VERSIONS_FILE}: ${_key} is '${${_key}}', expected X.Y.Z")
  endif()
endforeach()

# The tools folder, found as scripts/install-deps finds it.
if(NOT "$ENV{CLOUD_TOOLS_DIR}" STREQUAL "")
  set(_cloud_tools "$ENV{CLOUD_TOOLS_DIR}")
elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_cloud_tools "$ENV{XDG_CACHE_HOME}/cloud-tools")
else()
  set(_cloud_tools "$ENV{HOME}/.cache/cloud-tools")
endif()
set(CLOUD_TOOLS_DIR "${_cloud_tools}" CACHE PATH
  "where scripts/install-deps puts the nats-server builds (environment CLOUD_TOOLS_DIR)")

# _cloud_nats_server_path(<var> <version> <doc>): a cache variable holding that version's binary in
# the tools folder. A value the user set is kept; a value this file set follows version bumps.
function(_cloud_nats_server_path var version doc)
  set(derived "${CLOUD_TOOLS_DIR}/nats-server-${version}/nats-server")
  if(DEFINED CACHE{${var}} AND NOT "${${var}}" STREQUAL "$CACHE{_${var}_DERIVED}")
    return()  # set by the user (-D): theirs
  endif()
  set(${var} "${derived}" CACHE FILEPATH "${doc}" FORCE)
  set(_${var}_DERIVED "${derived}" CACHE INTERNAL "")
endfunction()

# _cloud_check_nats_server(<var> <expected version>): fails configure unless ${var} names a
# nats-server reporting that version.
function(_cloud_check_nats_server var expected)
  set(remedy "run scripts/install-deps (it installs nats-server ${expected} into ${CLOUD_TOOLS_DIR}), then configure again")
  if(NOT EXISTS "${${var}}")
    message(FATAL_ERROR "${var}: nats-server ${expected} not found at ${${var}}; ${remedy}")
  endif()
  execute_process(COMMAND "${${var}}" --version OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "nats-server: v([^ \n]+)")
    message(FATAL_ERROR "${var}: ${${var}} --version failed (${rc}: ${out}); ${remedy}")
  endif()
  if(NOT CMAKE_MATCH_1 STREQUAL expected)
    message(FATAL_ERROR "${var}: ${${var}} is nats-server ${CMAKE_MATCH_1}, expected ${expected} "
                        "(cmake/nats-server.versions); ${remedy}")
  endif()
endfunction()

_cloud_nats_server_path(CLOUD_NATS_SERVER ${NATS_SERVER_PINNED}
  "the pinned nats-server (${NATS_SERVER_PINNED}): embedded default, shipped in lib/cloud/bin")
_cloud_nats_server_path(CLOUD_NATS_SERVER_FLOOR ${NATS_SERVER_FLOOR}
  "the floor nats-server (${NATS_SERVER_FLOOR}): the tests' .floor twins")
_cloud_check_nats_server(CLOUD_NATS_SERVER ${NATS_SERVER_PINNED})
_cloud_check_nats_server(CLOUD_NATS_SERVER_FLOOR ${NATS_SERVER_FLOOR})
message(STATUS "nats-server ${NATS_SERVER_PINNED} (pinned): ${CLOUD_NATS_SERVER}")
message(STATUS "nats-server ${NATS_SERVER_FLOOR} (floor): ${CLOUD_NATS_SERVER_FLOOR}")

# Debian 12's own nats-server, below the floor: the fail-closed test boots on it and expects a
# refusal. Only that test needs it, so its absence is a warning here and that test's failure.
find_program(CLOUD_NATS_SERVER_BELOW_FLOOR nats-server PATHS /usr/sbin /usr/bin NO_DEFAULT_PATH
  DOC "Debian 12's nats-server 2.9.10: only the fail-closed test's below-the-floor fixture")
if(NOT CLOUD_NATS_SERVER_BELOW_FLOOR)
  message(WARNING "Debian's nats-server (2.9.10) is not installed: tests/failclosed's below-the-floor "
                  "cases will fail; run scripts/install-deps")
  set(CLOUD_NATS_SERVER_BELOW_FLOOR /usr/sbin/nats-server)
endif()
