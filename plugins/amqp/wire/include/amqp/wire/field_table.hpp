#pragma once
// Field tables and arrays (spec §4.2.5.5) with RabbitMQ's type codes:
//   t bool, b int8, B uint8, s int16, u uint16, I int32, i uint32, l int64, f float,
//   d double, D decimal, S long string, x byte array, T timestamp, F table, A array, V void.
// A table keeps its entries in wire order so that what a client sent is re-encoded
// octet for octet (headers ride on the bus inside Amqp-Props).
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace amqp::wire {

struct field_value;
struct table_entry;

struct field_table {
  std::vector<table_entry> entries;
  bool operator==(const field_table&) const;
};

struct field_array {
  std::vector<field_value> items;
  bool operator==(const field_array&) const;
};

struct decimal_value {
  std::uint8_t scale = 0;
  std::uint32_t value = 0;
  bool operator==(const decimal_value&) const = default;
};

struct byte_array {  // 'x': a long-string-shaped blob that is not text
  std::string bytes;
  bool operator==(const byte_array&) const = default;
};

struct timestamp_value {  // 'T': POSIX seconds, u64
  std::uint64_t seconds = 0;
  bool operator==(const timestamp_value&) const = default;
};

struct void_value {  // 'V'
  bool operator==(const void_value&) const = default;
};

struct field_value {
  using variant = std::variant<bool, std::int8_t, std::uint8_t, std::int16_t, std::uint16_t,
                               std::int32_t, std::uint32_t, std::int64_t, float, double,
                               decimal_value, std::string, byte_array, timestamp_value,
                               field_table, field_array, void_value>;
  variant value;

  field_value();  // defined below, where table_entry is complete (clang needs that)
  template <class T>
    requires std::is_constructible_v<variant, T&&> && (!std::is_same_v<std::decay_t<T>, field_value>)
  field_value(T&& v) : value(std::forward<T>(v)) {}  // NOLINT: implicit by design, like the variant
  bool operator==(const field_value&) const = default;
};

struct table_entry {
  std::string name;
  field_value value;
  bool operator==(const table_entry&) const = default;
};

inline field_value::field_value() : value(void_value{}) {}
inline bool field_table::operator==(const field_table& o) const { return entries == o.entries; }
inline bool field_array::operator==(const field_array& o) const { return items == o.items; }

// Lookup by name (first match), for the few places the broker reads a client's table.
const field_value* find(const field_table& table, std::string_view name);
// The value as a signed integer when it is one of the integer types (not bool); nullopt otherwise.
std::optional<std::int64_t> integer_of(const field_value& value);

}  // namespace amqp::wire
