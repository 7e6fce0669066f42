#pragma once
// Used once by each plugin, in one .cpp at namespace scope: CLOUD_PLUGIN(my_plugin_type)
// Exports the factory (BOOST_DLL_ALIAS `cloud_create_plugin`) and the two handshake symbols.
// Plugins build with -fvisibility=hidden, so these three are all a library exports.
#include <boost/dll/alias.hpp>
#include <cstdint>
#include <memory>
#include <new>

#include "plugin_api/abi.hpp"
#include "plugin_api/plugin.hpp"

#define CLOUD_PLUGIN(Type)                                                                   \
  namespace cloud_plugin_export {                                                          \
  inline std::unique_ptr<::cloud::plugin_api::plugin> create() {                           \
    try {                                                                                  \
      return std::make_unique<Type>();                                                     \
    } catch (...) {                                                                        \
      return nullptr; /* no exception crosses the boundary */                              \
    }                                                                                      \
  }                                                                                        \
  }                                                                                        \
  BOOST_DLL_ALIAS(cloud_plugin_export::create, cloud_create_plugin)                        \
  extern "C" BOOST_SYMBOL_EXPORT std::uint32_t cloud_plugin_abi_version() noexcept {       \
    return ::cloud::plugin_api::abi_version;                                               \
  }                                                                                        \
  extern "C" BOOST_SYMBOL_EXPORT const char* cloud_plugin_build_tag() noexcept {           \
    return ::cloud::plugin_api::build_tag;                                                 \
  }
