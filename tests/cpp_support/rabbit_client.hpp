#pragma once
// rabbit_connection: rabbitmq-c (librabbitmq, a stock AMQP client) connected to a port, with
// the few helpers the integration tests share.
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cloud::test {

class rabbit_connection {
 public:
  explicit rabbit_connection(std::uint16_t port);
  ~rabbit_connection();
  rabbit_connection(const rabbit_connection&) = delete;
  rabbit_connection& operator=(const rabbit_connection&) = delete;

  amqp_connection_state_t get() const { return conn_; }
  int fd() const { return amqp_get_sockfd(conn_); }
  // PLAIN guest/guest on vhost "/".
  amqp_rpc_reply_t login(int channel_max = 0, int frame_max = 131072, int heartbeat = 0);

 private:
  amqp_connection_state_t conn_ = nullptr;
};

// What the server closed with: the connection.close or channel.close a reply carries.
struct server_close {
  bool connection = false;  // connection.close (else channel.close)
  std::uint16_t code = 0;
  std::string text;
  std::uint16_t class_id = 0;
  std::uint16_t method_id = 0;
};
std::optional<server_close> close_of(const amqp_rpc_reply_t& reply);
// The same, from a method frame rabbitmq-c handed over (amqp_simple_wait_frame).
std::optional<server_close> close_of(const amqp_method_t& method);

std::string to_string(amqp_bytes_t bytes);
// A view of `s` as rabbitmq-c's bytes (s must outlive the call it is passed to).
amqp_bytes_t bytes_of(const std::string& s);

// The next method frame the server sends on `channel` (or a connection.close on channel 0),
// read without the library's RPC matching: for answers to methods sent with
// amqp_send_method (nowait variants, publishes under confirms). Content and heartbeat frames
// are skipped. nullopt when nothing came within `timeout` or the socket failed. The decoded
// method lives until the connection's buffers are released (the next library call).
std::optional<amqp_method_t> next_method(amqp_connection_state_t conn, amqp_channel_t channel,
                                         std::chrono::milliseconds timeout);
// Answers the server's channel.close, as a client must before reusing the channel number.
void send_channel_close_ok(amqp_connection_state_t conn, amqp_channel_t channel);

}  // namespace cloud::test
