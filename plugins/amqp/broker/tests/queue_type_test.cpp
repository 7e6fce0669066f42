// x-queue-type through queue.declare: what RabbitMQ 3.10 refuses a quorum queue, the texts of a
// redeclaration with another type, and a quorum queue's default delivery limit (RabbitMQ 4's 20).
// Driven through broker.hpp against fake_bus; the texts are the ones a private RabbitMQ 3.10
// answered (tests/amqp_messaging/test_quorum_rabbitmq.py compares both brokers).
#include <doctest/doctest.h>

#include <string>

#include "amqp/routing/topology.hpp"
#include "harness.hpp"

using namespace amqp;
using namespace amqp::broker::test;

namespace {

wire::field_table args(std::initializer_list<std::pair<const char*, wire::field_value>> entries) {
  wire::field_table t;
  for (const auto& [name, value] : entries) t.entries.push_back({name, value});
  return t;
}

wire::field_value text(const char* s) { return wire::field_value(std::string(s)); }

wire::field_table quorum() { return args({{"x-queue-type", text("quorum")}}); }

struct declaration {
  std::string queue = "q";
  bool durable = true;
  bool exclusive = false;
  bool auto_delete = false;
  wire::field_table arguments;
};

// The declaration's answer on a fresh channel `id`: "ok", or "<code> <sentence>" of the exception.
std::string answer(harness& h, const declaration& d, std::uint16_t id) {
  h.open(id);
  const auto exceptions = h.conn.exceptions.size();
  wire::queue_declare m;
  m.queue = d.queue;
  m.durable = d.durable;
  m.exclusive = d.exclusive;
  m.auto_delete = d.auto_delete;
  m.arguments = d.arguments;
  h.method(m, id);
  REQUIRE(h.run_until([&] { return h.count<wire::queue_declare_ok>(id) > 0 || h.conn.exceptions.size() > exceptions; }));
  if (h.conn.exceptions.size() == exceptions) return "ok";
  const auto& e = h.conn.exceptions.back();
  return std::to_string(static_cast<int>(e.code)) + " " + e.sentence;
}

}  // namespace

TEST_CASE("a new quorum queue is refused what RabbitMQ 3.10 refuses, with its texts and in its order") {
  harness h;
  std::uint16_t id = 0;
  auto refused = [&](declaration d) { return answer(h, d, ++id); };
  CHECK(refused({"q1", false, false, false, quorum()}) ==
        "406 invalid property 'non-durable' for queue 'q1' in vhost '/'");
  CHECK(refused({"q2", true, true, false, quorum()}) ==
        "406 invalid property 'exclusive-owner' for queue 'q2' in vhost '/'");
  CHECK(refused({"q3", true, false, true, quorum()}) == "406 invalid property 'auto-delete' for queue 'q3' in vhost '/'");
  CHECK(refused({"q4", false, true, true, quorum()}) == "406 invalid property 'auto-delete' for queue 'q4' in vhost '/'");
  CHECK(refused({"q5", false, true, false, quorum()}) ==
        "406 invalid property 'exclusive-owner' for queue 'q5' in vhost '/'");
  CHECK(refused({"", true, false, false, quorum()}) ==
        "406 Cannot declare a server-named queue for type rabbit_quorum_queue");
  for (const char* name : {"x-max-priority", "x-queue-mode", "x-queue-master-locator", "x-queue-version"}) {
    CAPTURE(name);
    auto a = quorum();
    a.entries.push_back({name, wire::field_value(std::int32_t{2})});
    CHECK(refused({"qa", false, false, false, a}) == std::string("406 invalid arg '") + name +
                                                      "' for queue 'qa' in vhost '/' of queue type rabbit_quorum_queue");
  }
  // A classic queue keeps the adaptor's own 540 for x-max-priority, and may be all three.
  CHECK(refused({"c1", true, false, false, args({{"x-max-priority", wire::field_value(std::int32_t{2})}})}).find("540 ") == 0);
  CHECK(refused({"c2", false, true, true, args({{"x-queue-type", text("classic")}})}) == "ok");
  CHECK(refused({"q6", true, false, false, quorum()}) == "ok");
}

TEST_CASE("a redeclaration with another x-queue-type is 406 inequivalent arg, worded as RabbitMQ 3.10 words it") {
  harness h;
  std::uint16_t id = 0;
  auto redeclared = [&](const char* queue, wire::field_table arguments) {
    return answer(h, {queue, true, false, false, std::move(arguments)}, ++id);
  };
  const auto classic = args({{"x-queue-type", text("classic")}});
  REQUIRE(redeclared("plain", {}) == "ok");
  CHECK(redeclared("plain", classic) == "ok");  // no type and 'classic' are one type
  CHECK(redeclared("plain", quorum()) == "406 inequivalent arg 'x-queue-type' for queue 'plain' in vhost '/': "
                                         "received the value 'quorum' of type 'longstr' but current is none");
  REQUIRE(redeclared("named", classic) == "ok");
  CHECK(redeclared("named", {}) == "ok");
  CHECK(redeclared("named", quorum()) ==
        "406 inequivalent arg 'x-queue-type' for queue 'named' in vhost '/': received 'quorum' but current is 'classic'");
  REQUIRE(redeclared("qq", quorum()) == "ok");
  CHECK(redeclared("qq", quorum()) == "ok");
  CHECK(redeclared("qq", {}) == "406 inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': "
                                "received none but current is the value 'quorum' of type 'longstr'");
  CHECK(redeclared("qq", classic) ==
        "406 inequivalent arg 'x-queue-type' for queue 'qq' in vhost '/': received 'classic' but current is 'quorum'");
  // The default delivery limit is not a declared one: redeclaring with 20 is a different argument.
  auto twenty = quorum();
  twenty.entries.push_back({"x-delivery-limit", wire::field_value(std::int32_t{20})});
  CHECK(redeclared("qq", twenty).find("406 inequivalent arg 'x-delivery-limit' for queue 'qq'") == 0);
  // An existing quorum queue is compared, not refused as a new one: durable first, as RabbitMQ.
  CHECK(answer(h, {"qq", false, false, false, quorum()}, ++id) ==
        "406 inequivalent arg 'durable' for queue 'qq' in vhost '/': received 'false' but current is 'true'");
}

TEST_CASE("a quorum queue without a delivery limit drops a message returned more than 20 times, a classic one never") {
  for (const bool is_quorum : {false, true}) {
    CAPTURE(is_quorum);
    harness h;
    h.open();
    h.declare("q", 1, is_quorum ? quorum() : wire::field_table{});
    h.fill("q", 1);
    h.consume("q", "c");
    const std::size_t rounds = amqp::routing::quorum_default_delivery_limit + 5;
    for (std::size_t n = 1; n <= rounds; ++n) {
      if (!h.run_until([&] { return h.count<wire::basic_deliver>() == n; })) break;
      h.method(wire::basic_reject{n, true});
    }
    h.settle();
    // Delivered once, then returned and redelivered 20 times; the 21st return is its last. A
    // classic queue's comes back after every return, the last one too.
    const auto expected = is_quorum ? amqp::routing::quorum_default_delivery_limit + 1 : rounds + 1;
    CHECK(h.count<wire::basic_deliver>() == expected);
    if (is_quorum) CHECK(h.bus->settlements_of(settlement::kind::term).size() == 1);
  }
}
