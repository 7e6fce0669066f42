#include "raw_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace cloud::test {

namespace wire = amqp::wire;
using clock = std::chrono::steady_clock;

raw_client::raw_client(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + " failed: " + why);
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

raw_client raw_client::borrow(int fd) {
  raw_client c;
  c.fd_ = fd;
  c.owned_ = false;
  return c;
}

raw_client::raw_client(raw_client&& other) noexcept
    : fd_(other.fd_), owned_(other.owned_), eof_(other.eof_), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

raw_client::~raw_client() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

void raw_client::send(std::string_view octets) {
  while (!octets.empty()) {
    const auto n = ::send(fd_, octets.data(), octets.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("send failed: ") + std::strerror(errno));
    }
    octets.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::optional<std::string> raw_client::read_some(std::chrono::milliseconds timeout) {
  if (eof_) return std::nullopt;
  pollfd p{fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return std::nullopt;
  char chunk[65536];
  const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
  if (n <= 0) {
    eof_ = true;  // EOF, or a reset: either way the server is gone
    return std::nullopt;
  }
  return std::string(chunk, static_cast<std::size_t>(n));
}

std::optional<received_frame> raw_client::read_frame(std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    std::span<const std::uint8_t> data(reinterpret_cast<const std::uint8_t*>(buffer_.data()), buffer_.size());
    auto parsed = wire::parse_frame(data, 1u << 24);
    if (parsed.state == wire::parse_result::status::malformed) {
      throw std::runtime_error("the server sent a malformed frame: " + parsed.error.text);
    }
    if (parsed.state == wire::parse_result::status::complete) {
      received_frame f;
      f.type = parsed.frame.type;
      f.channel = parsed.frame.channel;
      f.payload.assign(reinterpret_cast<const char*>(parsed.frame.payload.data()), parsed.frame.payload.size());
      f.at = clock::now();
      if (f.type == wire::frame_type::method) {
        auto m = wire::decode_method(parsed.frame.payload);
        if (!m) throw std::runtime_error("the server sent an undecodable method: " + m.error().text);
        f.method = std::move(*m);
      }
      buffer_.erase(0, parsed.consumed);
      return f;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return std::nullopt;
    auto more = read_some(left);
    if (!more) {
      if (eof_ || clock::now() >= deadline) return std::nullopt;
      continue;
    }
    buffer_ += *more;
  }
}

std::optional<received_frame> raw_client::read_method(std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    auto f = read_frame(std::max(left, std::chrono::milliseconds(0)));
    if (!f || f->type == wire::frame_type::method) return f;
  }
}

bool raw_client::wait_eof(std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  while (!eof_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) return false;
    read_some(left);
  }
  return true;
}

wire::connection_tune raw_client::handshake(std::uint16_t channel_max, std::uint32_t frame_max,
                                            std::uint16_t heartbeat) {
  using namespace std::chrono_literals;
  send(std::string_view(reinterpret_cast<const char*>(wire::protocol_header.data()), wire::protocol_header.size()));
  auto start = read_method(10s);
  if (!start || !std::holds_alternative<wire::connection_start>(*start->method)) {
    throw std::runtime_error("no connection.start");
  }
  wire::connection_start_ok start_ok;
  start_ok.mechanism = std::string("PLAIN");
  start_ok.response = std::string("\0guest\0guest", 12);
  start_ok.locale = std::string("en_US");
  send_method(0, start_ok);
  auto tune = read_method(10s);
  if (!tune || !std::holds_alternative<wire::connection_tune>(*tune->method)) {
    throw std::runtime_error("no connection.tune");
  }
  wire::connection_tune_ok tune_ok;
  tune_ok.channel_max = channel_max;
  tune_ok.frame_max = frame_max;
  tune_ok.heartbeat = heartbeat;
  send_method(0, tune_ok);
  wire::connection_open open;
  open.virtual_host = std::string("/");
  send_method(0, open);
  return std::get<wire::connection_tune>(*tune->method);
}

}  // namespace cloud::test
