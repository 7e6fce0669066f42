#include "listener.hpp"

#include <future>

namespace amqp::server {

listener::bind_result listener::bind(net::io_context& io, const std::string& host, std::uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return "listen on " + where + ": CLOUD_AMQP_HOST='" + host + "' is not an IP address";
  const tcp::endpoint endpoint{address, port};
  tcp::acceptor acceptor(io);
  auto fail = [&](const char* step) {
    return "listen on " + where + ": " + step + " failed: " + ec.message() +
           "; set CLOUD_AMQP_PORT (or CLOUD_AMQP_HOST) to a free address, or stop what holds it";
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) return fail("SO_REUSEADDR");
  acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  return std::make_unique<listener>(io, std::move(acceptor));
}

listener::listener(net::io_context& io, tcp::acceptor acceptor)
    : strand_(net::make_strand(io)), acceptor_(std::move(acceptor)) {
  error_code ec;
  endpoint_ = acceptor_.local_endpoint(ec);
}

void listener::start(executor_fn session_executor, accept_fn on_accept, log_fn log) {
  auto loop = accept_loop(std::move(session_executor), std::move(on_accept), log);
  net::co_spawn(strand_, std::move(loop), [log](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      log(log_level::error, std::string("the amqp listener stopped accepting: ") + x.what());
    }
  });
}

awaitable<void> listener::accept_loop(executor_fn session_executor, accept_fn on_accept, log_fn log) {
  net::steady_timer pause(strand_);
  for (;;) {
    error_code ec;
    // The socket is born on its session's executor, so the session never shares one.
    tcp::socket socket = co_await acceptor_.async_accept(session_executor(), with_ec(ec));
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) {
      // Out of descriptors or memory: say so, and do not spin on the failure.
      log(log_level::warning, "accepting an amqp connection failed: " + ec.message());
      pause.expires_after(std::chrono::milliseconds(100));
      co_await pause.async_wait(with_ec(ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // AMQP is request/response: no Nagle delay
    on_accept(std::move(socket));
  }
}

void listener::stop() {
  auto closed = std::make_shared<std::promise<void>>();
  auto done = closed->get_future();
  net::post(strand_, [this, closed] {
    error_code ignored;
    acceptor_.close(ignored);
    closed->set_value();
  });
  done.wait_for(std::chrono::seconds(1));
}

}  // namespace amqp::server
