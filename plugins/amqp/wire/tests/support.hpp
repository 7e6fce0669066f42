#pragma once
// Small helpers shared by the wire unit tests.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "amqp/wire/codec.hpp"

namespace amqp::wire::test {

inline std::span<const std::uint8_t> octets(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

inline std::string str(std::span<const std::uint8_t> s) {
  return {reinterpret_cast<const char*>(s.data()), s.size()};
}

// Parses exactly one complete frame that must fill `bytes`.
inline frame_view only_frame(const std::string& bytes, std::uint32_t frame_max = 131072) {
  const auto parsed = parse_frame(octets(bytes), frame_max);
  REQUIRE(parsed.state == parse_result::status::complete);
  REQUIRE(parsed.consumed == bytes.size());
  return parsed.frame;
}

// Encodes one method and decodes it back through the frame parser.
template <class M>
result<method> through_the_wire(const M& m, std::uint16_t channel = 1) {
  std::string bytes;
  encode_method(bytes, channel, m);
  const frame_view f = only_frame(bytes);
  CHECK(f.type == frame_type::method);
  CHECK(f.channel == channel);
  return decode_method(f.payload);
}

// Calls f.template operator()<M>() for every method struct in table order.
template <class Fn>
void for_each_method_type(Fn&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f.template operator()<std::variant_alternative_t<I, method>>(), ...);
  }(std::make_index_sequence<std::variant_size_v<method> - 1>{});
}

// A table holding one value of every type code, nested tables and arrays, and empties.
inline field_table every_type_table() {
  field_table inner;
  inner.entries.push_back({"deep", field_value{std::int64_t{-42}}});
  inner.entries.push_back({"empty-table", field_value{field_table{}}});
  field_array arr;
  arr.items = {field_value{std::int32_t{7}}, field_value{std::string("x")}, field_value{field_array{}},
               field_value{inner}, field_value{}};
  field_table t;
  t.entries = {
      {"bool", field_value{true}},
      {"false", field_value{false}},
      {"i8", field_value{std::int8_t{-5}}},
      {"u8", field_value{std::uint8_t{250}}},
      {"i16", field_value{std::int16_t{-30000}}},
      {"u16", field_value{std::uint16_t{65000}}},
      {"i32", field_value{std::int32_t{-2000000000}}},
      {"u32", field_value{std::uint32_t{4000000000u}}},
      {"i64", field_value{std::int64_t{-9000000000000000000}}},
      {"f32", field_value{1.5f}},
      {"f64", field_value{-2.25}},
      {"decimal", field_value{decimal_value{2, 12345}}},
      {"string", field_value{std::string("hello")}},
      {"empty-string", field_value{std::string()}},
      {"bytes", field_value{byte_array{std::string("\0\x01\xff", 3)}}},
      {"timestamp", field_value{timestamp_value{1700000000}}},
      {"table", field_value{inner}},
      {"array", field_value{arr}},
      {"void", field_value{}},
      {"", field_value{std::uint8_t{0}}},
  };
  return t;
}

// Gives every field of a method a distinct non-default value (bits alternate, starting from
// `first_bit`), so a field written to the wrong place or in the wrong order shows up.
template <class M>
M filled(bool first_bit) {
  M m;
  int n = 1;
  bool bit = first_bit;
  m.for_each_field([&](auto tag, std::string_view name, auto& v) {
    using K = decltype(tag);
    if constexpr (std::is_same_v<K, kind::bit>) {
      v = bit;
      bit = !bit;
    } else if constexpr (std::is_same_v<K, kind::shortstr> || std::is_same_v<K, kind::longstr>) {
      v = std::string(name) + "-" + std::to_string(n);
    } else if constexpr (std::is_same_v<K, kind::table>) {
      v = test::every_type_table();
    } else {
      v = static_cast<std::remove_reference_t<decltype(v)>>(0x0102030405060708ull * static_cast<unsigned>(n));
    }
    ++n;
  });
  return m;
}

}  // namespace amqp::wire::test
