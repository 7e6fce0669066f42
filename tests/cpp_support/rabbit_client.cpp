#include "rabbit_client.hpp"

#include <stdexcept>
#include <sys/time.h>

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

amqp_bytes_t bytes_of(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

std::optional<amqp_method_t> next_method(amqp_connection_state_t conn, amqp_channel_t channel,
                                         std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    timeval tv{static_cast<time_t>(left.count() / 1000000), static_cast<suseconds_t>(left.count() % 1000000)};
    amqp_frame_t frame{};
    if (amqp_simple_wait_frame_noblock(conn, &frame, &tv) != AMQP_STATUS_OK) return std::nullopt;
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    if (frame.channel == channel || frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
      return frame.payload.method;
    }
  }
}

void send_channel_close_ok(amqp_connection_state_t conn, amqp_channel_t channel) {
  amqp_channel_close_ok_t ok{};
  amqp_send_method(conn, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
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
