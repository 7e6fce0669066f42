#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>

#include "amqp/wire/codec.hpp"
#include "publish/sender_selected.hpp"

using namespace amqp;

namespace {

wire::field_array keys(std::initializer_list<wire::field_value> items) {
  wire::field_array a;
  a.items.assign(items.begin(), items.end());
  return a;
}

std::string octets(std::initializer_list<wire::table_entry> headers) {
  wire::basic_properties p;
  p.content_type = "text/plain";
  p.headers = wire::field_table{std::vector<wire::table_entry>(headers)};
  return wire::encode_properties(p);
}

wire::basic_properties decoded(const std::string& octets) {
  auto p = wire::decode_properties(std::span{reinterpret_cast<const std::uint8_t*>(octets.data()), octets.size()});
  REQUIRE(p);
  return *p;
}

}  // namespace

TEST_CASE("sender-selected: a publish without CC or BCC is left as it is") {
  const auto in = octets({{"app", wire::field_value{std::string("x")}}});
  auto octets_after = in;
  auto out = broker::read_sender_selected(octets_after);
  REQUIRE(out);
  CHECK(out->empty());
  CHECK(octets_after == in);
}

TEST_CASE("sender-selected: CC and BCC keys, in order, BCC leaves the message, CC and the rest stay") {
  auto in = octets({{"CC", keys({std::string("b"), std::string("c.x")})},
                    {"BCC", keys({std::string("d")})},
                    {"keep", wire::field_value{std::int32_t{1}}}});
  auto out = broker::read_sender_selected(in);
  REQUIRE(out);
  CHECK(*out == std::vector<std::string>{"b", "c.x", "d"});
  const auto props = decoded(in);
  REQUIRE(props.headers);
  CHECK(wire::find(*props.headers, "BCC") == nullptr);
  REQUIRE(wire::find(*props.headers, "CC") != nullptr);
  CHECK(wire::find(*props.headers, "keep") != nullptr);
  CHECK(props.content_type == "text/plain");
}

TEST_CASE("sender-selected: a BCC alone leaves an empty headers table, as RabbitMQ delivers it") {
  auto in = octets({{"BCC", keys({std::string("b")})}});
  auto out = broker::read_sender_selected(in);
  REQUIRE(out);
  CHECK(*out == std::vector<std::string>{"b"});
  const auto props = decoded(in);
  REQUIRE(props.headers);
  CHECK(props.headers->entries.empty());
}

TEST_CASE("sender-selected: an element that is not a string is skipped, a header that is not an array is refused") {
  auto mixed = octets({{"CC", keys({std::string("b"), wire::field_value{std::int32_t{5}}})}});
  auto skipped = broker::read_sender_selected(mixed);
  REQUIRE(skipped);
  CHECK(*skipped == std::vector<std::string>{"b"});

  const auto not_an_array = octets({{"CC", wire::field_value{std::string("b")}}});
  auto left = not_an_array;
  auto refused = broker::read_sender_selected(left);
  REQUIRE_FALSE(refused);
  CHECK(left == not_an_array);
  CHECK(refused.error().code == wire::reply_code::precondition_failed);
  CHECK(refused.error().text == "invalid message: {unacceptable_type_in_header,\"CC\",longstr}");
  CHECK_FALSE(refused.error().remedy.empty());

  auto bcc_number = octets({{"BCC", wire::field_value{std::int32_t{1}}}});
  auto number = broker::read_sender_selected(bcc_number);
  REQUIRE_FALSE(number);
  CHECK(number.error().text == "invalid message: {unacceptable_type_in_header,\"BCC\",signedint}");
}
