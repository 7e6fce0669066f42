#pragma once
// The :5672 acceptor. Accepting runs as one coroutine on its own strand; each accepted socket
// is handed over already bound to the executor the server chose for it (the next loop's),
// which becomes its session's.
#include "net.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "log.hpp"

namespace amqp::server {

class listener {
 public:
  using accept_fn = std::function<void(tcp::socket)>;
  using executor_fn = std::function<net::any_io_executor()>;
  using bind_result = std::variant<std::unique_ptr<listener>, std::string>;

  // Binds and listens; a failure is a sentence naming host:port and the remedy.
  static bind_result bind(net::io_context& io, const std::string& host, std::uint16_t port);

  listener(net::io_context& io, tcp::acceptor acceptor);
  // `session_executor` is asked once per connection, before its socket exists.
  void start(executor_fn session_executor, accept_fn on_accept, log_fn log);
  // Any thread; returns once the acceptor is closed (or after a second if the io threads are
  // stuck). Idempotent.
  void stop();
  tcp::endpoint endpoint() const { return endpoint_; }

 private:
  awaitable<void> accept_loop(executor_fn session_executor, accept_fn on_accept, log_fn log);

  net::any_io_executor strand_;
  tcp::acceptor acceptor_;
  tcp::endpoint endpoint_;
};

}  // namespace amqp::server
