#pragma once
// The interface a plugin implements (plugin-owned object, created by the exported factory).
// The host keeps the plugin's library loaded for as long as the object lives, and destroys
// the object before unloading the library.
#include <boost/config.hpp>
#include <chrono>
#include <memory>
#include <string_view>

#include "plugin_api/host_services.hpp"
#include "plugin_api/status.hpp"

namespace cloud::plugin_api {

class BOOST_SYMBOL_VISIBLE plugin {
 public:
  virtual ~plugin() = default;

  // The capability name; equals the manifest row's name. Static storage.
  virtual std::string_view name() const noexcept = 0;

  // Brings the capability up. Runs on a host thread of its own; must respect
  // host.startup_deadline(). On error, the plugin has released whatever it acquired.
  virtual status mount(host_services& host) noexcept = 0;

  // Releases everything within `deadline`. Idempotent; called after a failed or partial
  // mount too, and in reverse manifest order.
  virtual void shutdown(std::chrono::milliseconds deadline) noexcept = 0;
};

// The exported factory's signature (alias `cloud_create_plugin`). Returns null on failure.
using plugin_factory = std::unique_ptr<plugin>();

}  // namespace cloud::plugin_api
