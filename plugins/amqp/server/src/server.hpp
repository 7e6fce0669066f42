#pragma once
// The amqp server: one io_context on a small thread pool, the listener, and the live
// sessions. Shutdown is ordered and bounded: stop accepting, close every connection with
// 320 CONNECTION_FORCED, wait briefly for close-ok, drop what remains, stop the threads.
#include "net.hpp"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "listener.hpp"
#include "log.hpp"
#include "registry.hpp"
#include "session.hpp"

namespace amqp::server {

class server {
 public:
  explicit server(log_fn log);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  net::io_context& io() { return io_; }
  // Runs the io_context on `count` threads until stop_threads().
  void run_threads(int count);
  // Binds host:port and starts accepting; nullopt on success, else the sentence.
  std::optional<std::string> listen(const std::string& host, std::uint16_t port,
                                    std::shared_ptr<broker::broker> broker, session_options options);
  tcp::endpoint endpoint() const;
  std::size_t connections() const { return registry_->size(); }

  // Stops accepting and ends every connection by `deadline` (channels are closed either way).
  void close_connections(clock::time_point deadline);
  // Lets queued work finish until `deadline`, then stops the io_context and joins. Idempotent.
  void stop_threads(clock::time_point deadline);

 private:
  void accept(tcp::socket socket);
  void run_one();

  log_fn log_;
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::mutex threads_mutex_;
  std::condition_variable threads_done_;
  int finished_threads_ = 0;

  std::shared_ptr<session_registry> registry_ = std::make_shared<session_registry>();
  std::unique_ptr<listener> listener_;
  std::shared_ptr<broker::broker> broker_;
  session_options options_;
  std::atomic<bool> closing_{false};
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace amqp::server
