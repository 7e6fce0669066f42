#pragma once
// A plain TCP client for what a real AMQP client library will not send: wrong protocol
// headers, oversized frames, silence. Frames are built and read with the project's codec.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "amqp/wire/codec.hpp"

namespace cloud::test {

struct received_frame {
  amqp::wire::frame_type type = amqp::wire::frame_type::heartbeat;
  std::uint16_t channel = 0;
  std::string payload;
  std::optional<amqp::wire::method> method;  // decoded when type == method
  std::chrono::steady_clock::time_point at;
};

class raw_client {
 public:
  explicit raw_client(std::uint16_t port);
  // Wraps a socket someone else owns (e.g. rabbitmq-c's amqp_get_sockfd); not closed here.
  static raw_client borrow(int fd);
  ~raw_client();
  raw_client(raw_client&& other) noexcept;
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  int fd() const { return fd_; }
  void send(std::string_view octets);
  template <class M>
  void send_method(std::uint16_t channel, const M& m) {
    std::string out;
    amqp::wire::encode_method(out, channel, m);
    send(out);
  }
  // Octets as they arrive; nullopt at EOF or when `timeout` passes first (see `eof()`).
  std::optional<std::string> read_some(std::chrono::milliseconds timeout);
  // The next whole frame; nullopt at EOF or timeout.
  std::optional<received_frame> read_frame(std::chrono::milliseconds timeout);
  // The next method frame, skipping heartbeats; nullopt at EOF or timeout.
  std::optional<received_frame> read_method(std::chrono::milliseconds timeout);
  // Discards input until EOF; true when EOF came within `timeout`.
  bool wait_eof(std::chrono::milliseconds timeout);
  bool eof() const { return eof_; }

  // Protocol header, start-ok (PLAIN), tune-ok as given, open; returns the server's tune.
  amqp::wire::connection_tune handshake(std::uint16_t channel_max, std::uint32_t frame_max,
                                        std::uint16_t heartbeat);

 private:
  raw_client() = default;
  int fd_ = -1;
  bool owned_ = true;
  bool eof_ = false;
  std::string buffer_;
};

}  // namespace cloud::test
