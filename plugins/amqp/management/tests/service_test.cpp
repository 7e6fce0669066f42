// The listener's answer to a request too large to read: RabbitMQ's 400 naming what was too large,
// then the connection closes; the service keeps serving.
#include <doctest/doctest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "amqp/management/service.hpp"

using namespace amqp::management;
namespace net = boost::asio;

namespace {

// The whole answer to `request`, read until the service closes the connection.
std::string exchange(std::uint16_t port, const std::string& request) {
  net::io_context io;
  net::ip::tcp::socket socket{io};
  socket.connect({net::ip::make_address("127.0.0.1"), port});
  net::write(socket, net::buffer(request));
  std::string answer;
  boost::system::error_code ec;
  net::read(socket, net::dynamic_buffer(answer), ec);  // to the end: eof
  return answer;
}

nlohmann::json body_of(const std::string& answer) { return nlohmann::json::parse(answer.substr(answer.find("\r\n\r\n") + 4)); }

}  // namespace

TEST_CASE("service: a body or a query too large to read is 400 naming it, and the connection closes") {
  net::io_context io;
  auto work = net::make_work_guard(io);
  std::thread loop([&io] { io.run(); });
  {
    service s{io, sources{}};
    REQUIRE_FALSE(s.listen_api("127.0.0.1", 0));
    const auto body = exchange(s.api_port(), "PUT /api/queues/%2F/q HTTP/1.1\r\nHost: x\r\nContent-Length: 200000000\r\n\r\n");
    CHECK(body.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    CHECK(body_of(body) == nlohmann::json{{"error", "bad_request"}, {"reason", "the request body is larger than 96 MiB"}});
    const auto query = exchange(s.api_port(), "GET /api/queues?name=" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(query.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    CHECK(body_of(query)["reason"] == "the request line and headers, the query string with them, are larger than 8 KiB");
    // An empty path is 404 before any sign-in.
    const auto nothing = exchange(s.api_port(), "GET /api/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK(nothing.starts_with("HTTP/1.1 404 Not Found\r\n"));
    CHECK(body_of(nothing) == nlohmann::json{{"error", "Object Not Found"}, {"reason", "Not Found"}});
    s.stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  work.reset();
  loop.join();
}
