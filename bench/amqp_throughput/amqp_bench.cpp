// Throughput of one AMQP 0-9-1 broker, measured the way a RabbitMQ client application sees it:
//   --mode publish: persistent messages to a durable queue through the default exchange, with
//                   publisher confirms and at most --window unconfirmed; timed to the last confirm.
//                   --connections N: N publishers, each on a connection and thread of its own,
//                   share the messages. --queues Q > 1: to a fanout exchange bound by Q queues.
//                   --spread Q > 1: to Q queues in turn, through the default exchange.
//   --mode consume: basic.consume with prefetch --prefetch, basic.ack for each message; timed
//                   from the first consume to the last ack; the queue is deleted afterwards.
//                   --queues Q > 1: the Q queues of the fanout, a consumer (connection, thread)
//                   each, every one reading all the messages; --spread Q: the Q queues, a
//                   consumer each, reading its share.
//   --mode latency: --rate messages a second for --seconds, published with confirms on one
//                   connection and consumed (prefetch --prefetch, ack each) on another; each
//                   body carries its send time, so publish→deliver and publish→confirm are timed
//                   per message. --unconfirmed U: a send that would leave more than U unconfirmed
//                   waits for confirms (with a --rate the server cannot keep: the publisher at
//                   full speed, as a client with a bounded confirm window).
// Prints bench::report's line (latency: bench::report_latency's); any failure is a message on
// stderr and exit status 1.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <poll.h>
#include <sys/time.h>

#include <cerrno>

#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/options.hpp"
#include "bench/parallel.hpp"

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

// Where the publishes go: one queue through the default exchange; (--queues Q > 1) a fanout
// exchange bound by Q queues, each getting every message; or (--spread Q > 1) Q queues through
// the default exchange in turn, each getting its share.
struct target {
  std::string exchange, key;
  std::vector<std::string> queues;
  bool spread = false;
  const std::string& key_for(std::uint64_t i) const { return spread ? queues[i % queues.size()] : key; }
};

target prepare(amqp_connection_state_t c, const std::string& queue, std::uint64_t queues, std::uint64_t spread) {
  if (spread > 1) {
    target t{"", "", {}, true};
    for (std::uint64_t i = 0; i < spread; ++i) {
      t.queues.push_back(queue + "-" + std::to_string(i));
      declare(c, t.queues.back());
    }
    return t;
  }
  if (queues == 1) {
    declare(c, queue);
    return {"", queue, {queue}};
  }
  target t{queue + "-fan", "", {}};
  amqp_exchange_declare(c, channel, amqp_cstring_bytes(t.exchange.c_str()), amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
                        amqp_empty_table);
  expect_ok(c, "exchange.declare");
  for (std::uint64_t i = 0; i < queues; ++i) {
    t.queues.push_back(queue + "-" + std::to_string(i));
    declare(c, t.queues.back());
    amqp_queue_bind(c, channel, amqp_cstring_bytes(t.queues.back().c_str()), amqp_cstring_bytes(t.exchange.c_str()),
                    amqp_empty_bytes, amqp_empty_table);
    expect_ok(c, "queue.bind");
  }
  return t;
}

void publish_some(amqp_connection_state_t c, const target& t, std::uint64_t n, std::size_t size, std::uint64_t window) {
  amqp_confirm_select(c, channel);
  expect_ok(c, "confirm.select");
  std::string body(size, 'x');
  amqp_basic_properties_t props;
  std::memset(&props, 0, sizeof props);
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = 2;  // persistent, as a broker-backed queue would be used
  confirm_tracker confirms(n);
  std::uint64_t published = 0;
  while (confirms.confirmed() < n) {
    while (published < n && published - confirms.confirmed() < window) {
      int s = amqp_basic_publish(c, channel, amqp_cstring_bytes(t.exchange.c_str()),
                                 amqp_cstring_bytes(t.key_for(published).c_str()), 0, 0, &props,
                                 amqp_bytes_t{body.size(), body.data()});
      if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("basic.publish: ") + amqp_error_string2(s));
      ++published;
    }
    await_confirm(c, confirms);
  }
}

// --connections publishers, each on its own connection and thread, share the n messages.
void publish(const std::string& host, int port, const std::string& queue, std::uint64_t n, std::size_t size,
             std::uint64_t window, std::uint64_t connections, std::uint64_t queues, std::uint64_t spread) {
  auto c = open(host, port);
  const target t = prepare(c.get(), queue, queues, spread);
  std::vector<connection> publishers;
  for (std::uint64_t i = 0; i < connections; ++i) publishers.push_back(open(host, port));
  auto start = bench::clock::now();
  bench::in_parallel(connections, [&](std::size_t i) {
    publish_some(publishers[i].get(), t, n / connections + (i == 0 ? n % connections : 0), size, window);
  });
  bench::report(n, start, bench::clock::now());
}

// Consumes n messages of `queue`, acking each; `seen` (if given) runs on each before its ack.
void consume_some(amqp_connection_state_t c, const std::string& queue, std::uint64_t n, std::uint64_t prefetch,
                  const std::function<void(const amqp_envelope_t&)>& seen = {}) {
  amqp_basic_qos(c, channel, 0, static_cast<std::uint16_t>(prefetch), 0);
  expect_ok(c, "basic.qos");
  amqp_basic_consume(c, channel, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  expect_ok(c, "basic.consume");
  for (std::uint64_t received = 0; received < n; ++received) {
    amqp_maybe_release_buffers(c);
    amqp_envelope_t envelope;
    timeval timeout{30, 0};
    auto r = amqp_consume_message(c, &envelope, &timeout, 0);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
      throw std::runtime_error("consuming " + queue + " after " + std::to_string(received) + " of " +
                               std::to_string(n) + " messages: " + describe(r));
    }
    if (seen) seen(envelope);
    int s = amqp_basic_ack(c, channel, envelope.delivery_tag, 0);
    amqp_destroy_envelope(&envelope);
    if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("basic.ack: ") + amqp_error_string2(s));
  }
}

// Each queue the publish run filled is read by a consumer of its own (connection and thread);
// timed from the first consume to the last ack of all of them; the queues go afterwards.
void consume(const std::string& host, int port, const std::string& queue, std::uint64_t n, std::uint64_t prefetch,
             std::uint64_t queues, std::uint64_t spread) {
  auto c = open(host, port);
  const target t = prepare(c.get(), queue, queues, spread);
  std::vector<connection> consumers;
  for (std::size_t i = 0; i < t.queues.size(); ++i) consumers.push_back(open(host, port));
  // A fanout's queues each hold every message; spread queues a share each (in publish order).
  auto holds = [&](std::size_t i) { return t.spread ? n / t.queues.size() + (i < n % t.queues.size() ? 1 : 0) : n; };
  auto start = bench::clock::now();
  bench::in_parallel(t.queues.size(),
                     [&](std::size_t i) { consume_some(consumers[i].get(), t.queues[i], holds(i), prefetch); });
  auto end = bench::clock::now();
  bench::report(t.spread ? n : n * t.queues.size(), start, end);
  for (const auto& q : t.queues) {
    amqp_queue_delete(c.get(), channel, amqp_cstring_bytes(q.c_str()), 0, 0);
    expect_ok(c.get(), "queue.delete");
  }
  if (!t.exchange.empty()) {
    amqp_exchange_delete(c.get(), channel, amqp_cstring_bytes(t.exchange.c_str()), 0);
    expect_ok(c.get(), "exchange.delete");
  }
}

// A body of `size` octets (at least 8) beginning with its send time.
std::string stamped(std::size_t size, bench::clock::time_point sent) {
  std::string body(std::max<std::size_t>(size, 8), 'x');
  const std::int64_t ns = sent.time_since_epoch().count();
  std::memcpy(body.data(), &ns, sizeof ns);
  return body;
}

bench::clock::time_point stamp_of(const amqp_bytes_t& body) {
  std::int64_t ns = 0;
  if (body.len >= sizeof ns) std::memcpy(&ns, body.bytes, sizeof ns);
  return bench::clock::time_point(bench::clock::duration(ns));
}

void latency(const std::string& host, int port, const std::string& queue, std::uint64_t rate, std::uint64_t seconds,
             std::size_t size, std::uint64_t prefetch, std::uint64_t unconfirmed) {
  auto p = open(host, port);
  auto c = open(host, port);
  declare(p.get(), queue);
  amqp_queue_purge(p.get(), channel, amqp_cstring_bytes(queue.c_str()));
  expect_ok(p.get(), "queue.purge");
  amqp_confirm_select(p.get(), channel);
  expect_ok(p.get(), "confirm.select");
  const std::uint64_t n = rate * seconds;
  std::vector<double> delivered, confirmed;
  delivered.reserve(n);
  confirmed.reserve(n);
  std::exception_ptr consumer_failed;
  std::thread consumer([&] {
    try {
      consume_some(c.get(), queue, n, prefetch, [&](const amqp_envelope_t& e) {
        delivered.push_back(bench::micros(bench::clock::now() - stamp_of(e.message.body)));
      });
    } catch (...) {
      consumer_failed = std::current_exception();
    }
  });
  amqp_basic_properties_t props;
  std::memset(&props, 0, sizeof props);
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
  props.delivery_mode = 2;
  std::vector<bench::clock::time_point> sent(n + 1);
  confirm_tracker confirms(n);
  const auto start = bench::clock::now();
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / rate);
  std::uint64_t published = 0;
  try {
    while (confirms.confirmed() < n) {
      const auto due = start + interval * published;
      auto now = bench::clock::now();
      if (published < n && now >= due && published - confirms.confirmed() < unconfirmed) {
        sent[++published] = now;
        auto body = stamped(size, now);
        int s = amqp_basic_publish(p.get(), channel, amqp_empty_bytes, amqp_cstring_bytes(queue.c_str()), 0, 0,
                                   &props, amqp_bytes_t{body.size(), body.data()});
        if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("basic.publish: ") + amqp_error_string2(s));
        continue;
      }
      // Confirms until the next send is due. Waited for with ppoll: rabbitmq-c's own wait counts
      // in milliseconds and spins below one, which would take a core from the servers measured.
      if (!amqp_frames_enqueued(p.get()) && !amqp_data_in_buffer(p.get())) {
        const bool window_full = published - confirms.confirmed() >= unconfirmed;
        const std::chrono::nanoseconds wait =
            published < n && !window_full ? std::chrono::nanoseconds(due - now) : std::chrono::seconds(30);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        pollfd fd{amqp_get_sockfd(p.get()), POLLIN, 0};
        timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        if (int ready = ppoll(&fd, 1, &ts, nullptr); ready <= 0) {
          if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("ppoll: ") + std::strerror(errno));
          continue;
        }
      }
      timeval tv{1, 0};  // a frame is arriving: its rest follows at once
      amqp_frame_t frame;
      int s = amqp_simple_wait_frame_noblock(p.get(), &frame, &tv);
      if (s == AMQP_STATUS_TIMEOUT) continue;
      if (s != AMQP_STATUS_OK) throw std::runtime_error(std::string("waiting for confirms: ") + amqp_error_string2(s));
      if (frame.frame_type != AMQP_FRAME_METHOD || frame.payload.method.id != AMQP_BASIC_ACK_METHOD) {
        throw std::runtime_error("unexpected frame while waiting for confirms (method " +
                                 std::to_string(frame.payload.method.id) + ")");
      }
      auto* ack = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
      const auto at = bench::clock::now();
      const std::uint64_t before = confirms.confirmed();
      const std::uint64_t first = ack->multiple ? before + 1 : ack->delivery_tag;
      confirms.settle(ack->delivery_tag, ack->multiple != 0);
      for (std::uint64_t tag = first; tag <= ack->delivery_tag && confirmed.size() < confirms.confirmed(); ++tag)
        confirmed.push_back(bench::micros(at - sent[tag]));
    }
  } catch (...) {
    consumer.detach();
    throw;
  }
  consumer.join();
  if (consumer_failed) std::rethrow_exception(consumer_failed);
  bench::report_latency(n, delivered, confirmed, std::pair{start, bench::clock::now()});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bench::options o(argc, argv,
                     {{"host", "127.0.0.1"}, {"port", "5672"}, {"mode", "publish"}, {"messages", "50000"},
                      {"size", "100"}, {"window", "256"}, {"prefetch", "100"}, {"queue", "bench"},
                      {"rate", "1000"}, {"seconds", "8"}, {"connections", "1"}, {"queues", "1"},
                      {"spread", "1"}, {"unconfirmed", "1000000"}});
    if (o.number("connections") > 256) throw std::invalid_argument("--connections is at most 256");
    if (o.number("queues") > 256 || o.number("spread") > 256)
      throw std::invalid_argument("--queues and --spread are at most 256");
    if (o.number("spread") > 1 && (o.number("queues") > 1 || o.number("connections") > 1))
      throw std::invalid_argument("--spread (queues in turn, from one publisher) takes neither --queues nor --connections");
    if (o.number("prefetch") > 65535) throw std::invalid_argument("--prefetch is at most 65535");
    if (o.number("rate") > 1'000'000) throw std::invalid_argument("--rate is at most 1000000");
    if (o.text("mode") == "latency") {
      latency(o.text("host"), static_cast<int>(o.number("port")), o.text("queue"), o.number("rate"),
              o.number("seconds"), o.number("size"), o.number("prefetch"), o.number("unconfirmed"));
      return 0;
    }
    const auto host = o.text("host");
    const auto port = static_cast<int>(o.number("port"));
    if (o.text("mode") == "publish") {
      publish(host, port, o.text("queue"), o.number("messages"), o.number("size"), o.number("window"),
              o.number("connections"), o.number("queues"), o.number("spread"));
    } else if (o.text("mode") == "consume") {
      consume(host, port, o.text("queue"), o.number("messages"), o.number("prefetch"), o.number("queues"),
              o.number("spread"));
    } else {
      throw std::invalid_argument("--mode '" + o.text("mode") + "' is none of publish, consume, latency");
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "amqp_bench: " << e.what() << '\n';
    return 1;
  }
}
