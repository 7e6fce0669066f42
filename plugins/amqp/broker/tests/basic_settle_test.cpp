// Settlement on a channel: basic.ack / nack / reject (multiple included), unknown tags,
// basic.recover, the order requeued messages come back in, and what closing a channel does with
// the deliveries it still holds. Driven through broker.hpp against fake_bus.
#include <doctest/doctest.h>

#include <stdexcept>

#include "harness.hpp"

using namespace amqp;
using namespace amqp::broker::test;
using kind = settlement::kind;

namespace {

std::vector<std::uint64_t> seqs(const std::vector<settlement>& done) {
  std::vector<std::uint64_t> out;
  for (const auto& s : done) out.push_back(s.seq);
  return out;
}

std::vector<kind> kinds(const std::vector<settlement>& done) {
  std::vector<kind> out;
  for (const auto& s : done) out.push_back(s.what);
  return out;
}

wire::field_table quorum_queue() {
  wire::field_table arguments;
  arguments.entries.push_back({"x-queue-type", wire::field_value(std::string("quorum"))});
  return arguments;
}

// A channel with one consumer "c" on queue "q" (classic, or quorum with `arguments`) that has
// received `n` messages (bodies m1..mn, tags 1..n, stream sequences 1..n).
void consuming(harness& h, int n, wire::field_table arguments = {}) {
  h.open();
  h.declare("q", 1, std::move(arguments));
  h.fill("q", n);
  h.consume("q", "c");
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == static_cast<std::size_t>(n); }));
  for (int i = 0; i < n; ++i) REQUIRE(h.delivered_tags()[static_cast<std::size_t>(i)] == static_cast<std::uint64_t>(i + 1));
}

std::int64_t delivery_count_header(const received& r) {
  REQUIRE(r.properties);
  REQUIRE(r.properties->headers);
  const auto* v = wire::find(*r.properties->headers, "x-delivery-count");
  REQUIRE(v);
  auto n = wire::integer_of(*v);
  REQUIRE(n);
  return *n;
}

const received& delivery(const harness& h, std::uint64_t tag) {
  for (const auto& f : h.conn.frames)
    if (const auto* d = std::get_if<wire::basic_deliver>(&f.method); d && d->delivery_tag == tag) return f;
  FAIL("no basic.deliver with tag " << tag);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("basic.ack of one tag acks exactly that message on the bus") {
  harness h;
  consuming(h, 3);
  h.method(wire::basic_ack{2, false});
  h.settle();
  CHECK(h.bus->settlements().size() == 1);
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::ack});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{2});
  CHECK(h.bus->unsettled(consumer_of("q")) == 2);
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("what the vhost's connections hold counts once per bus client, and leaves it when settled") {
  harness h;
  consuming(h, 3);
  using held = std::map<std::string, std::uint64_t>;
  CHECK(broker::held_of(*h.b) == held{{consumer_of("q"), 3}});  // the connection's client is the vhost's own
  h.method(wire::basic_ack{2, false});
  h.settle();
  CHECK(broker::held_of(*h.b) == held{{consumer_of("q"), 2}});
}

TEST_CASE("basic.ack with multiple acks every outstanding tag up to and including N, and no other") {
  harness h;
  consuming(h, 4);
  h.method(wire::basic_ack{1, false});
  h.method(wire::basic_ack{3, true});  // tag 1 is settled already: 2 and 3 go
  h.settle();
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(h.bus->settlements_of(kind::ack).size() == 3);
  CHECK(h.bus->unsettled(consumer_of("q")) == 1);  // tag 4 is still the client's

  h.method(wire::basic_ack{0, true});  // 0 with multiple: everything outstanding
  h.settle();
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(h.bus->unsettled(consumer_of("q")) == 0);
  CHECK(h.conn.exceptions.empty());
}

TEST_CASE("basic.ack with multiple when nothing is outstanding is not an error") {
  harness h;
  consuming(h, 1);
  h.method(wire::basic_ack{1, false});
  h.method(wire::basic_ack{1, true});  // covers no outstanding tag
  h.settle();
  CHECK(h.bus->settlements().size() == 1);
  CHECK(h.conn.exceptions.empty());
  CHECK(h.is_open(1));
}

TEST_CASE("an unknown delivery tag on basic.ack closes the channel with 406 PRECONDITION_FAILED naming the tag") {
  harness h;
  consuming(h, 2);
  h.method(wire::basic_ack{7, false});
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  const auto& e = h.conn.exceptions.front();
  CHECK(e.channel == 1);
  CHECK(e.code == wire::reply_code::precondition_failed);
  CHECK(e.sentence.starts_with("unknown delivery tag 7"));  // the session adds "PRECONDITION_FAILED - "
  CHECK(e.offending == wire::basic_ack::key);
  CHECK_FALSE(h.is_open(1));
  // The channel's close requeues what it held: nothing was acked.
  CHECK(h.bus->settlements_of(kind::ack).empty());
  CHECK(seqs(h.bus->settlements_of(kind::nak)) == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("a tag acknowledged twice is unknown the second time") {
  harness h;
  consuming(h, 2);
  h.method(wire::basic_ack{1, false});
  h.method(wire::basic_ack{1, false});
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::precondition_failed);
  CHECK(h.conn.exceptions[0].sentence.find("unknown delivery tag 1") != std::string::npos);
  CHECK(seqs(h.bus->settlements_of(kind::ack)) == std::vector<std::uint64_t>{1});
}

TEST_CASE("an unknown tag on basic.nack or basic.reject names nack or reject as the offending method") {
  harness h;
  consuming(h, 1);
  wire::method_key expected;
  SUBCASE("nack") {
    h.method(wire::basic_nack{9, false, true});
    expected = wire::basic_nack::key;
  }
  SUBCASE("reject") {
    h.method(wire::basic_reject{9, true});
    expected = wire::basic_reject::key;
  }
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::precondition_failed);
  CHECK(h.conn.exceptions[0].offending == expected);
}

TEST_CASE("basic.reject with requeue naks the message and a quorum queue's redelivery carries x-delivery-count") {
  harness h;
  consuming(h, 2, quorum_queue());
  h.method(wire::basic_reject{1, true});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 3; }));
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::nak});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1});
  const auto again = h.all<wire::basic_deliver>().back();
  CHECK(again.delivery_tag == 3);  // a new tag: tags are never reused on a channel
  CHECK(again.redelivered);
  CHECK(h.delivered_bodies().back() == "m1");
  CHECK(delivery_count_header(delivery(h, 3)) == 1);
  CHECK_FALSE(delivery(h, 1).properties->headers);  // a first delivery passes the octets verbatim
}

TEST_CASE("a classic queue's redelivery carries no x-delivery-count, as RabbitMQ's classic queues") {
  harness h;
  consuming(h, 1);
  h.method(wire::basic_reject{1, true});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 2; }));
  CHECK(h.all<wire::basic_deliver>().back().redelivered);
  CHECK_FALSE(delivery(h, 2).properties->headers);  // the publisher's octets, verbatim
}

TEST_CASE("basic.get from a quorum queue carries x-delivery-count from the first get (0), from a classic one never") {
  for (const bool quorum : {false, true}) {
    CAPTURE(quorum);
    harness h;
    h.open();
    h.declare("q", 1, quorum ? quorum_queue() : wire::field_table{});
    h.fill("q", 1);
    for (std::size_t n = 1; n <= 2; ++n) {
      h.method(wire::basic_get{0, "q", false});
      REQUIRE(h.run_until([&] { return h.count<wire::basic_get_ok>() == n; }));
      const received* got = nullptr;
      for (const auto& f : h.conn.frames)
        if (std::holds_alternative<wire::basic_get_ok>(f.method)) got = &f;
      REQUIRE(got);
      if (quorum) {
        CHECK(delivery_count_header(*got) == static_cast<std::int64_t>(n - 1));
      } else {
        CHECK_FALSE(got->properties->headers);
      }
      h.method(wire::basic_reject{n, true});
      h.settle();
    }
  }
}

TEST_CASE("basic.reject and basic.nack without requeue terminate the message on the bus (no dead-letter exchange)") {
  harness h;
  consuming(h, 3);
  h.method(wire::basic_reject{1, false});
  h.method(wire::basic_nack{3, true, false});  // multiple: tags 2 and 3
  h.settle();
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::term, kind::term, kind::term});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(h.count<wire::basic_deliver>() == 3);  // nothing comes back
  CHECK(h.bus->ready(consumer_of("q")) == 0);
}

// A queue with a dead-letter exchange reads a rejected message back from the stream to copy it.
// Not found there does not mean gone: a stream leader back from a full disk may lack what
// another node's consumer delivered (the soak lost a rejected message so). It goes back to the
// queue, and a later reject dead-letters it.
TEST_CASE("a rejected message the stream cannot read back goes back to its queue, not away") {
  harness h;
  wire::field_table arguments;
  arguments.entries.push_back({"x-dead-letter-exchange", wire::field_value(std::string())});
  arguments.entries.push_back({"x-dead-letter-routing-key", wire::field_value(std::string("dlq"))});
  consuming(h, 1, arguments);
  h.declare("dlq");
  h.bus->hide_from_reads(1);
  h.method(wire::basic_reject{1, false});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 2; }));
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::nak});
  CHECK(h.all<wire::basic_deliver>().back().redelivered);
  REQUIRE(h.warnings.size() == 1);
  CHECK(h.warnings[0].find("the message goes back to the queue") != std::string::npos);
  h.bus->hide_from_reads(1, false);
  h.method(wire::basic_reject{2, false});
  REQUIRE(h.run_until([&] { return h.bus->ready(consumer_of("dlq")) == 1; }));
  CHECK(h.bus->ready(consumer_of("q")) == 0);
}

TEST_CASE("basic.nack with multiple and requeue naks every tag up to N and they are redelivered") {
  harness h;
  consuming(h, 3);
  h.method(wire::basic_nack{2, true, true});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 5; }));
  h.settle();
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::nak, kind::nak});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1, 2});
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3", "m1", "m2"});
  CHECK(h.count<wire::basic_deliver>() == 5);
}

// basic.hpp: "What is requeued at once is NAK'ed in stream order: the bus redelivers in NAK
// order, ahead of what it never delivered." Tag order and stream order differ once a message
// came back: the NAKs follow the stream.
TEST_CASE("requeued deliveries are nacked on the bus in stream order, not tag order, and come back in that order") {
  harness h;
  consuming(h, 3, quorum_queue());                           // tags 1,2,3 = seq 1,2,3
  h.method(wire::basic_reject{1, true});     // seq 1 comes back as tag 4
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 4; }));
  h.method(wire::basic_nack{0, true, true});  // outstanding: tag 2 (seq 2), 3 (seq 3), 4 (seq 1)
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 7; }));
  h.settle();
  const auto naks = h.bus->settlements_of(kind::nak);
  REQUIRE(naks.size() == 4);
  CHECK(seqs(naks) == std::vector<std::uint64_t>{1, 1, 2, 3});  // the reject's, then stream order
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3", "m1", "m1", "m2", "m3"});
  CHECK(delivery_count_header(delivery(h, 5)) == 2);  // m1's third delivery
}

TEST_CASE("basic.recover naks every outstanding delivery, answers recover-ok, and the old tags are gone") {
  harness h;
  consuming(h, 3);
  h.method(wire::basic_ack{2, false});
  h.method(wire::basic_recover{true});
  REQUIRE(h.run_until([&] { return h.count<wire::basic_recover_ok>() == 1; }));
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>() == 5; }));
  h.settle();
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::ack, kind::nak, kind::nak});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{2, 1, 3});
  const auto delivers = h.all<wire::basic_deliver>();
  CHECK(delivers[3].redelivered);
  CHECK(delivers[4].redelivered);
  CHECK(h.delivered_bodies() == std::vector<std::string>{"m1", "m2", "m3", "m1", "m3"});

  h.method(wire::basic_ack{1, false});  // recovered: no longer the client's to settle
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::precondition_failed);
}

TEST_CASE("basic.recover-async is refused with 540 NOT_IMPLEMENTED") {
  harness h;
  consuming(h, 1);
  h.method(wire::basic_recover_async{true});
  h.settle();
  REQUIRE(h.conn.exceptions.size() == 1);
  CHECK(h.conn.exceptions[0].code == wire::reply_code::not_implemented);
  CHECK(h.conn.exceptions[0].offending == wire::basic_recover_async::key);
}

TEST_CASE("closing a channel naks its outstanding deliveries at once and stops its consumer") {
  harness h;
  consuming(h, 3);
  h.method(wire::basic_ack{1, false});
  h.settle();
  h.close();
  h.settle();
  CHECK(kinds(h.bus->settlements()) == std::vector{kind::ack, kind::nak, kind::nak});
  CHECK(seqs(h.bus->settlements()) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(h.bus->unsettled(consumer_of("q")) == 0);
  CHECK(h.bus->ready(consumer_of("q")) == 2);
  CHECK(h.bus->open_requests(consumer_of("q")) == 0);  // nothing more is asked for
  h.fill("q", 1, 4);
  h.settle();
  CHECK(h.count<wire::basic_deliver>() == 3);  // nothing reaches a closed channel
  CHECK(h.bus->ready(consumer_of("q")) == 3);

  // Another channel's consumer gets the requeued messages first, redelivered, then the new one.
  h.open(2);
  h.consume("q", "c2", false, 2);
  REQUIRE(h.run_until([&] { return h.count<wire::basic_deliver>(2) == 3; }));
  CHECK(h.delivered_bodies(2) == std::vector<std::string>{"m2", "m3", "m4"});
  const auto delivers = h.all<wire::basic_deliver>(2);
  CHECK(delivers[0].redelivered);
  CHECK_FALSE(delivers[2].redelivered);
  CHECK(h.delivered_tags(2) == std::vector<std::uint64_t>{1, 2, 3});  // tags are per channel
}
