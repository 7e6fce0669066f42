// Throughput of one AMQP 0-9-1 broker, measured the way a RabbitMQ client application sees it:
//   --mode publish: persistent messages to a durable queue through the default exchange, with
//                   publisher confirms and at most --window unconfirmed; timed to the last confirm.
//   --mode consume: basic.consume with prefetch --prefetch, basic.ack for each message; timed
//                   from consume-ok to the last ack; the queue is deleted afterwards.
// Prints bench::report's line; any failure is a message on stderr and exit status 1.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/options.hpp"

namespace {

using connection = std::unique_ptr<amqp_connection_state_t_, void (*)(amqp_connection_state_t)>;

constexpr amqp_channel_t channel = 1;

void destroy(amqp_connection_state_t c) {
  amqp_connection_close(c, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(c);
}

std::string describe(const amqp_rpc_reply_t& r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL: return "ok";
    case AMQP_RESPONSE_NONE: return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION: return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION: break;
  }
  if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
    return "channel closed " + std::to_string(m->reply_code) + " " +
           std::string(static_cast<char*>(m->reply_text.bytes), m->reply_text.len);
  }
  if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* m = static_cast<amqp_connection_close_t*>(r.reply.decoded);
    return "connection closed " + std::to_string(m->reply_code) + " " +
           std::string(static_cast<char*>(m->reply_text.bytes), m->reply_text.len);
  }
  return "server method " + std::to_string(r.reply.id);
}

void expect_ok(amqp_connection_state_t c, const char* what) {
  auto r = amqp_get_rpc_reply(c);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error(std::string(what) + ": " + describe(r));
}

connection open(const std::string& host, int port) {
  connection c(amqp_new_connection(), destroy);
  amqp_socket_t* socket = amqp_tcp_socket_new(c.get());
  if (!socket) throw std::runtime_error("cannot create a TCP socket");
  timeval timeout{10, 0};
  if (int s = amqp_socket_open_noblock(socket, host.c_str(), port, &timeout); s != AMQP_STATUS_OK) {
    throw std::runtime_error("connect to " + host + ":" + std::to_string(port) + ": " + amqp_error_string2(s));
  }
  auto login = amqp_login(c.get(), "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
  if (login.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error("login: " + describe(login));
  amqp_channel_open(c.get(), channel);
  expect_ok(c.get(), "channel.open");
  return c;
}

void declare(amqp_connection_state_t c, const std::string& queue) {
  amqp_queue_declare(c, channel, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0, amqp_empty_table);
  expect_ok(c, "queue.declare");
}

// Confirms arrive as basic.ack/nack, possibly `multiple`; each tag is counted once.
class confirm_tracker {
 public:
  explicit confirm_tracker(std::uint64_t n) : acked_(n + 1, false) {}
  void settle(std::uint64_t tag, bool multiple) {
    if (tag >= acked_.size()) throw std::runtime_error("confirm for unknown tag " + std::to_string(tag));
    for (std::uint64_t t = multiple ? low_ : tag; t <= tag; ++t) {
      if (!acked_[t]) ++confirmed_;
      acked_[t] = true;
    }
    while (low_ < acked_.size() && acked_[low_]) ++low_;
  }
  std::uint64_t confirmed() const { return confirmed_; }

 private:
  std::vector<bool> acked_;
  std::uint64_t low_ = 1;
  std::uint64_t confirmed_ = 0;
};

void await_confirm(amqp_connection_state_t c, confirm_tracker& confirms) {
  amqp_frame_t frame;
  if (int s = amqp_simple_wait_frame(c, &frame); s != AMQP_STATUS_OK) {
    throw std::runtime_error(std::string("waiting for confirms: ") + amqp_error_string2(s));
  }
  if (frame.frame_type != AMQP_FRAME_METHOD) return;
  const auto& m = frame.payload.method;
  if (m.id == AMQP_BASIC_ACK_METHOD) {
    auto* ack = static_cast<amqp_basic_ack_t*>(m.decoded);
    confirms.settle(ack->delivery_tag, ack->multiple != 0);
  } else if (m.id == AMQP_BASIC_NACK_METHOD) {
    auto* nack = static_cast<amqp_basic_nack_t*>(m.decoded);
    throw std::runtime_error("the broker nacked publish " + std::to_string(nack->delivery_tag));
  } else if (m.id == AMQP_CHANNEL_CLOSE_METHOD || m.id == AMQP_CONNECTION_CLOSE_METHOD) {
    amqp_rpc_reply_t r{AMQP_RESPONSE_SERVER_EXCEPTION, m, 0};
    throw std::runtime_error("publishing: " + describe(r));
  }
}

void publish(amqp_connection_state_t c, const std::string& queue, std::uint64_t n, std::size_t size,
             std::uint64_t window) {
  declare(c, queue);
  amqp_confirm_select(c, channel);
  expect_ok(c, "confirm.select");
  std::string body(size, 'x');
  amqp_basic_properties_t props;
  std::memset(&props, 0, sizeof props);
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = 2;  // persistent, as a broker-backed queue would be used
  confirm_tracker confirms(n);
  std::uint64_t published = 0;
  auto start = bench::clock::now();
  while (confirms.confirmed() < n) {
    while (published < n && published - confirms.confirmed() < window) {
      int s = amqp_basic_publish(c, channel, amqp_empty_bytes, amqp_cstring_bytes(queue.c_str()), 0, 0,
                                 &props, amqp_bytes_t{body.size(), body.data()});
      if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("basic.publish: ") + amqp_error_string2(s));
      ++published;
    }
    await_confirm(c, confirms);
  }
  bench::report(n, start, bench::clock::now());
}

void consume(amqp_connection_state_t c, const std::string& queue, std::uint64_t n, std::uint64_t prefetch) {
  declare(c, queue);
  amqp_basic_qos(c, channel, 0, static_cast<std::uint16_t>(prefetch), 0);
  expect_ok(c, "basic.qos");
  amqp_basic_consume(c, channel, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  expect_ok(c, "basic.consume");
  auto start = bench::clock::now();
  for (std::uint64_t received = 0; received < n; ++received) {
    amqp_maybe_release_buffers(c);
    amqp_envelope_t envelope;
    timeval timeout{30, 0};
    auto r = amqp_consume_message(c, &envelope, &timeout, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
      throw std::runtime_error("consuming after " + std::to_string(received) + " of " + std::to_string(n) +
                               " messages: " + describe(r));
    }
    int s = amqp_basic_ack(c, channel, envelope.delivery_tag, 0);
    amqp_destroy_envelope(&envelope);
    if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("basic.ack: ") + amqp_error_string2(s));
  }
  auto end = bench::clock::now();
  bench::report(n, start, end);
  amqp_queue_delete(c, channel, amqp_cstring_bytes(queue.c_str()), 0, 0);
  expect_ok(c, "queue.delete");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bench::options o(argc, argv,
                     {{"host", "127.0.0.1"}, {"port", "5672"}, {"mode", "publish"}, {"messages", "50000"},
                      {"size", "100"}, {"window", "256"}, {"prefetch", "100"}, {"queue", "bench"}});
    if (o.number("prefetch") > 65535) throw std::invalid_argument("--prefetch is at most 65535");
    auto c = open(o.text("host"), static_cast<int>(o.number("port")));
    if (o.text("mode") == "publish") {
      publish(c.get(), o.text("queue"), o.number("messages"), o.number("size"), o.number("window"));
    } else if (o.text("mode") == "consume") {
      consume(c.get(), o.text("queue"), o.number("messages"), o.number("prefetch"));
    } else {
      throw std::invalid_argument("--mode '" + o.text("mode") + "' is neither publish nor consume");
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "amqp_bench: " << e.what() << '\n';
    return 1;
  }
}
