#pragma once
// A real nats-server for one test (CLOUD_TEST_NATS_SERVER, default the pinned one): port chosen
// by the server (-p -1, read back from its ports file), its own store directory, stopped by PID
// when the object goes.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "amqp/bus/client.hpp"

namespace amqp::bus::test {

class nats_server {
 public:
  explicit nats_server(bool jetstream = true);
  ~nats_server();
  nats_server(const nats_server&) = delete;
  nats_server& operator=(const nats_server&) = delete;

  const std::string& url() const { return url_; }
  // A raw JetStream API request (test-side inspection and sabotage), with a fresh connection.
  nlohmann::json api(const std::string& api_subject, const nlohmann::json& body = nullptr) const;

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::string url_;
};

client_options options_for(const std::string& url, std::chrono::milliseconds budget = std::chrono::seconds(10));
// A loopback port on which nothing listens (bound, then released).
int dead_port();

}  // namespace amqp::bus::test
