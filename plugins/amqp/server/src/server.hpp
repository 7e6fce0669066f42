#pragma once
// The amqp server: one io_context per io thread (a loop), the listener, and the live sessions.
// Connections are dealt to the loops in turn and live on theirs from accept to close, so a
// connection's frames, channels and bus completions never hop threads, and its loop's single
// thread serialises them without a strand. (One context shared by two threads woke the idle
// one for every post, to find the connection's strand busy: 10–25% more CPU per consumed
// message, bench/BENCHMARKS.md.) Shutdown is ordered and bounded: stop accepting, close every
// connection with 320 CONNECTION_FORCED, wait briefly for close-ok, drop what remains, stop
// the threads.
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
#include "vhosts.hpp"

namespace amqp::server {

class server {
 public:
  // `loops` io_contexts, each to be run by one thread (run_threads).
  server(log_fn log, int loops);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // The first loop: the listener's, and the broker's own work.
  net::io_context& io() { return *loops_.front(); }
  // Runs each loop on a thread of its own until stop_threads().
  void run_threads();
  // What every accepted connection is served with; before either listener.
  void serve(std::shared_ptr<const vhost_map> vhosts, session_options options);
  // Binds host:port and starts accepting; nullopt on success, else the sentence.
  std::optional<std::string> listen(const std::string& host, std::uint16_t port);
  // The amqps listener: the same sessions, each behind a TLS handshake.
  std::optional<std::string> listen_tls(const std::string& host, std::uint16_t port,
                                        std::shared_ptr<ssl::context> tls);
  tcp::endpoint endpoint() const;
  tcp::endpoint tls_endpoint() const;
  std::size_t connections() const { return registry_->size(); }
  // How many connections (past connection.open) and channels were opened or ended: `e`'s count.
  std::uint64_t counted(session_registry::event e) const { return registry_->count_of(e); }
  // What every live connection is, for an operator; any thread.
  std::vector<session_summary> summaries() const;

  // Stops accepting and ends every connection by `deadline` (channels are closed either way).
  void close_connections(clock::time_point deadline);
  // Drops the server's hold on the vhosts' buses and brokers and on the users' clients, so that
  // the plugin can close and release them while the loops still run what they post.
  void let_go_of_vhosts();
  // Lets queued work finish until `deadline`, then stops the loops and joins. Idempotent.
  void stop_threads(clock::time_point deadline);

 private:
  void accept(connection_stream stream);
  void run_one(net::io_context& loop);
  net::io_context& next_loop();

  using work_guard = net::executor_work_guard<net::io_context::executor_type>;
  log_fn log_;
  std::vector<std::unique_ptr<net::io_context>> loops_;
  std::vector<work_guard> work_;
  std::atomic<std::size_t> next_loop_{0};
  std::vector<std::thread> threads_;
  std::mutex threads_mutex_;
  std::condition_variable threads_done_;
  int finished_threads_ = 0;

  std::shared_ptr<session_registry> registry_ = std::make_shared<session_registry>();
  std::unique_ptr<listener> listener_;
  std::unique_ptr<listener> tls_listener_;
  std::shared_ptr<ssl::context> tls_;
  std::mutex accept_mutex_;  // vhosts_ and options_: read by accept, dropped by let_go_of_vhosts
  std::shared_ptr<const vhost_map> vhosts_;
  session_options options_;
  std::atomic<bool> closing_{false};
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace amqp::server
