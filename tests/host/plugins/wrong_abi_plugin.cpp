// Exports the handshake by hand with an ABI version this host does not speak: the host must
// refuse it, naming the file, before importing the factory.
#include <boost/config.hpp>
#include <cstdint>

#include "plugin_api/abi.hpp"

extern "C" BOOST_SYMBOL_EXPORT std::uint32_t cloud_plugin_abi_version() noexcept {
  return cloud::plugin_api::abi_version + 1;
}
extern "C" BOOST_SYMBOL_EXPORT const char* cloud_plugin_build_tag() noexcept {
  return cloud::plugin_api::build_tag;
}
