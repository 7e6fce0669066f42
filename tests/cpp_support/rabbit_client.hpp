#pragma once
// rabbit_connection: rabbitmq-c (librabbitmq, a stock AMQP client) connected to a port, with
// the few helpers the integration tests share.
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>

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

}  // namespace cloud::test
