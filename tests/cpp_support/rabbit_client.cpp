#include "rabbit_client.hpp"

#include <stdexcept>

namespace cloud::test {

rabbit_connection::rabbit_connection(std::uint16_t port) : conn_(amqp_new_connection()) {
  amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
  if (!socket) throw std::runtime_error("amqp_tcp_socket_new failed");
  const int rc = amqp_socket_open(socket, "127.0.0.1", port);
  if (rc != AMQP_STATUS_OK) {
    amqp_destroy_connection(conn_);
    throw std::runtime_error(std::string("amqp_socket_open failed: ") + amqp_error_string2(rc));
  }
}

rabbit_connection::~rabbit_connection() { amqp_destroy_connection(conn_); }

amqp_rpc_reply_t rabbit_connection::login(int channel_max, int frame_max, int heartbeat) {
  return amqp_login(conn_, "/", channel_max, frame_max, heartbeat, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
}

std::string to_string(amqp_bytes_t bytes) {
  return bytes.len ? std::string(static_cast<const char*>(bytes.bytes), bytes.len) : std::string();
}

std::optional<server_close> close_of(const amqp_method_t& method) {
  if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    const auto* m = static_cast<const amqp_connection_close_t*>(method.decoded);
    return server_close{true, m->reply_code, to_string(m->reply_text), m->class_id, m->method_id};
  }
  if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    const auto* m = static_cast<const amqp_channel_close_t*>(method.decoded);
    return server_close{false, m->reply_code, to_string(m->reply_text), m->class_id, m->method_id};
  }
  return std::nullopt;
}

std::optional<server_close> close_of(const amqp_rpc_reply_t& reply) {
  if (reply.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION) return std::nullopt;
  return close_of(reply.reply);
}

}  // namespace cloud::test
