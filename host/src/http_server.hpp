#pragma once
// Beast HTTP/1.1 on one io_context thread: health routes and lazy mounting (routes.hpp).
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <string>

#include "application.hpp"

namespace cloud::host {

class http_server {
 public:
  http_server(boost::asio::io_context& io, application& app);

  // Binds and starts accepting; "" on success, otherwise the reason naming the address.
  std::string listen(const std::string& host, std::uint16_t port);
  std::uint16_t port() const;
  // Stops accepting; sessions end with the io_context.
  void stop();

 private:
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> session(boost::asio::ip::tcp::socket socket);
  boost::asio::awaitable<void> ensure_mounted(std::size_t row);

  boost::asio::io_context& io_;
  application& app_;
  boost::asio::ip::tcp::acceptor acceptor_;
};

}  // namespace cloud::host
