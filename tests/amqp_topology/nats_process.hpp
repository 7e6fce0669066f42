#pragma once
// A real nats-server for one test: its own store directory, a kernel-chosen port (read back
// from the server's ports file, so no port is guessed), stopped by its PID.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

namespace topology_test {

// A private temporary directory, removed with everything in it.
class temp_dir {
 public:
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "amqp-topology-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class nats_process {
 public:
  explicit nats_process(std::filesystem::path store) : store_(std::move(store)) { start(); }
  ~nats_process() { stop(); }
  nats_process(const nats_process&) = delete;
  nats_process& operator=(const nats_process&) = delete;

  const std::string& url() const { return url_; }

  // Stops and starts again on the same store (a restart; the port may change).
  void restart() {
    stop();
    start();
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  void start() {
    auto ports_dir = store_ / "ports";
    std::filesystem::create_directories(ports_dir);
    for (auto& f : std::filesystem::directory_iterator(ports_dir)) std::filesystem::remove(f.path());
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      const std::string sd = (store_ / "js").string();
      const std::string pd = ports_dir.string();
      ::execl(NATS_SERVER_EXECUTABLE, "nats-server", "-js", "-a", "127.0.0.1", "-p", "-1", "-sd",
              sd.c_str(), "--ports_file_dir", pd.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    const auto ports_file = ports_dir / ("nats-server_" + std::to_string(pid_) + ".ports");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::filesystem::exists(ports_file)) {
        std::ifstream in(ports_file);
        auto doc = nlohmann::json::parse(in, nullptr, false);
        if (doc.is_object() && doc.contains("nats") && !doc["nats"].empty()) {
          url_ = doc["nats"][0].get<std::string>();
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
    throw std::runtime_error("nats-server did not write its ports file within 20 s");
  }

  std::filesystem::path store_;
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace topology_test
