#pragma once
// The `pubsub` capability: launch nats-server with JetStream as a child (or dial the bus
// CLOUD_PUBSUB_URL names) and publish its URL, max payload and server version to later plugins.
// A launched server that dies on its own is started again on the same port and store, so the
// bus's clients reconnect to what they knew; /v1/health says degraded only until it is back.
// The server launched by default is the pinned one shipped beside the plugins: <the directory
// this library was loaded from>/../bin/nats-server (NATS_SERVER_BIN overrides it).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
  // "" once the child runs and JetStream answers by `deadline`, `info` holding the server's INFO
  // (its version); else why not, with the child stopped. `window` names the deadline and its
  // remedy for that message.
  std::string start_child(std::chrono::steady_clock::time_point deadline, const std::string& window, server_info& info);
  std::string wait_ready(std::chrono::steady_clock::time_point deadline, const std::string& window, server_info& info);
  std::string failure(const std::string& what) const;  // `what` plus the child's last output

  // Restarts (on their own thread): the child's exit wakes it; it retries with a pause that
  // doubles, CLOUD_PUBSUB_RESTARTS times in a row at most.
  void on_child_exit(const std::string& how);
  void restart_loop();
  void restart(const std::string& how);
  bool pause_before_restart(std::chrono::milliseconds pause);  // false: shutting down

  struct launch_spec {
    config c;
    std::filesystem::path binary;
    std::vector<std::string> args;
  };

  std::mutex mutex_;  // mount, shutdown and the restarter, for child_ and spec_
  std::unique_ptr<child_process> child_;
  std::optional<launch_spec> spec_;
  std::atomic<bool> mounted_{false};
  plugin_api::host_services* host_ = nullptr;  // host-owned; valid until shutdown returns

  std::thread restarter_;
  std::mutex restart_mutex_;  // for died_ and the restarter's waits
  std::condition_variable restart_wake_;
  std::optional<std::string> died_;  // how the child exited, until the restarter takes it
  std::atomic<bool> stopping_{false};
};

}  // namespace cloud::pubsub
