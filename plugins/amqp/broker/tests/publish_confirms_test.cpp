// Unit tests of the two pure pieces of the messaging path: confirm coalescing and the
// redelivery header.
#include <doctest/doctest.h>

#include <span>

#include "deliver/delivery.hpp"
#include "publish/publish_confirms.hpp"

using amqp::broker::publish_confirms;
using outcome = publish_confirms::outcome;
using confirm = publish_confirms::confirm;

namespace {
std::vector<std::uint64_t> issue(publish_confirms& c, int n) {
  std::vector<std::uint64_t> seqs;
  for (int i = 0; i < n; ++i) seqs.push_back(c.next());
  return seqs;
}
}  // namespace

TEST_CASE("confirms in order are sent one by one as the bus answers") {
  publish_confirms c;
  c.select();
  issue(c, 2);
  CHECK(c.record(1, outcome::ack) == std::vector<confirm>{{outcome::ack, 1, false}});
  CHECK(c.record(2, outcome::ack) == std::vector<confirm>{{outcome::ack, 2, false}});
  CHECK(c.unconfirmed() == 0);
}

TEST_CASE("answers above a gap wait, then go out as one multiple ack") {
  publish_confirms c;
  c.select();
  issue(c, 4);
  CHECK(c.record(3, outcome::ack).empty());
  CHECK(c.record(2, outcome::ack).empty());
  CHECK(c.record(1, outcome::ack) == std::vector<confirm>{{outcome::ack, 3, true}});
  CHECK(c.unconfirmed() == 1);
  CHECK(c.record(4, outcome::ack) == std::vector<confirm>{{outcome::ack, 4, false}});
}

TEST_CASE("staged confirms of one burst merge per outcome and keep their order") {
  publish_confirms c;
  c.select();
  issue(c, 4);
  CHECK(c.stage(c.record(1, outcome::ack)));  // the first stage asks for a flush
  CHECK_FALSE(c.stage(c.record(2, outcome::ack)));
  CHECK_FALSE(c.stage(c.record(3, outcome::nack)));
  CHECK_FALSE(c.stage(c.record(4, outcome::ack)));
  CHECK(c.take_staged() == std::vector<confirm>{{outcome::ack, 2, true}, {outcome::nack, 3, false},
                                              {outcome::ack, 4, false}});
  CHECK(c.take_staged().empty());
  CHECK(c.unconfirmed() == 0);
  CHECK_FALSE(c.stage({}));  // nothing to send: no flush
}

TEST_CASE("a nack in the middle splits the run: multiple never covers a different outcome") {
  publish_confirms c;
  c.select();
  issue(c, 5);
  CHECK(c.record(5, outcome::ack).empty());
  CHECK(c.record(4, outcome::ack).empty());
  CHECK(c.record(3, outcome::nack).empty());
  CHECK(c.record(2, outcome::ack).empty());
  CHECK(c.record(1, outcome::ack) == std::vector<confirm>{{outcome::ack, 2, true},
                                                          {outcome::nack, 3, false},
                                                          {outcome::ack, 5, true}});
}

TEST_CASE("a duplicate or foreign settlement is ignored") {
  publish_confirms c;
  c.select();
  issue(c, 1);
  CHECK(c.record(1, outcome::ack).size() == 1);
  CHECK(c.record(1, outcome::nack).empty());
  CHECK(c.record(7, outcome::ack).empty());
}

using amqp::broker::delivery_count;

TEST_CASE("a first delivery, and a classic queue's redelivery, pass the property octets verbatim") {
  const std::string octets("\x80\x00\x0a", 3);  // content-type present, "text/plain" follows
  for (auto [delivered, shown] : {std::pair{1, delivery_count::on_redelivery}, std::pair{1, delivery_count::never},
                                  std::pair{4, delivery_count::never}}) {
    CAPTURE(delivered);
    auto out = amqp::broker::delivered_properties(octets, delivered, shown);
    REQUIRE(out.ok());
    CHECK(*out == octets);
    auto none = amqp::broker::delivered_properties("", delivered, shown);
    REQUIRE(none.ok());
    CHECK(*none == std::string(2, '\0'));
  }
}

TEST_CASE("which deliveries count: a quorum queue's redeliveries and every get-ok, a classic queue's none") {
  using amqp::routing::queue_type;
  CHECK(amqp::broker::delivery_count_of(queue_type::classic, false) == delivery_count::never);
  CHECK(amqp::broker::delivery_count_of(queue_type::classic, true) == delivery_count::never);
  CHECK(amqp::broker::delivery_count_of(queue_type::quorum, false) == delivery_count::on_redelivery);
  CHECK(amqp::broker::delivery_count_of(queue_type::quorum, true) == delivery_count::always);
  // basic.get-ok from a quorum queue says 0 the first time, as RabbitMQ 3.10's does.
  auto out = amqp::broker::delivered_properties("", 1, delivery_count::always);
  REQUIRE(out.ok());
  auto decoded = amqp::wire::decode_properties(
      std::span(reinterpret_cast<const std::uint8_t*>(out->data()), out->size()));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->headers);
  const auto* count = amqp::wire::find(*decoded->headers, "x-delivery-count");
  REQUIRE(count);
  CHECK(*count == amqp::wire::field_value(std::int64_t{0}));
}

TEST_CASE("a quorum queue's redelivery carries x-delivery-count = delivered - 1 beside the publisher's headers") {
  amqp::wire::basic_properties props;
  props.content_type = "text/plain";
  props.headers.emplace();
  props.headers->entries.push_back({"mine", amqp::wire::field_value(std::int32_t{5})});
  props.headers->entries.push_back({"x-delivery-count", amqp::wire::field_value(std::int64_t{99})});
  const std::string octets = amqp::wire::encode_properties(props);
  auto out = amqp::broker::delivered_properties(octets, 3, delivery_count::on_redelivery);
  REQUIRE(out.ok());
  auto decoded = amqp::wire::decode_properties(
      std::span(reinterpret_cast<const std::uint8_t*>(out->data()), out->size()));
  REQUIRE(decoded.ok());
  CHECK(decoded->content_type == "text/plain");
  REQUIRE(decoded->headers);
  const auto* mine = amqp::wire::find(*decoded->headers, "mine");
  REQUIRE(mine);
  CHECK(*mine == amqp::wire::field_value(std::int32_t{5}));
  const auto* count = amqp::wire::find(*decoded->headers, "x-delivery-count");
  REQUIRE(count);
  CHECK(*count == amqp::wire::field_value(std::int64_t{2}));
  CHECK(decoded->headers->entries.size() == 2);  // the forged count was replaced, not doubled
}

TEST_CASE("a quorum queue's redelivery of a message without properties gets just the header") {
  auto out = amqp::broker::delivered_properties("", 2, delivery_count::on_redelivery);
  REQUIRE(out.ok());
  auto decoded = amqp::wire::decode_properties(
      std::span(reinterpret_cast<const std::uint8_t*>(out->data()), out->size()));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->headers);
  CHECK(decoded->headers->entries.size() == 1);
}
