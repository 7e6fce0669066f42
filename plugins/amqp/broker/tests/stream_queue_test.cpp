// Stream queues (x-queue-type stream) through broker.hpp against fake_bus: the queue's own stream
// made with its retention, what is published to it stored there, what an earlier release left on
// stream AMQP copied over at open (each copy named by its stream sequence, acked once stored), and
// the methods RabbitMQ 3.10 refuses a stream queue, with its codes and texts
// (tests/amqp_messaging/test_stream_queues_rabbitmq.py compares both brokers).
#include <doctest/doctest.h>

#include <string>

#include "harness.hpp"

using namespace amqp;
using namespace amqp::broker::test;

namespace {

wire::field_table stream(std::initializer_list<std::pair<const char*, wire::field_value>> more = {}) {
  wire::field_table t;
  t.entries.push_back({"x-queue-type", wire::field_value(std::string("stream"))});
  for (const auto& [name, value] : more) t.entries.push_back({name, value});
  return t;
}

// The exception `m` raised on a fresh channel: "<code> <sentence>", "c" before it when it closed the
// connection; "ok" when none.
std::string refusal(harness& h, wire::method m, std::uint16_t id, std::uint16_t prefetch = 0) {
  h.open(id);
  if (prefetch > 0) h.qos(prefetch, false, id);
  const auto before = h.conn.exceptions.size();
  h.method(std::move(m), id);
  h.settle();
  if (h.conn.exceptions.size() == before) return "ok";
  const auto& e = h.conn.exceptions.back();
  return std::string(e.channel == 0 ? "c" : "") + std::to_string(static_cast<int>(e.code)) + " " + e.sentence;
}

}  // namespace

TEST_CASE("a stream queue's stream is made with its x-max-age and x-max-length-bytes, and goes with the queue") {
  harness h;
  h.open();
  const auto consumer = h.declare("s", 1, stream({{"x-max-age", wire::field_value(std::string("7D"))},
                                                  {"x-max-length-bytes", wire::field_value(std::int64_t{5000})}}));
  REQUIRE(h.bus->queue_streams().contains(consumer));
  const auto& limits = h.bus->queue_streams().at(consumer).limits;
  CHECK(limits.max_age_seconds == 7 * 24 * 3600);
  CHECK(limits.max_bytes == 5000);
  CHECK(h.all<wire::queue_declare_ok>().back().message_count == 0);
  h.method(wire::queue_delete_{0, "s", false, false, false});
  REQUIRE(h.run_until([&] { return h.count<wire::queue_delete_ok>() == 1; }));
  CHECK_FALSE(h.bus->queue_streams().contains(consumer));
}

TEST_CASE("a publish to a stream queue is stored in its stream, with the subject it named, and confirmed then") {
  harness h;
  h.open();
  const auto consumer = h.declare("s", 1, stream());
  CHECK_FALSE(h.bus->has_consumer(consumer));  // nothing of it on stream AMQP
  h.method(wire::exchange_declare{0, "x", "direct", false, true, false, false, false, {}});
  h.method(wire::queue_bind{0, "s", "x", "k", false, {}});
  h.confirm_select();
  h.publish("", "s", "a");
  h.publish("x", "k", "b");
  auto confirmed_up_to = [&] {
    const auto acks = h.all<wire::basic_ack>();
    return acks.empty() ? std::uint64_t{0} : acks.back().delivery_tag;
  };
  REQUIRE(h.run_until([&] { return confirmed_up_to() == 2; }));
  CHECK(h.all<wire::basic_nack>().empty());
  const auto& stored = h.bus->queue_streams().at(consumer);
  CHECK(stored.bodies == std::vector<std::string>{"a", "b"});
  CHECK(stored.routed_as == std::vector<std::string>{"amqp._.s", "amqp.x.k"});
  CHECK(stored.msg_ids == std::vector<std::string>{"", ""});
  CHECK(h.bus->ready(consumer) == 0);
  CHECK(h.bus->publish_count() == 0);  // no copy on stream AMQP
}

TEST_CASE("what an earlier release left of a stream queue on stream AMQP is copied into its stream at open, then its consumer goes") {
  harness h;
  h.open();
  const auto consumer = h.declare("s", 1, stream());
  // As that release left it: the queue's consumer on stream AMQP, holding messages not yet copied.
  REQUIRE(h.bus->ensure_queue_consumer(consumer, {"amqp._.s"}, bus::queue_sharing::single_active));
  const auto seqs = h.fill("s", 3);
  broker::settings s;
  s.node_name = "the-next-start";
  auto next = broker::make_broker(h.io, h.bus, std::move(s));
  REQUIRE(h.run_until([&] { return !h.bus->has_consumer(consumer); }));
  std::vector<std::string> ids;
  for (auto seq : seqs) ids.push_back(std::to_string(seq));
  CHECK(h.bus->queue_streams().at(consumer).msg_ids == ids);  // in stream order, each named by its sequence
  CHECK(h.bus->queue_streams().at(consumer).bodies == std::vector<std::string>{"m1", "m2", "m3"});
  CHECK(h.bus->queue_streams().at(consumer).routed_as == std::vector<std::string>(3, "amqp._.s"));
  CHECK(h.bus->stored_per_subject("amqp._.s")->empty());  // and its subject is emptied
  broker::stop_broker(*next);
  h.settle();
}

TEST_CASE("get, purge, a consume without prefetch, no-ack or x-priority are refused as RabbitMQ 3.10 refuses them") {
  harness h;
  h.open();
  h.declare("s", 1, stream());
  std::uint16_t id = 1;
  CHECK(refusal(h, wire::basic_get{0, "s", false}, ++id) ==
        "c540 basic.get not supported by stream queues queue 's' in vhost '/'");
  harness h2;
  h2.open();
  h2.declare("s", 1, stream());
  CHECK(refusal(h2, wire::queue_purge{0, "s", false}, ++id) ==
        "c540 queue.purge not supported by stream queues queue 's' in vhost '/'");
  harness h3;
  h3.open();
  h3.declare("s", 1, stream());
  wire::basic_consume m;
  m.queue = "s";
  CHECK(refusal(h3, m, ++id) == "406 consumer prefetch count is not set for 'queue 's' in vhost '/''");
  m.arguments.entries.push_back({"x-priority", wire::field_value(std::int32_t{3})});
  CHECK(refusal(h3, m, ++id, 10) == "406 invalid arg 'x-priority' for queue 's' in vhost '/' of queue type rabbit_stream_queue");
  m.arguments = {};
  m.arguments.entries.push_back({"x-stream-offset", wire::field_value(std::string("bogus"))});
  CHECK(refusal(h3, m, ++id, 10).find("406 invalid arg 'x-stream-offset' for queue 's' in vhost '/'") == 0);
  m.arguments = {};
  m.no_ack = true;
  CHECK(refusal(h3, m, ++id, 10) == "c540 automatic acknowledgement not supported by stream queues queue 's' in vhost '/'");
}

TEST_CASE("a new stream queue is refused what RabbitMQ 3.10 refuses, with its texts") {
  harness h;
  std::uint16_t id = 0;
  auto declared = [&](const char* queue, bool durable, bool exclusive, bool auto_delete, wire::field_table args) {
    wire::queue_declare m;
    m.queue = queue;
    m.durable = durable;
    m.exclusive = exclusive;
    m.auto_delete = auto_delete;
    m.arguments = std::move(args);
    return refusal(h, m, ++id);
  };
  CHECK(declared("s1", false, false, false, stream()) == "406 invalid property 'non-durable' for queue 's1' in vhost '/'");
  CHECK(declared("s2", true, true, false, stream()) ==
        "406 invalid property 'exclusive-owner' for queue 's2' in vhost '/'");
  CHECK(declared("s3", true, false, true, stream()) == "406 invalid property 'auto-delete' for queue 's3' in vhost '/'");
  CHECK(declared("", true, false, false, stream()) ==
        "406 Cannot declare a server-named queue for type rabbit_stream_queue");
  CHECK(declared("sa", true, false, false, stream({{"x-max-age", wire::field_value(std::string("10X"))}})) ==
        "406 invalid arg 'x-max-age' for queue 'sa' in vhost '/': invalid_max_age");
  CHECK(declared("sb", true, false, false, stream({{"x-max-age", wire::field_value(std::int32_t{10})}})) ==
        "406 invalid arg 'x-max-age' for queue 'sb' in vhost '/': {unacceptable_type,signedint}");
  CHECK(declared("sd", true, false, false, stream({{"x-max-length-bytes", wire::field_value(std::string("x"))}})) ==
        "406 invalid arg 'x-max-length-bytes' for queue 'sd' in vhost '/': \"expected integer, got longstr\"");
  for (const char* arg : {"x-max-length", "x-message-ttl", "x-expires", "x-delivery-limit", "x-max-priority"}) {
    CAPTURE(arg);
    CHECK(declared("se", true, false, false, stream({{arg, wire::field_value(std::int32_t{3})}})) ==
          std::string("406 invalid arg '") + arg + "' for queue 'se' in vhost '/' of queue type rabbit_stream_queue");
  }
  // A classic queue keeps the adaptor's 540 for x-max-age: only a stream queue has one.
  wire::field_table aged;
  aged.entries.push_back({"x-max-age", wire::field_value(std::string("1h"))});
  CHECK(declared("c", true, false, false, aged).find("540 queue argument 'x-max-age' is not implemented") == 0);
  // Redeclared with another x-max-age, as RabbitMQ 3.10 words it.
  REQUIRE(declared("s", true, false, false, stream()) == "ok");
  CHECK(declared("s", true, false, false, stream({{"x-max-age", wire::field_value(std::string("2h"))}})) ==
        "406 inequivalent arg 'x-max-age' for queue 's' in vhost '/': received the value '2h' of type 'longstr' but "
        "current is none");
}
