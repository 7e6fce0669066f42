#pragma once
// The `pubsub` capability: launch nats-server with JetStream as a child (or dial the bus
// CLOUD_PUBSUB_URL names) and publish its URL, max payload and server version to later plugins.
// The server launched by default is the pinned one shipped beside the plugins: <the directory
// this library was loaded from>/../bin/nats-server (NATS_SERVER_BIN overrides it).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "child_process.hpp"
#include "config.hpp"
#include "plugin_api/plugin.hpp"
#include "probe.hpp"

namespace cloud::pubsub {

class pubsub_plugin final : public plugin_api::plugin {
 public:
  std::string_view name() const noexcept override { return "pubsub"; }
  plugin_api::status mount(plugin_api::host_services& host) noexcept override;
  void shutdown(std::chrono::milliseconds deadline) noexcept override;

 private:
  plugin_api::status mount_checked(plugin_api::host_services& host);
  plugin_api::status use_external(plugin_api::host_services& host, const config& c);
  plugin_api::status launch(plugin_api::host_services& host, config c);
  // "" once JetStream answers, `info` holding the server's INFO (its version); else why not.
  std::string wait_ready(const config& c, std::chrono::steady_clock::time_point deadline, server_info& info);
  std::string failure(const std::string& what) const;  // `what` plus the child's last output

  std::mutex mutex_;  // mount and shutdown come from different host threads
  std::unique_ptr<child_process> child_;
  std::atomic<bool> mounted_{false};
  plugin_api::host_services* host_ = nullptr;  // host-owned; valid until shutdown returns
};

}  // namespace cloud::pubsub
