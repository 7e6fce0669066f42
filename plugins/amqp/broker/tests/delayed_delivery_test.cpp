// x-delay as the delayed-message plugin reads it (delayed_delivery.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>

#include "amqp/wire/codec.hpp"
#include "publish/delayed_delivery.hpp"

using namespace amqp;
using namespace std::chrono_literals;

namespace {

std::string with_delay(wire::field_value delay) {
  wire::basic_properties p;
  p.content_type = "text/plain";
  p.headers = wire::field_table{{{"app", wire::field_value(std::string("a"))}, {"x-delay", std::move(delay)}}};
  return wire::encode_properties(p);
}

const wire::field_value* delay_in(const std::string& octets) {
  static wire::basic_properties p;
  auto decoded = wire::decode_properties(std::span{reinterpret_cast<const std::uint8_t*>(octets.data()), octets.size()});
  REQUIRE(decoded);
  p = *decoded;
  return wire::find(*p.headers, "x-delay");
}

}  // namespace

TEST_CASE("x-delay: a positive integer of any width delays, the delivered header is its negation") {
  for (auto value : {wire::field_value(std::int16_t{1500}), wire::field_value(std::uint32_t{1500}),
                     wire::field_value(std::int64_t{1500})}) {
    auto read = broker::read_delay(with_delay(value));
    REQUIRE(read);
    REQUIRE(read->has_value());
    CHECK((*read)->delay == 1500ms);
    const auto* shown = delay_in((*read)->property_octets);
    REQUIRE(shown != nullptr);
    CHECK(wire::integer_of(*shown) == -1500);
    CHECK(std::holds_alternative<std::int32_t>(shown->value));  // the plugin's signedint
  }
}

TEST_CASE("x-delay: absent, zero or negative is no delay, the message is left as it is") {
  wire::basic_properties plain;
  CHECK(broker::read_delay(wire::encode_properties(plain))->has_value() == false);
  CHECK(broker::read_delay(with_delay(wire::field_value(std::int32_t{0})))->has_value() == false);
  CHECK(broker::read_delay(with_delay(wire::field_value(std::int32_t{-20})))->has_value() == false);
}

TEST_CASE("x-delay: a string of digits and a fraction are read as the plugin reads them") {
  CHECK((*broker::read_delay(with_delay(wire::field_value(std::string("250")))))->delay == 250ms);
  CHECK((*broker::read_delay(with_delay(wire::field_value(2.9))))->delay == 2ms);
  CHECK((*broker::read_delay(with_delay(wire::field_value(wire::decimal_value{1, 705}))))->delay == 70ms);
}

TEST_CASE("x-delay: no number, another type or past 2^32 - 1 ms is 406, naming the header") {
  for (auto bad : {wire::field_value(std::string("soon")), wire::field_value(std::string("")),
                   wire::field_value(true), wire::field_value(std::int64_t{4'294'967'296})}) {
    auto read = broker::read_delay(with_delay(bad));
    REQUIRE_FALSE(read);
    CHECK(read.error().code == wire::reply_code::precondition_failed);
    CHECK(read.error().text.starts_with("invalid x-delay header: "));
  }
  CHECK((*broker::read_delay(with_delay(wire::field_value(std::int64_t{4'294'967'295}))))->delay ==
        4'294'967'295ms);
}

TEST_CASE("an exchange's delayed messages wait under a prefix of their own, below the delayed root") {
  CHECK(broker::delayed_subject_prefix("orders") == "amqp.~delayed.orders");
  CHECK(broker::delayed_subject_prefix("amq.direct") == "amqp.~delayed.amq-direct");
}

TEST_CASE("a delayed publish is stored when due under the due root, spelled as its publish, and read back") {
  CHECK(broker::due_subject("amqp.orders.a.b") == "amqp.~due.orders.a.b");
  CHECK(broker::due_subject("amqp.amq-direct") == "amqp.~due.amq-direct");  // the empty key: no word
  CHECK(broker::due_address("amqp.~due.orders.a.b") == routing::address{"orders", "a.b"});
  CHECK(broker::due_address("amqp.~due.amq-direct") == routing::address{"amq.direct", ""});
  CHECK(broker::due_address("amqp.orders.k") == std::nullopt);
  CHECK(broker::due_address("amqp.~due.=zz.k") == std::nullopt);  // no exchange's word
}
