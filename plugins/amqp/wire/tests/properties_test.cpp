// Basic properties: every property, presence by flag, flag continuation.
#include "support.hpp"

namespace amqp::wire {
namespace {

using test::octets;

basic_properties all_present() {
  basic_properties p;
  p.content_type = "application/json";
  p.content_encoding = "gzip";
  p.headers = test::every_type_table();
  p.delivery_mode = 2;
  p.priority = 9;
  p.correlation_id = "corr";
  p.reply_to = "amq.rabbitmq.reply-to";
  p.expiration = "60000";
  p.message_id = "m-1";
  p.timestamp = 1700000000;
  p.type = "order.created";
  p.user_id = "guest";
  p.app_id = "shop";
  p.cluster_id = "c1";
  return p;
}

TEST_CASE("all fourteen properties round-trip") {
  const basic_properties p = all_present();
  const std::string bytes = encode_properties(p);
  CHECK(bytes.substr(0, 2) == std::string("\xFF\xFC", 2));
  auto back = decode_properties(octets(bytes));
  REQUIRE_MESSAGE(back.ok(), back.error().text);
  CHECK(*back == p);
  CHECK(encode_properties(*back) == bytes);
}

TEST_CASE("no properties encode to a zero flag word") {
  CHECK(encode_properties({}) == std::string(2, '\0'));
  auto back = decode_properties(octets(std::string(2, '\0')));
  REQUIRE(back.ok());
  CHECK(*back == basic_properties{});
}

TEST_CASE("a zero priority or delivery-mode that is present stays present") {
  basic_properties p;
  p.delivery_mode = 0;
  p.priority = 0;
  p.headers = field_table{};
  p.content_type = "";
  const std::string bytes = encode_properties(p);
  CHECK(bytes == std::string("\xB8\0" "\0" "\0\0\0\0" "\0" "\0", 9));
  auto back = decode_properties(octets(bytes));
  REQUIRE(back.ok());
  CHECK(back->delivery_mode == std::uint8_t{0});
  CHECK(back->priority == std::uint8_t{0});
  CHECK(back->headers == field_table{});
  CHECK(back->content_type == std::string());
  CHECK(*back == p);
}

TEST_CASE("each property alone sets exactly its own flag bit") {
  const basic_properties all = all_present();
  int bit = 15;
  auto alone = [&](auto member) {
    basic_properties p;
    p.*member = all.*member;
    const std::string bytes = encode_properties(p);
    const unsigned flags = (static_cast<unsigned char>(bytes[0]) << 8) | static_cast<unsigned char>(bytes[1]);
    CHECK(flags == (1u << bit));
    auto back = decode_properties(octets(bytes));
    REQUIRE(back.ok());
    CHECK(*back == p);
    --bit;
  };
  alone(&basic_properties::content_type);
  alone(&basic_properties::content_encoding);
  alone(&basic_properties::headers);
  alone(&basic_properties::delivery_mode);
  alone(&basic_properties::priority);
  alone(&basic_properties::correlation_id);
  alone(&basic_properties::reply_to);
  alone(&basic_properties::expiration);
  alone(&basic_properties::message_id);
  alone(&basic_properties::timestamp);
  alone(&basic_properties::type);
  alone(&basic_properties::user_id);
  alone(&basic_properties::app_id);
  alone(&basic_properties::cluster_id);
  CHECK(bit == 1);
}

TEST_CASE("flag continuation words are read, and the first word is kept") {
  // content-type present, then a continuation word that announces nothing more.
  const std::string bytes("\x80\x01" "\0\0" "\x04text", 9);
  auto back = decode_properties(octets(bytes));
  REQUIRE_MESSAGE(back.ok(), back.error().text);
  CHECK(back->content_type == std::string("text"));
  const std::string chained("\x00\x01" "\x00\x01" "\x00\x00", 6);
  CHECK(decode_properties(octets(chained)).ok());
}

TEST_CASE("flags naming properties basic does not define are a syntax error") {
  auto bit1 = decode_properties(octets(std::string("\x00\x02", 2)));
  REQUIRE_FALSE(bit1.ok());
  CHECK(bit1.error().code == reply_code::syntax_error);
  auto more = decode_properties(octets(std::string("\x00\x01\x80\x00", 4)));
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().code == reply_code::syntax_error);
  auto missing = decode_properties(octets(std::string("\x00\x01", 2)));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().text.find("missing") != std::string::npos);
}

TEST_CASE("expiration: RabbitMQ's reading of its value, from properties or their octets") {
  basic_properties p;
  p.content_type = "text/plain";
  CHECK(*expiration_of(encode_properties(p)) == std::nullopt);
  CHECK(*expiration_of("") == std::nullopt);
  // Without the flag the octets are not decoded: a list that would not decode is no error here.
  CHECK(*expiration_of(std::string("\x80\x00", 2)) == std::nullopt);
  p.expiration = "60000";
  CHECK(*expiration_of(encode_properties(p)) == std::optional<std::uint64_t>{60000});
  CHECK(*expiration_ms(p) == std::optional<std::uint64_t>{60000});
  auto truncated = expiration_of(std::string("\x01\x00", 2));  // the flag, no value after it
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().code == reply_code::syntax_error);
  p.expiration = "0";
  CHECK(*expiration_ms(p) == std::optional<std::uint64_t>{0});
  p.expiration.reset();
  CHECK(*expiration_ms(p) == std::nullopt);
  for (const char* bad : {"", "abc", "-1", "+1", "1.5", " 1", "1 ", "99999999999999999999999"}) {
    CAPTURE(bad);
    p.expiration = bad;
    for (const auto& r : {expiration_ms(p), expiration_of(encode_properties(p))}) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == reply_code::precondition_failed);
      CHECK(r.error().text.find("invalid expiration '" + std::string(bad) + "'") != std::string::npos);
    }
  }
}

TEST_CASE("user_id is read from property octets only when its flag is set") {
  basic_properties p;
  p.content_type = "text/plain";
  CHECK(*user_id_of(encode_properties(p)) == std::nullopt);
  CHECK(*user_id_of("") == std::nullopt);
  CHECK(*user_id_of(std::string("\x80\x00", 2)) == std::nullopt);  // not decoded without the flag
  p.user_id = "alice";
  p.app_id = "app";  // the flag beside it
  CHECK(*user_id_of(encode_properties(p)) == std::optional<std::string>{"alice"});
  auto truncated = user_id_of(std::string("\x00\x10", 2));  // the flag, no value after it
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.error().code == reply_code::syntax_error);
}

}  // namespace
}  // namespace amqp::wire
