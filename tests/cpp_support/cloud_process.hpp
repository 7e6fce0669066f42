#pragma once
// Starts the real `cloud` binary of this build for one integration test: free ports, its own
// temporary data directory, output captured to a log file; stopped and cleaned up by PID.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace cloud::test {

// A port nobody listens on right now (the kernel's pick for a bind to port 0).
std::uint16_t free_port();

class cloud_process {
 public:
  // `env` overrides or adds variables (e.g. CLOUD_AMQP_HANDSHAKE_TIMEOUT). Returns once the
  // amqp listener is up; throws std::runtime_error carrying the log if boot fails.
  explicit cloud_process(std::map<std::string, std::string> env = {},
                         std::chrono::seconds ready_timeout = std::chrono::seconds(90));
  ~cloud_process();
  cloud_process(const cloud_process&) = delete;
  cloud_process& operator=(const cloud_process&) = delete;

  std::uint16_t amqp_port() const { return amqp_port_; }
  // The bus this process uses: its embedded nats-server's URL, or the CLOUD_PUBSUB_URL it was
  // given. A second replica is a cloud_process with {"CLOUD_PUBSUB_URL", first.pubsub_url()}.
  const std::string& pubsub_url() const { return pubsub_url_; }
  const std::filesystem::path& data_dir() const { return dir_; }
  pid_t pid() const { return pid_; }
  // Everything the process wrote so far.
  std::string log() const;

  // SIGTERM, then wait up to `grace` (then SIGKILL to its process group). Returns the exit
  // status, or 128 + signal when a signal ended it. Idempotent.
  int stop(std::chrono::seconds grace = std::chrono::seconds(30));

 private:
  bool wait_exit(std::chrono::milliseconds timeout);
  void wait_ready(std::chrono::seconds timeout);
  void check_server_version(const std::string& log_text) const;

  std::filesystem::path dir_;
  std::filesystem::path log_path_;
  pid_t pid_ = -1;
  int status_ = -1;
  std::uint16_t amqp_port_ = 0;
  std::string pubsub_url_;
};

}  // namespace cloud::test
