#pragma once
// What the host offers a plugin (implemented by the host, one instance per manifest row).
// Host-owned: the reference passed to plugin::mount stays valid until plugin::shutdown returns.
// Every function is noexcept: nothing thrown crosses the boundary.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace cloud::plugin_api {

enum class log_level { info, warning, error };

class host_services {
 public:
  virtual ~host_services() = default;

  // Configuration by environment variable name (e.g. "CLOUD_PUBSUB_PORT"); nullopt when unset.
  // The plugin validates the value and refuses a malformed one naming the variable.
  virtual std::optional<std::string> config(std::string_view variable) const noexcept = 0;

  // One line to the host's log, prefixed with the plugin's name. Any thread.
  virtual void log(log_level level, std::string_view message) noexcept = 0;

  // Offers a value to plugins mounted later (pubsub publishes "url" and "max_payload").
  // Call during mount; the value is stored under this plugin's name.
  // Convention: a capability that launches or dials a server publishes that server's version as
  // "server_version" (pubsub: the nats-server's, e.g. "2.15.2"); /v1/health shows it beside the
  // capability's row.
  virtual void publish(std::string_view key, std::string_view value) noexcept = 0;

  // A value an earlier-mounted plugin published, e.g. lookup("pubsub", "url");
  // nullopt when that capability is not mounted or did not publish the key.
  virtual std::optional<std::string> lookup(std::string_view capability,
                                            std::string_view key) const noexcept = 0;

  // After boot, from any thread: the plugin lost something it needs (e.g. the bus died).
  // /v1/health then lists it as degraded with this reason. The process keeps running.
  virtual void report_degraded(std::string_view reason) noexcept = 0;
  // It has again what it lost: /v1/health no longer lists it as degraded.
  virtual void report_recovered() noexcept = 0;

  // mount must return by this instant; the host aborts boot when it overruns.
  virtual std::chrono::steady_clock::time_point startup_deadline() const noexcept = 0;
};

}  // namespace cloud::plugin_api
