# Every library comes from Debian 12 (see scripts/install-deps); nats-server is this project's
# own pinned build (cmake/NatsServer.cmake).
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem system)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(doctest REQUIRED)
find_package(OpenSSL 3 REQUIRED)      # libssl-dev: libcrypto's digests
# Debian's cnats-config.cmake names a static library the package does not ship, so
# libnats is found through pkg-config instead: target PkgConfig::nats.
find_package(PkgConfig REQUIRED)
pkg_check_modules(nats REQUIRED IMPORTED_TARGET libnats>=3.4)
find_package(rabbitmq-c REQUIRED)     # librabbitmq-dev 0.11: tests and benchmarks only

include(NatsServer)

# Asio and Beast are header-only; one interface target carries their settings.
add_library(cloud_asio INTERFACE)
target_link_libraries(cloud_asio INTERFACE Boost::boost Boost::system Threads::Threads)
target_compile_definitions(cloud_asio INTERFACE BOOST_ASIO_NO_DEPRECATED BOOST_BEAST_USE_STD_STRING_VIEW)
