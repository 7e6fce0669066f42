#pragma once
// The host <-> plugin handshake. The host reads both exported C symbols of a library before
// importing its factory and refuses the library on any mismatch.
//
// Policy: any edit to a header in plugin_api/include bumps abi_version and re-records
// abi_headers_hash (plugin_api/tests/abi_hash_test.cpp prints the new value).
#include <boost/version.hpp>
#include <cstdint>

namespace cloud::plugin_api {

inline constexpr std::uint32_t abi_version = 3;
// FNV-1a 64 of the plugin_api headers, this line excluded (see abi_hash_test.cpp).
inline constexpr std::uint64_t abi_headers_hash = 0x1fee3d05cf1195edULL;

#define CLOUD_PLUGIN_API_STR2(x) #x
#define CLOUD_PLUGIN_API_STR(x) CLOUD_PLUGIN_API_STR2(x)

#if defined(__clang__)
#define CLOUD_PLUGIN_API_COMPILER "clang-" __clang_version__
#elif defined(__GNUC__)
#define CLOUD_PLUGIN_API_COMPILER "gcc-" __VERSION__
#else
#define CLOUD_PLUGIN_API_COMPILER "unknown-compiler"
#endif

// Sanitized and plain builds do not mix (different allocators and layouts), so say which.
#if defined(__SANITIZE_ADDRESS__)
#define CLOUD_PLUGIN_API_SANITIZE " asan"
#else
#define CLOUD_PLUGIN_API_SANITIZE ""
#endif

// C++ class ABI holds only for the same compiler, standard library ABI and Boost version.
inline constexpr char build_tag[] = CLOUD_PLUGIN_API_COMPILER
    " boost-" BOOST_LIB_VERSION " cxx11abi-" CLOUD_PLUGIN_API_STR(_GLIBCXX_USE_CXX11_ABI)
        CLOUD_PLUGIN_API_SANITIZE;

// Names of the exported symbols.
inline constexpr char abi_version_symbol[] = "cloud_plugin_abi_version";
inline constexpr char build_tag_symbol[] = "cloud_plugin_build_tag";
inline constexpr char factory_symbol[] = "cloud_create_plugin";

}  // namespace cloud::plugin_api
