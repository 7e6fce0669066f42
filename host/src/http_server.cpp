#include "http_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <exception>
#include <memory>

#include "log.hpp"
#include "routes.hpp"

namespace cloud::host {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::redirect_error;
using net::use_awaitable;

// A client that sends nothing for this long loses its connection.
constexpr std::chrono::seconds idle_timeout{30};

// Every coroutine ends here; an exception is a bug, logged rather than lost.
void log_failure(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log_line("cloud", std::string{"http: session failed: "} + ex.what());
  } catch (...) {
    log_line("cloud", "http: session failed");
  }
}

http::response<http::string_body> make_response(const http_reply& reply, unsigned version,
                                                bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(reply.status), version};
  res.set(http::field::server, "cloud");
  res.set(http::field::content_type, "application/json");
  if (reply.status == 405) res.set(http::field::allow, "GET");
  res.keep_alive(keep_alive);
  res.body() = reply.body + "\n";
  res.prepare_payload();
  return res;
}

}  // namespace

http_server::http_server(net::io_context& io, application& app) : io_{io}, app_{app}, acceptor_{io} {}

std::string http_server::listen(const std::string& host, std::uint16_t port) {
  const auto where = host + ":" + std::to_string(port);
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return "CLOUD_HTTP_HOST=\"" + host + "\" is not an IP address; use e.g. 127.0.0.1";
  const tcp::endpoint endpoint{address, port};
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.close();
    return "http: cannot listen on " + where + ": " + ec.message() +
           "; free the port or set CLOUD_HTTP_PORT";
  }
  net::co_spawn(io_, accept_loop(), log_failure);
  return {};
}

std::uint16_t http_server::port() const {
  beast::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}

void http_server::stop() {
  beast::error_code ec;
  acceptor_.close(ec);
}

net::awaitable<void> http_server::accept_loop() {
  for (;;) {
    beast::error_code ec;
    auto socket = co_await acceptor_.async_accept(redirect_error(use_awaitable, ec));
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) co_return;
    if (ec) continue;  // e.g. EMFILE: the next accept may succeed
    net::co_spawn(io_, session(std::move(socket)), log_failure);
  }
}

net::awaitable<void> http_server::ensure_mounted(std::size_t row) {
  // A timer that never expires doubles as an event: the mount thread cancels it.
  auto done = std::make_shared<net::steady_timer>(io_, net::steady_timer::time_point::max());
  app_.mount_lazy(row, [done, &io = io_](std::string) {
    net::post(io, [done] { done->cancel(); });
  });
  beast::error_code ec;
  co_await done->async_wait(redirect_error(use_awaitable, ec));
}

net::awaitable<void> http_server::session(tcp::socket socket) {
  beast::tcp_stream stream{std::move(socket)};
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> request;
    beast::error_code ec;
    stream.expires_after(idle_timeout);
    co_await http::async_read(stream, buffer, request, redirect_error(use_awaitable, ec));
    if (ec) break;
    if (request.method() == http::verb::get) {
      if (const auto lazy = lazy_row_for(app_, request.target())) co_await ensure_mounted(*lazy);
    }
    const auto reply = answer(app_, request.method_string(), request.target());
    auto response = make_response(reply, request.version(), request.keep_alive());
    stream.expires_after(idle_timeout);
    co_await http::async_write(stream, response, redirect_error(use_awaitable, ec));
    if (ec || !request.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

}  // namespace cloud::host
