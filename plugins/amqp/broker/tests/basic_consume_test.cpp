// Consuming on a channel: prefetch as an exact in-flight bound (basic.qos), what the puller asks
// the bus for, no-ack consumers, basic.cancel, and consumer tags. Driven through broker.hpp
// against fake_bus.
#include <doctest/doctest.h>

#include <algorithm>

#include "harness.hpp"

using namespace amqp;
using namespace amqp::broker::test;
using kind = settlement::kind;

namespace {

// What the consumer of `queue` holds or has asked for: unsettled deliveries plus open requests.
std::uint64_t in_flight(harness& h, const std::string& queue) {
  return h.bus->unsettled(consumer_of(queue)) + h.bus->open_requests(consumer_of(queue));
}

std::uint32_t largest_request(harness& h) {
  std::uint32_t most = 0;
  for (const auto& r : h.bus->requests()) most = std::max(most, r.batch);
  return most;
}

// No-ack: `n` messages were acked on the bus as they were handed over, nothing of queue q is
// left unsettled, and tag 1 is not the client's to settle (406).
void acked_at_once(harness& h, std::size_t n) {
  h.settle();
  CHECK(h.bus->settlements_of(kind::ack).size() == n);
  CHECK(h.bus->unsettled(consumer_of("q")) == 0);
  h.method(wire::basic_ack{1, false});
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::precondition_failed);
}

// One basic.get of `queue`, answered get-ok.
void get_ok(harness& h, const std::string& queue, bool no_ack = true) {
  const auto before = h.count<wire::basic_get_ok>();
  h.method(wire::basic_get{0, queue, no_ack});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_get_ok>() > before; }));
}

}  // namespace

TEST_CASE("with prefetch N exactly N deliveries are in flight, and the next comes only after an ack") {
  harness h;
  h.open();
  h.declare("q");
  h.qos(2);
  h.fill("q", 5);
  h.consume("q", "c");
  h.settle();
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2"});
  CHECK(h.bus->ready(consumer_of("q")) == 3);

  h.method(wire::basic_ack{1, false});
  h.settle();
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3"});

  h.method(wire::basic_ack{3, true});  // tags 2 and 3: two more may come
  h.settle();
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3", "m4", "m5"});
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("a consumer's pull requests never ask for more than its free prefetch window") {
  harness h;
  h.open();
  h.declare("q");
  h.qos(3);
  h.consume("q", "c");
  h.settle();  // an empty queue: the whole window is asked for, and nothing more
  CHECK(h.bus->open_requests(consumer_of("q")) == 3);
  h.fill("q", 10);
  h.settle();
  CHECK(h.count<wire::basic_deliver>() == 3);
  // Acked one at a time: what is held plus what is asked for stays within the prefetch.
  for (std::uint64_t tag = 1; tag <= 7; ++tag) {
    h.method(wire::basic_ack{tag, false});
    h.settle();
    CHECK(in_flight(h, "q") <= 3);
    CHECK(h.bus->unsettled(consumer_of("q")) == 3);  // refilled to the prefetch each time
  }
  CHECK(h.count<wire::basic_deliver>() == 10);
  CHECK(largest_request(h) <= 3);
  h.method(wire::basic_ack{0, true});
  h.settle();
  CHECK(in_flight(h, "q") <= 3);
  CHECK(h.bus->ready(consumer_of("q")) == 0);
}

TEST_CASE("a channel-wide prefetch (global) bounds two consumers together") {
  harness h;
  h.open();
  h.declare("a");
  h.declare("b");
  h.qos(2, true);
  h.fill("a", 3);
  h.fill("b", 3, 4);
  h.consume("a", "ca");
  h.consume("b", "cb");
  h.settle();
  CHECK(h.count<wire::basic_deliver>() == 2);
  CHECK(in_flight(h, "a") + in_flight(h, "b") <= 2);
  h.method(wire::basic_ack{0, true});
  h.settle();
  CHECK(h.count<wire::basic_deliver>() == 4);
  CHECK(h.bus->unsettled(consumer_of("a")) + h.bus->unsettled(consumer_of("b")) == 2);
}

TEST_CASE("a no-ack consumer's deliveries are acked on the bus at once and are not the client's to settle") {
  harness h;
  h.open();
  h.declare("q");
  h.qos(1);  // no-ack consumers are not bound by prefetch
  h.fill("q", 3);
  h.consume("q", "c", true);
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 3; }));
  acked_at_once(h, 3);
}

// Nobody is there to answer a deletion the server starts (auto-delete, x-expires, an exclusive
// owner gone): one the bus failed (the soak's x-expires queue, a node's disk full) was logged and
// forgotten here, its bucket entry and consumer left for good. It is tried again until done.
TEST_CASE("an auto-delete queue whose deletion the bus failed is deleted on a later try") {
  harness h;
  h.open();
  wire::queue_declare m;
  m.queue = "ad";
  m.durable = true;
  m.auto_delete = true;
  h.method(m);
  REQUIRE(h.run_until([&] { return h.count<wire::queue_declare_ok>() == 1; }));
  h.consume("ad", "c");
  h.bus->fail_purges(1);
  h.method(wire::basic_cancel{"c", false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_cancel_ok>() == 1; }));
  REQUIRE(h.run_until([&] { return !h.warnings.empty(); }));
  CHECK(h.warnings[0].find("deleting queue 'ad': drop the messages on") != std::string::npos);
  CHECK(h.warnings[0].find("trying again in 1 s") != std::string::npos);
  CHECK(h.bus->has_key("q.ad"));
  bool gone = false;
  for (int i = 0; i < 5 && !gone; ++i) gone = h.run_until([&] { return !h.bus->has_key("q.ad"); });
  CHECK(gone);
  CHECK_FALSE(h.bus->has_consumer(consumer_of("ad")));
  CHECK(h.warnings.size() == 1);
}

TEST_CASE("a queue has no bus consumer until it is read: its messages wait on its subject, counted from there") {
  harness h;
  h.open();
  h.declare("idle");
  h.fill("idle", 3);
  CHECK_FALSE(h.bus->has_consumer(consumer_of("idle")));
  wire::queue_declare passive;
  passive.queue = "idle";
  passive.passive = true;
  h.method(passive);
  REQUIRE(h.run_until([&] { return h.count<wire::queue_declare_ok>() == 2; }));
  CHECK(h.all<wire::queue_declare_ok>()[1].message_count == 3);
  CHECK_FALSE(h.bus->has_consumer(consumer_of("idle")));
  h.consume("idle", "c", /*no_ack=*/true);
  CHECK(h.bus->has_consumer(consumer_of("idle")));
  REQUIRE(h.run_until([&] { return h.delivered_bodies().size() == 3; }));
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3"});
}

TEST_CASE("a queue's bus consumer goes once nobody used it for a while, and the next read makes it again") {
  harness h{std::chrono::seconds{1}};
  h.open();
  h.declare("r");
  h.fill("r", 3);
  get_ok(h, "r", /*no_ack=*/false);
  h.method(wire::basic_ack{1, false});
  h.settle();
  REQUIRE(h.bus->has_consumer(consumer_of("r")));
  bool gone = false;
  for (int i = 0; i < 5 && !gone; ++i) gone = h.run_until([&] { return !h.bus->has_consumer(consumer_of("r")); });
  REQUIRE(gone);
  CHECK(h.bus->ready(consumer_of("r")) == 2);  // what it settled was removed first
  get_ok(h, "r");
  std::vector<std::string> bodies;
  for (const auto& f : h.conn.frames)
    if (std::holds_alternative<wire::basic_get_ok>(f.method)) bodies.push_back(f.body);
  CHECK(bodies == std::vector<std::string>{"m1", "m2"});
  CHECK(h.all<wire::basic_get_ok>()[1].redelivered == false);
}

TEST_CASE("a queue's bus consumer stays while a delivery is unsettled or a consumer reads it") {
  harness h{std::chrono::seconds{1}};
  h.open();
  h.declare("held");
  h.declare("read");
  h.fill("held", 1);
  get_ok(h, "held", /*no_ack=*/false);  // never acked
  h.consume("read", "c");
  for (int i = 0; i < 3; ++i) (void)h.run_until([] { return false; });  // three rounds of the look, at least
  CHECK(h.bus->has_consumer(consumer_of("held")));
  CHECK(h.bus->has_consumer(consumer_of("read")));
}

TEST_CASE("a get whose queue's consumer another replica removed makes it again and takes the message") {
  harness h;
  h.open();
  h.declare("gone");
  h.fill("gone", 2);
  get_ok(h, "gone");
  REQUIRE(h.bus->delete_queue_consumer(consumer_of("gone")).ok());  // as another replica's look does
  get_ok(h, "gone");
  CHECK(h.count<wire::basic_get_empty>() == 0);
  CHECK(h.bus->has_consumer(consumer_of("gone")));
}

TEST_CASE("a consumer whose queue's bus consumer went makes it again, and what it had delivered comes back redelivered") {
  harness h;
  h.open();
  h.declare("lost");
  h.qos(2);
  h.consume("lost", "c");
  h.fill("lost", 2);
  REQUIRE(h.run_until([&] { return h.delivered_bodies().size() == 2; }));
  // Its deliveries' acks find no consumer: the one made again delivers them as if new.
  REQUIRE(h.bus->delete_queue_consumer(consumer_of("lost")).ok());
  h.fill("lost", 1, 3);
  h.method(wire::basic_ack{2, true});
  REQUIRE(h.run_until([&] { return h.delivered_bodies().size() == 4; }));
  h.method(wire::basic_ack{4, true});
  REQUIRE(h.run_until([&] { return h.delivered_bodies().size() == 5; }));
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m1", "m2", "m3"});
  const auto deliveries = h.all<wire::basic_deliver>();
  CHECK(deliveries[2].redelivered);
  CHECK(deliveries[3].redelivered);
  CHECK_FALSE(deliveries[4].redelivered);
}

TEST_CASE("basic.cancel is answered cancel-ok, nothing is delivered after it, and its deliveries may still be acked") {
  harness h;
  h.open();
  h.declare("q");
  h.qos(1);
  h.fill("q", 3);
  h.consume("q", "c");
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 1; }));
  h.method(wire::basic_cancel{"c", false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_cancel_ok>() == 1; }));
  CHECK(h.all<wire::basic_cancel_ok>()[0].consumer_tag == "c");
  CHECK(h.bus->open_requests(consumer_of("q")) == 0);

  h.method(wire::basic_ack{1, false});  // unsettled deliveries stay the client's
  h.fill("q", 1, 4);
  h.settle();
  CHECK(h.conn.exceptions.empty());
  CHECK(h.count<wire::basic_deliver>() == 1);
  CHECK(h.bus->settlements_of(kind::ack).size() == 1);
  CHECK(h.bus->ready(consumer_of("q")) == 3);
}

TEST_CASE("what the bus had already sent when basic.cancel came is delivered before cancel-ok") {
  harness h;
  h.open();
  h.declare("q");
  h.consume("q", "c");
  h.settle();                // the consumer's request waits on the bus
  h.fill("q", 2);            // the bus sends two messages: they are on their way (posted)
  h.method(wire::basic_cancel{"c", false});  // before they arrived
  REQUIRE(h.run_until([&] { return h.count<wire::basic_cancel_ok>() == 1; }));
  h.settle();
  const auto names = h.method_names();
  const std::vector<std::string> tail(names.end() - 3, names.end());
  CHECK(tail == std::vector<std::string>{"basic.deliver", "basic.deliver", "basic.cancel-ok"});
  CHECK(h.bus->unsettled(consumer_of("q")) == 2);
}

TEST_CASE("cancelling an unknown consumer tag is answered cancel-ok") {
  harness h;
  h.open();
  h.method(wire::basic_cancel{"nobody", false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_cancel_ok>() == 1; }));
  CHECK(h.all<wire::basic_cancel_ok>()[0].consumer_tag == "nobody");
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("a consumer tag already used on the channel is 530 NOT_ALLOWED on the connection") {
  harness h;
  h.open();
  h.declare("q");
  h.consume("q", "same");
  wire::basic_consume again;
  again.queue = "q";
  again.consumer_tag = "same";
  h.method(again);
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  const auto& e = h.conn.exceptions[0];
  CHECK(e.channel == 0);  // a connection exception, as RabbitMQ raises it
  CHECK_FALSE(h.is_open(1));
  CHECK(e.code == wire::reply_code::not_allowed);
  CHECK(e.sentence.find("attempt to reuse consumer tag 'same'") != std::string::npos);
  CHECK(e.offending == wire::basic_consume::key);
  CHECK(h.count<wire::basic_consume_ok>() == 1);
}

// Found by the sequence fuzzer: after a connection exception the session waits for the client's
// close-ok (up to its close timeout) before it closes the channels. Meanwhile a consumer of the
// failed channel must not keep pulling: each message it got went straight back (nak) and was
// asked for again at once, a hot loop that raised the message's delivery count without bound.
TEST_CASE("a channel that raised a connection exception asks the bus for nothing more until it is closed") {
  harness h;
  h.conn.on_connection_closed = [] {};  // the session's close-ok wait: the channels stay until it ends
  h.open();
  h.declare("q");
  h.consume("q", "same");
  wire::basic_consume again;
  again.queue = "q";
  again.consumer_tag = "same";
  h.method(again);
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  h.fill("q", 1);
  // Bounded turns (a livelock never lets a whole poll() return).
  for (int turn = 0; turn < 200; ++turn) {
    h.io.restart();
    if (h.io.poll_one() == 0) break;
  }
  CHECK(h.bus->handed_out().size() <= 1);  // what its open request brought first; then the requests end
  CHECK(h.bus->ready(consumer_of("q")) == 1);
  CHECK(h.count<wire::basic_deliver>() == 0);
}

TEST_CASE("a consumer tag is free again once its consumer was cancelled") {
  harness h;
  h.open();
  h.declare("q");
  h.consume("q", "t");
  h.method(wire::basic_cancel{"t", false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_cancel_ok>() == 1; }));
  h.consume("q", "t");
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("an empty consumer tag gets a server-generated amq.ctag- tag, different each time") {
  harness h;
  h.open();
  h.declare("q");
  h.consume("q", "");
  h.consume("q", "");
  const auto oks = h.all<wire::basic_consume_ok>();
  REQUIRE(oks.size() == 2);
  CHECK(oks[0].consumer_tag.starts_with("amq.ctag-"));
  CHECK(oks[0].consumer_tag != oks[1].consumer_tag);
}

TEST_CASE("consuming a queue that does not exist closes the channel with 404 NOT_FOUND") {
  harness h;
  h.open();
  wire::basic_consume m;
  m.queue = "absent";
  m.consumer_tag = "c";
  h.method(m);
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].channel == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::not_found);
  CHECK(h.bus->requests().empty());
}

TEST_CASE("basic.get answers get-ok with the next message and how many remain, settled like a delivery") {
  harness h;
  h.open();
  h.declare("q");
  h.fill("q", 3);
  CHECK_FALSE(h.bus->has_consumer(consumer_of("q")));
  get_ok(h, "q", /*no_ack=*/false);  // its first read makes its consumer, which starts at its first message
  CHECK(h.bus->has_consumer(consumer_of("q")));
  const auto ok = h.all<wire::basic_get_ok>()[0];
  CHECK(ok.delivery_tag == 1);
  CHECK_FALSE(ok.redelivered);
  CHECK(ok.exchange == "");
  CHECK(ok.routing_key == "q");
  CHECK(ok.message_count == 2);  // the message taken is not counted
  CHECK(h.conn.frames.back().body == "m1");
  CHECK(h.bus->unsettled(consumer_of("q")) == 1);

  h.method(wire::basic_reject{1, true});  // back to the queue, then fetched again
  get_ok(h, "q", /*no_ack=*/false);
  const auto again = h.all<wire::basic_get_ok>()[1];
  CHECK(again.delivery_tag == 2);
  CHECK(again.redelivered);
  CHECK(h.conn.frames.back().body == "m1");
  CHECK(h.bus->settlements_of(kind::nak).size() == 1);
}

TEST_CASE("pipelined basic.gets are answered one after the other, in order, each with its own message") {
  harness h;
  h.open();
  h.declare("q");
  h.fill("q", 3);
  for (int i = 0; i < 4; ++i) h.method(wire::basic_get{0, "q", false});  // sent before any answer
  REQUIRE(h.run_until([&] { return h.count<wire::basic_get_ok>() + h.count<wire::basic_get_empty>() == 4; }));
  const auto oks = h.all<wire::basic_get_ok>();
  REQUIRE(oks.size() == 3);
  CHECK(oks[0].delivery_tag == 1);
  CHECK(oks[1].delivery_tag == 2);
  CHECK(oks[2].delivery_tag == 3);
  CHECK(h.method_names(1).back() == "basic.get-empty");  // the fourth found the queue empty
  CHECK(h.delivered_bodies(1).empty());                  // get-ok is not a delivery
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("basic.get on an empty queue answers get-empty at once") {
  harness h;
  h.open();
  h.declare("q");
  h.method(wire::basic_get{0, "q", false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_get_empty>() == 1; }));
  CHECK(h.count<wire::basic_get_ok>() == 0);
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("basic.get with no-ack acks the message on the bus at once and leaves nothing to settle") {
  harness h;
  h.open();
  h.declare("q");
  h.fill("q", 1);
  get_ok(h, "q");
  acked_at_once(h, 1);
}

namespace {

wire::basic_consume consume_with(std::string name, wire::field_value value) {
  wire::basic_consume m;
  m.queue = "q";
  m.consumer_tag = "c";
  m.arguments.entries.push_back(wire::table_entry{std::move(name), std::move(value)});
  return m;
}

// The consume's channel exception, once the broker has answered it.
wire::reply_code refusal_of(harness& h, const wire::basic_consume& m) {
  h.method(m);
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].offending == wire::basic_consume::key);
  return h.conn.exceptions[0].code;
}

}  // namespace

TEST_CASE("consumer arguments: priority 0 and no cancel on failover are what every consumer gets, and accepted") {
  for (auto m : {consume_with("x-priority", wire::field_value{std::int32_t{0}}),
                 consume_with("x-cancel-on-ha-failover", wire::field_value{false})}) {
    harness h;
    h.open();
    h.declare("q");
    h.fill("q", 1);
    h.method(m);
    h.settle();
    CHECK(h.conn.exceptions.empty());
    CHECK(h.delivered_bodies() == std::vector<std::string>{"m1"});
    REQUIRE_FALSE(h.bus->requests().empty());
    CHECK(h.bus->requests()[0].priority == 0);
  }
}

TEST_CASE("x-priority 0 to 9, of any integer type, is the consumer's priority on the bus") {
  for (auto [value, priority] : {std::pair{wire::field_value{std::int8_t{9}}, 9},
                                 std::pair{wire::field_value{std::int16_t{1}}, 1},
                                 std::pair{wire::field_value{std::int32_t{5}}, 5},
                                 std::pair{wire::field_value{std::int64_t{7}}, 7}}) {
    harness h;
    h.open();
    h.declare("q");
    h.fill("q", 1);
    h.method(consume_with("x-priority", value));
    h.settle();
    CHECK(h.conn.exceptions.empty());
    CHECK(h.delivered_bodies() == std::vector<std::string>{"m1"});
    REQUIRE_FALSE(h.bus->requests().empty());
    for (const auto& r : h.bus->requests()) CHECK(r.priority == priority);
  }
}

TEST_CASE("x-priority outside 0 to 9 is 540 NOT_IMPLEMENTED, naming the value and the accepted range") {
  for (auto m : {consume_with("x-priority", wire::field_value{std::int32_t{10}}),
                 consume_with("x-priority", wire::field_value{std::int64_t{-1}}),
                 consume_with("x-priority", wire::field_value{std::int64_t{std::int64_t{1} << 40}})}) {
    harness h;
    h.open();
    h.declare("q");
    CHECK(refusal_of(h, m) == wire::reply_code::not_implemented);
    const auto& sentence = h.conn.exceptions[0].sentence;
    CHECK(sentence.find("'x-priority' " + std::to_string(*wire::integer_of(m.arguments.entries[0].value))) !=
          std::string::npos);
    CHECK(sentence.find("0 (the default) to 9") != std::string::npos);
    CHECK(h.bus->requests().empty());  // no consumer was started
  }
}

TEST_CASE("x-priority other than 0 on a single-active-consumer queue is 540 NOT_IMPLEMENTED, 0 is accepted") {
  auto declare_single_active = [](harness& h) {
    wire::queue_declare d;
    d.queue = "q";
    d.durable = true;
    d.arguments.entries.push_back(wire::table_entry{"x-single-active-consumer", wire::field_value{true}});
    h.method(d);
    REQUIRE(h.run_until([&] { return h.count<wire::queue_declare_ok>() == 1; }));
  };
  {
    harness h;
    h.open();
    declare_single_active(h);
    CHECK(refusal_of(h, consume_with("x-priority", wire::field_value{std::int32_t{3}})) ==
          wire::reply_code::not_implemented);
    CHECK(h.conn.exceptions[0].sentence.find("single-active-consumer queue 'q'") != std::string::npos);
    CHECK(h.bus->requests().empty());
  }
  {
    harness h;
    h.open();
    declare_single_active(h);
    h.method(consume_with("x-priority", wire::field_value{std::int32_t{0}}));
    h.settle();
    CHECK(h.conn.exceptions.empty());
    CHECK(h.count<wire::basic_consume_ok>() == 1);
  }
}

TEST_CASE("consumer arguments that would change what is delivered are 540 NOT_IMPLEMENTED, naming the argument") {
  for (auto m : {consume_with("x-cancel-on-ha-failover", wire::field_value{true}),
                 consume_with("x-stream-offset", wire::field_value{std::string{"first"}}),
                 consume_with("x-credit", wire::field_value{wire::field_table{}})}) {
    harness h;
    h.open();
    h.declare("q");
    CHECK(refusal_of(h, m) == wire::reply_code::not_implemented);
    CHECK(h.conn.exceptions[0].sentence.find(m.arguments.entries[0].name) != std::string::npos);
    CHECK(h.bus->requests().empty());  // no consumer was started
  }
}

TEST_CASE("a consumer argument of the wrong type is RabbitMQ's 406 invalid arg, naming the queue") {
  for (auto m : {consume_with("x-priority", wire::field_value{std::string{"high"}}),
                 consume_with("x-cancel-on-ha-failover", wire::field_value{std::int32_t{1}})}) {
    harness h;
    h.open();
    h.declare("q");
    CHECK(refusal_of(h, m) == wire::reply_code::precondition_failed);
    CHECK(h.conn.exceptions[0].sentence.find("invalid arg '" + m.arguments.entries[0].name + "' for queue 'q' in vhost '/'") !=
          std::string::npos);
  }
}
