#pragma once
// pubsub's configuration (README, 'Configuration'), read through host_services so the plugin never
// touches the environment itself. Each malformed value is refused naming variable and value.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cloud::pubsub {

struct config {
  // Set: dial this bus (possibly a comma-separated cluster list) and launch nothing.
  std::optional<std::string> external_url;
  std::string host = "127.0.0.1";
  std::uint16_t port = 4222;  // 0: pick a free port
  std::filesystem::path store_dir;
  std::uint64_t max_payload = 8 * 1024 * 1024;
  // NATS_SERVER_BIN: a path, or a bare name searched on PATH. Unset: the pinned nats-server
  // shipped beside the plugins (default_server_binary).
  std::optional<std::string> server_bin;
  // CLOUD_PUBSUB_RESTARTS: how many restarts in a row of a launched server that died on its own
  // may fail before pubsub gives up; 0 never restarts it.
  unsigned restarts = 10;
  // CLOUD_PUBSUB_SYNC: "interval" (the server's default: JetStream writes each message to its
  // files at once and forces them to disk every two minutes) or "always" (before every ack).
  bool sync_always = false;
  // CLOUD_PUBSUB_CONFIG: a nats-server configuration file (users, accounts, authorization) the
  // launched server includes; CLOUD_PUBSUB_USER and CLOUD_PUBSUB_PASSWORD: a user of it, which
  // pubsub probes as and hands to later plugins (published "user" and "password").
  std::optional<std::filesystem::path> server_config;
  std::string user;
  std::string password;
};

using lookup_fn = std::function<std::optional<std::string>(std::string_view variable)>;

struct config_result {
  std::optional<config> value;
  std::string error;
};

config_result read_config(const lookup_fn& lookup);

// The default nats-server for a plugin loaded from `plugin_library`: <its directory>/../bin/nats-server
// (build/lib/cloud/plugins/x.so → build/lib/cloud/bin/nats-server; installed, /usr/lib/cloud/bin).
std::filesystem::path default_server_binary(const std::filesystem::path& plugin_library);

// The executable NATS_SERVER_BIN names: as given when it holds a '/', else found on PATH.
std::optional<std::filesystem::path> resolve_binary(const std::string& name,
                                                    const std::optional<std::string>& path_env);

}  // namespace cloud::pubsub
