// Publishing on a channel: publisher confirms as the bus answers (in order, out of order,
// refusals), mandatory returns, and a refusal without confirms. Driven through broker.hpp against
// fake_bus with publishes completed by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <thread>

#include "amqp/routing/topology.hpp"
#include "harness.hpp"

using namespace amqp;
using namespace amqp::broker::test;

namespace {

bus::bus_status refused() { return bus::bus_error{"maximum payload exceeded", 0, bus::bus_errc::failed}; }

// A channel in confirm mode with queue "q", the bus answering publishes only when told.
void confirming(harness& h) {
  h.open();
  h.declare("q");
  h.bus->set_manual_publishes(true);
  h.confirm_select();
}

// basic.ack and basic.nack frames the client received, in order, as (tag, multiple, is_ack).
struct confirm_frame {
  std::uint64_t tag;
  bool multiple;
  bool ack;
  bool operator==(const confirm_frame&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const confirm_frame& f) {
    return os << (f.ack ? "ack " : "nack ") << f.tag << (f.multiple ? " multiple" : "");
  }
};

std::vector<confirm_frame> confirms(const harness& h) {
  std::vector<confirm_frame> out;
  for (const auto& f : h.conn.frames) {
    if (const auto* a = std::get_if<wire::basic_ack>(&f.method)) out.push_back({a->delivery_tag, a->multiple, true});
    if (const auto* n = std::get_if<wire::basic_nack>(&f.method)) out.push_back({n->delivery_tag, n->multiple, false});
  }
  return out;
}

}  // namespace

TEST_CASE("a publish goes to the bus on the default exchange's subject for its routing key") {
  harness h;
  h.open();
  h.declare("q");
  h.publish("", "q", "hello");
  h.settle();
  REQUIRE(h.bus->publish_count() == 1);
  CHECK(h.bus->published_subject(0) == subject_for("q"));
  CHECK(h.bus->ready(consumer_of("q")) == 1);
  CHECK(h.conn.publish_cost == 0);  // every cost handed was answered
}

TEST_CASE("under confirms a publish the bus stored is acked with its sequence number as delivery tag") {
  harness h;
  confirming(h);
  h.publish("", "q", "one");
  h.publish("", "q", "two");
  h.settle();
  CHECK(h.bus->publishes_waiting() == 2);
  CHECK(confirms(h).empty());  // nothing is confirmed before the bus answered
  CHECK(h.conn.publish_cost > 0);

  h.bus->complete_publish(0, bus::bus_ok());
  h.settle();
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}});
  h.bus->complete_publish(1, bus::bus_ok());
  h.settle();
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}, {2, false, true}});
  CHECK(h.conn.publish_cost == 0);
}

TEST_CASE("answers that arrive together are confirmed by one basic.ack with multiple") {
  harness h;
  confirming(h);
  for (int i = 0; i < 3; ++i) h.publish("", "q", "m");
  h.settle();
  for (std::size_t i = 0; i < 3; ++i) h.bus->complete_publish(i, bus::bus_ok());  // one burst
  h.settle();
  CHECK(confirms(h) == std::vector<confirm_frame>{{3, true, true}});
}

TEST_CASE("a publish the bus refuses is nacked under confirms and the channel stays open") {
  harness h;
  confirming(h);
  h.publish("", "q", "too big");
  h.publish("", "q", "fine");
  h.settle();
  h.bus->complete_publish(0, refused());
  h.settle();
  h.bus->complete_publish(1, bus::bus_ok());
  h.settle();
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, false}, {2, false, true}});
  CHECK(h.conn.exceptions.empty());
  REQUIRE(h.warnings.size() == 1);  // the client learns only "not stored"; the operator, why
  CHECK(h.warnings[0].find("is nacked: maximum payload exceeded") != std::string::npos);
  CHECK(h.bus->ready(consumer_of("q")) == 1);  // only the stored one is in the queue
}

// publish_confirms.hpp: confirms go from the low watermark up, one frame per run of equal
// outcomes, so `multiple` never confirms a sequence the wrong way.
TEST_CASE("answers out of order are confirmed from the lowest sequence up, never the wrong way") {
  harness h;
  confirming(h);
  for (int i = 0; i < 4; ++i) h.publish("", "q", "m");
  h.settle();
  h.bus->complete_publish(3, bus::bus_ok());
  h.bus->complete_publish(2, bus::bus_ok());
  h.settle();
  CHECK(confirms(h).empty());  // 1 and 2 are not answered yet
  h.bus->complete_publish(1, refused());
  h.settle();
  CHECK(confirms(h).empty());
  h.bus->complete_publish(0, bus::bus_ok());
  h.settle();
  CHECK(confirms(h) ==
        std::vector<confirm_frame>{{1, false, true}, {2, false, false}, {4, true, true}});
}

TEST_CASE("a mandatory publish nothing is bound to is returned 312 NO_ROUTE before its confirm ack") {
  harness h;
  confirming(h);
  h.publish("", "nowhere", "lost", /*mandatory=*/true);
  REQUIRE(h.run_until([&] { return confirms(h).size() == 1; }));
  h.settle();
  const auto names = h.method_names();
  REQUIRE(names.size() >= 2);
  CHECK(std::vector<std::string>(names.end() - 2, names.end()) == std::vector<std::string>{"basic.return", "basic.ack"});
  const auto returned = h.all<wire::basic_return_>();
  REQUIRE(returned.size() == 1);
  CHECK(returned[0].reply_code == 312);
  CHECK(returned[0].reply_text == "NO_ROUTE");
  CHECK(returned[0].exchange == "");
  CHECK(returned[0].routing_key == "nowhere");
  const auto& frame = *std::find_if(h.conn.frames.begin(), h.conn.frames.end(),
                                    [](const received& r) { return std::holds_alternative<wire::basic_return_>(r.method); });
  CHECK(frame.body == "lost");
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}});
  CHECK(h.bus->publish_count() == 0);  // stored nowhere
}

TEST_CASE("a mandatory publish that has a route is not returned") {
  harness h;
  confirming(h);
  h.publish("", "q", "kept", /*mandatory=*/true);
  h.settle();
  REQUIRE(h.bus->publish_count() == 1);
  h.bus->complete_publish(0, bus::bus_ok());
  h.settle();
  CHECK(h.count<wire::basic_return_>() == 0);
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}});
}

TEST_CASE("a mandatory publish to a queue another replica declared, before the mirror heard of it, is stored") {
  harness h;
  confirming(h);
  h.settle();
  routing::queue_def theirs;
  theirs.durable = true;
  // Written to the bucket as another replica writes it; the watch tells this mirror only later.
  REQUIRE(h.bus->kv_create(routing::queue_key("theirs"), routing::encode_queue(theirs)));
  h.publish("", "theirs", "routed", /*mandatory=*/true);
  h.settle();
  CHECK(h.count<wire::basic_return_>() == 0);
  REQUIRE(h.bus->publish_count() == 1);
  h.bus->complete_publish(0, bus::bus_ok());
  h.settle();
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}});
}

TEST_CASE("without confirms a publish the bus refuses closes the channel with 541 INTERNAL_ERROR") {
  harness h;
  h.open();
  h.declare("q");
  h.bus->set_manual_publishes(true);
  h.publish("", "q", "dropped");
  h.settle();
  h.bus->complete_publish(0, refused());
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].channel == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::internal_error);
  CHECK(h.conn.exceptions[0].offending == wire::basic_publish::key);
  CHECK(h.conn.exceptions[0].sentence.find("maximum payload exceeded") != std::string::npos);
  CHECK(h.conn.publish_cost == 0);
}

TEST_CASE("a publish to an exchange that does not exist closes the channel with 404 NOT_FOUND") {
  harness h;
  h.open();
  h.publish("no-such-exchange", "k", "x");
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::not_found);
  CHECK(h.conn.exceptions[0].offending == wire::basic_publish::key);
  CHECK(h.bus->publish_count() == 0);
}

TEST_CASE("closing a channel with publishes in flight releases their cost and sends no confirm later") {
  harness h;
  confirming(h);
  h.publish("", "q", "m");
  h.settle();
  CHECK(h.conn.publish_cost > 0);
  h.close();
  CHECK(h.conn.publish_cost == 0);
  h.bus->complete_publish(0, bus::bus_ok());
  h.settle();
  CHECK(confirms(h).empty());
}

TEST_CASE("nacks are reported once a second at most, counting those left unreported") {
  harness h;
  confirming(h);
  for (int i = 0; i < 3; ++i) h.publish("", "q", "m");
  h.settle();
  for (std::size_t i = 0; i < 3; ++i) h.bus->complete_publish(i, refused());
  h.settle();
  REQUIRE(h.warnings.size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1010));
  h.publish("", "q", "m");
  h.settle();
  h.bus->complete_publish(3, refused());
  h.settle();
  REQUIRE(h.warnings.size() == 2);
  CHECK(h.warnings[1].find("(and 2 more since the last report)") != std::string::npos);
}

namespace {

// A delayed-message exchange "dx" routing as direct, with queue "q" bound to it by "k".
void delayed_exchange(harness& h) {
  wire::field_table arguments{{{"x-delayed-type", wire::field_value(std::string("direct"))}}};
  h.method(wire::exchange_declare{0, "dx", "x-delayed-message", false, true, false, false, false, arguments});
  h.method(wire::queue_bind{0, "q", "dx", "k", false, {}});
  h.settle();
  REQUIRE(h.count<wire::exchange_declare_ok>() == 1);
  REQUIRE(h.count<wire::queue_bind_ok>() == 1);
}

wire::basic_properties delayed_by(std::int32_t ms) {
  wire::basic_properties p;
  p.headers = wire::field_table{{{"x-delay", wire::field_value(ms)}}};
  return p;
}

}  // namespace

TEST_CASE("a delayed publish is stored as a schedule and confirmed, its queue has it once due and routed") {
  harness h;
  confirming(h);
  h.bus->set_manual_publishes(false);
  delayed_exchange(h);
  const auto before = std::chrono::system_clock::now();
  h.publish_with(delayed_by(1500), "dx", "k", "later");
  REQUIRE(h.run_until([&] { return confirms(h).size() == 1; }));
  CHECK(confirms(h) == std::vector<confirm_frame>{{1, false, true}});
  CHECK(h.bus->publish_count() == 0);  // not stored on its subject yet
  REQUIRE(h.bus->delayed().size() == 1);
  const auto& d = h.bus->delayed()[0];
  CHECK(d.subject == "amqp.~due.dx.k");
  CHECK(d.schedule_prefix == "amqp.~delayed.dx");
  CHECK(d.at >= before + std::chrono::milliseconds(1500));
  CHECK(d.at <= std::chrono::system_clock::now() + std::chrono::milliseconds(1500));
  CHECK(h.bus->ready(consumer_of("q")) == 0);
  h.bus->fire_delayed(0);
  REQUIRE(h.run_until([&] { return h.bus->ready(consumer_of("q")) == 1; }));
  CHECK(h.bus->published_subject(0) == subject_for("q"));
  CHECK(h.bus->ready(bus::due_consumer) == 0);
  CHECK(h.bus->unsettled(bus::due_consumer) == 0);  // routed, then acked
  CHECK(h.conn.publish_cost == 0);
}

TEST_CASE("a due message is routed by the bindings of that moment, and one whose copy is refused is routed again") {
  harness h;
  h.open();
  h.declare("q");
  delayed_exchange(h);
  h.publish_with(delayed_by(500), "dx", "k", "later");
  h.settle();
  h.declare("q2");
  h.method(wire::queue_bind{0, "q2", "dx", "k", false, {}});
  h.settle();
  h.bus->set_manual_publishes(true);
  h.bus->fire_delayed(0);
  REQUIRE(h.run_until([&] { return h.bus->publishes_waiting() == 2; }));
  h.bus->complete_publish(0, bus::bus_ok());
  h.bus->complete_publish(1, bus::bus_error{"publish: Timeout", 0, bus::bus_errc::timeout});
  // Handed back a second later (past one run_until's bound) and routed again: the copy already
  // stored is not stored twice.
  bool routed_again = false;
  for (int i = 0; i < 3 && !routed_again; ++i) routed_again = h.run_until([&] { return h.bus->publishes_waiting() == 2; });
  REQUIRE(routed_again);
  h.bus->complete_publish(2, bus::bus_ok());
  h.bus->complete_publish(3, bus::bus_ok());
  REQUIRE(h.run_until([&] { return h.bus->unsettled(bus::due_consumer) == 0; }));
  CHECK(h.bus->ready(consumer_of("q")) == 1);
  CHECK(h.bus->ready(consumer_of("q2")) == 1);
  CHECK(h.bus->settlements_of(settlement::kind::nak).size() == 1);
}

TEST_CASE("a delayed exchange routes a publish without x-delay at once, mandatory returns a delayed one at once") {
  harness h;
  h.open();
  h.declare("q");
  delayed_exchange(h);
  h.publish("dx", "k", "now");
  h.publish_with(delayed_by(500), "dx", "k", "later", /*mandatory=*/true);
  h.settle();
  CHECK(h.bus->publish_count() == 1);
  CHECK(h.bus->published_subject(0) == subject_for("q"));
  CHECK(h.bus->delayed().size() == 1);
  const auto returned = h.all<wire::basic_return_>();
  REQUIRE(returned.size() == 1);
  CHECK(returned[0].reply_code == 312);
}

TEST_CASE("deleting a delayed exchange drops the messages waiting in it") {
  harness h;
  h.open();
  h.declare("q");
  delayed_exchange(h);
  h.publish_with(delayed_by(500), "dx", "k", "dropped");
  h.settle();
  h.method(wire::exchange_delete_{0, "dx", false, false});
  h.settle();
  REQUIRE(h.count<wire::exchange_delete_ok>() == 1);
  REQUIRE(h.bus->delayed().size() == 1);
  CHECK(h.bus->delayed()[0].purged);
  h.bus->fire_delayed(0);
  CHECK(h.bus->ready(consumer_of("q")) == 0);
}

TEST_CASE("a publish whose exchange subject the user may not publish is refused 403, nothing stored") {
  harness h;
  confirming(h);
  h.method(wire::exchange_declare{0, "secret", "direct", false, true, false, false, false, {}});
  h.method(wire::queue_bind{0, "q", "secret", "k", false, {}});
  h.settle();
  REQUIRE(h.count<wire::queue_bind_ok>() == 1);
  h.bus->deny_publishing("amqp.secret.>");
  h.publish("", "q", "allowed");  // another exchange's subject: stored
  h.publish("secret", "k", "refused");
  h.settle();
  CHECK(h.bus->publish_count() == 1);
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::access_refused);
  CHECK(h.conn.exceptions[0].offending == wire::basic_publish::key);
  CHECK(h.conn.exceptions[0].sentence.find("the bus did not store the message published to amqp.secret.k: ") == 0);
  CHECK(h.conn.exceptions[0].sentence.find("user 'fake' publish to amqp.secret.k") != std::string::npos);
}
