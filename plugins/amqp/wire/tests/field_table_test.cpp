// Field tables and arrays: every type code, nesting, empties, order, lookup.
#include "support.hpp"

namespace amqp::wire {
namespace {

using test::octets;

std::string encoded(const field_table& t) {
  std::string out;
  encode_table(out, t);
  return out;
}

TEST_CASE("a table of every type, nested tables and arrays and empty values round-trips") {
  const field_table t = test::every_type_table();
  const std::string bytes = encoded(t);
  auto back = decode_table(octets(bytes));
  REQUIRE_MESSAGE(back.ok(), back.error().text);
  CHECK(*back == t);
  CHECK(encoded(*back) == bytes);  // octet for octet
}

TEST_CASE("each type code is written as RabbitMQ writes it") {
  auto one = [](field_value v) {
    field_table t;
    t.entries.push_back({"k", std::move(v)});
    return encoded(t).substr(4 + 2);  // drop the table length and the name
  };
  using s = std::string;
  CHECK(one(true) == s("t\x01", 2));
  CHECK(one(std::int8_t{-1}) == s("b\xff", 2));
  CHECK(one(std::uint8_t{1}) == s("B\x01", 2));
  CHECK(one(std::int16_t{-2}) == s("s\xff\xfe", 3));
  CHECK(one(std::uint16_t{2}) == s("u\x00\x02", 3));
  CHECK(one(std::int32_t{-3}) == s("I\xff\xff\xff\xfd", 5));
  CHECK(one(std::uint32_t{3}) == s("i\0\0\0\x03", 5));
  CHECK(one(std::int64_t{-4}) == s("l\xff\xff\xff\xff\xff\xff\xff\xfc", 9));
  CHECK(one(1.0f) == s("f\x3f\x80\0\0", 5));
  CHECK(one(1.0) == s("d\x3f\xf0\0\0\0\0\0\0", 9));
  CHECK(one(decimal_value{2, 5}) == s("D\x02\0\0\0\x05", 6));
  CHECK(one(std::string("ab")) == s("S\0\0\0\x02" "ab", 7));
  CHECK(one(byte_array{"\x01"}) == s("x\0\0\0\x01\x01", 6));
  CHECK(one(timestamp_value{6}) == s("T\0\0\0\0\0\0\0\x06", 9));
  CHECK(one(field_table{}) == s("F\0\0\0\0", 5));
  CHECK(one(field_array{}) == s("A\0\0\0\0", 5));
  CHECK(one(field_value{}) == s("V", 1));
}

TEST_CASE("'L' is read as RabbitMQ reads it: a signed 64-bit long, written back as 'l'") {
  // py-amqp writes every integer beyond 32 bits so, e.g. Celery's x-message-ttl of 2^27 s.
  const std::string big = std::string("\x01kL", 3) + std::string("\x00\x00\x00\x1f\x40\x00\x00\x00", 8);
  const std::string negative = std::string("\x01kL", 3) + std::string(7, '\xff') + "\xfc";
  for (const auto& [entry, value] : {std::pair{big, std::int64_t{134217728000}}, std::pair{negative, std::int64_t{-4}}}) {
    auto got = decode_table(octets(std::string("\0\0\0\x0b", 4) + entry));  // 11 octets: name, code, value
    REQUIRE_MESSAGE(got.ok(), got.error().text);
    REQUIRE(find(*got, "k") != nullptr);
    CHECK(std::get<std::int64_t>(find(*got, "k")->value) == value);
    CHECK(encoded(*got).substr(4 + 2, 1) == "l");
  }
}

TEST_CASE("an empty table is four zero octets") {
  CHECK(encoded(field_table{}) == std::string(4, '\0'));
  auto back = decode_table(octets(std::string(4, '\0')));
  REQUIRE(back.ok());
  CHECK(back->entries.empty());
}

TEST_CASE("entries keep wire order, duplicates included, and find takes the first") {
  field_table t;
  t.entries = {{"b", field_value{std::int32_t{1}}}, {"a", field_value{std::int32_t{2}}},
               {"b", field_value{std::int32_t{3}}}};
  auto back = decode_table(octets(encoded(t)));
  REQUIRE(back.ok());
  CHECK(*back == t);
  REQUIRE(find(*back, "b") != nullptr);
  CHECK(std::get<std::int32_t>(find(*back, "b")->value) == 1);
  CHECK(find(*back, "zz") == nullptr);
}

TEST_CASE("integer_of reads every integer type and nothing else") {
  CHECK(integer_of(field_value{std::int8_t{-5}}) == -5);
  CHECK(integer_of(field_value{std::uint8_t{200}}) == 200);
  CHECK(integer_of(field_value{std::int16_t{-300}}) == -300);
  CHECK(integer_of(field_value{std::uint16_t{60000}}) == 60000);
  CHECK(integer_of(field_value{std::int32_t{-70000}}) == -70000);
  CHECK(integer_of(field_value{std::uint32_t{4000000000u}}) == 4000000000LL);
  CHECK(integer_of(field_value{std::int64_t{-(1LL << 40)}}) == -(1LL << 40));
  CHECK_FALSE(integer_of(field_value{true}));
  CHECK_FALSE(integer_of(field_value{std::string("5")}));
  CHECK_FALSE(integer_of(field_value{1.5}));
  CHECK_FALSE(integer_of(field_value{}));
}

TEST_CASE("nesting up to the depth limit is accepted") {
  field_value v{std::string("bottom")};
  for (int i = 0; i < max_table_depth; ++i) {
    if (i % 2 == 0) {
      field_table t;
      t.entries.push_back({"n", std::move(v)});
      v = std::move(t);
    } else {
      field_array a;
      a.items.push_back(std::move(v));
      v = std::move(a);
    }
  }
  field_table top;
  top.entries.push_back({"top", std::move(v)});
  auto back = decode_table(octets(encoded(top)));
  REQUIRE_MESSAGE(back.ok(), back.error().text);
  CHECK(*back == top);
}

TEST_CASE("a bool octet other than 0 or 1 decodes as true") {
  auto back = decode_table(octets(std::string("\0\0\0\x04\x01kt\x07", 8)));
  REQUIRE(back.ok());
  CHECK(std::get<bool>(back->entries.at(0).value.value));
}

}  // namespace
}  // namespace amqp::wire
