#pragma once
// Blocking probes of a NATS server over its client protocol (no nats.c: that library belongs
// to plugins/amqp/bus). Each is bounded by `timeout`; "" means success.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cloud::pubsub {

struct server_info {
  std::uint64_t max_payload = 0;
  bool jetstream = false;
  std::string version;  // the INFO line's "version", e.g. "2.15.2"; "" when it has none
};

struct info_result {
  std::optional<server_info> info;
  std::string error;
};

// Connects and reads the server's INFO line.
info_result probe_info(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);

// Connects (as `user`, when one is given) and asks JetStream for account info ($JS.API.INFO):
// succeeds once JetStream answers. `info`, when given, receives what the server's INFO line said.
std::string probe_jetstream(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout,
                            server_info* info = nullptr, const std::string& user = {},
                            const std::string& password = {});

// The value of string field `key` in the JSON object `json` (an INFO line's), unescaped only as far
// as a version or a name needs (no \u sequences); "" when absent or not a string.
std::string json_string(const std::string& json, const std::string& key);

// host:port of "nats://[user:pass@]host:port" (default port 4222); nullopt when malformed.
std::optional<std::pair<std::string, std::uint16_t>> split_url(const std::string& url);
// A URL (or comma-separated list) as a log may show it: a password or token in it becomes "***".
std::string redacted(const std::string& urls);

// Binds host:port and releases it: "" when the port is free, else why not (e.g. in use).
std::string claim_port(const std::string& host, std::uint16_t port);
// A port the kernel considers free on `host`, or 0 with `error` set.
std::uint16_t pick_free_port(const std::string& host, std::string& error);

}  // namespace cloud::pubsub
