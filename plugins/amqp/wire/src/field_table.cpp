// Field tables and arrays with RabbitMQ's type codes. Decoding is recursive, so nesting is
// bounded by max_table_depth; every length is checked against what is left of the input
// before anything is allocated.
#include <bit>
#include <cstdio>
#include <string>
#include <type_traits>
#include <variant>

#include "amqp/wire/codec.hpp"
#include "table_codec.hpp"

namespace amqp::wire {
namespace {

// Type code per alternative of field_value::variant, in the variant's order.
constexpr char type_codes[] = {'t', 'b', 'B', 's', 'u', 'I', 'i', 'l', 'f',
                               'd', 'D', 'S', 'x', 'T', 'F', 'A', 'V'};
static_assert(std::size(type_codes) == std::variant_size_v<field_value::variant>);

std::string quoted(std::string_view where) { return "'" + std::string(where) + "'"; }

refusal syntax(std::string text) { return {reply_code::syntax_error, std::move(text)}; }

std::string describe_code(std::uint8_t code) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", code);
  if (code >= 0x21 && code < 0x7f) return "'" + std::string(1, static_cast<char>(code)) + "' (" + hex + ")";
  return hex;
}

class table_decoder {
 public:
  explicit table_decoder(refusal& error) : error_(error) {}

  bool table(reader& r, int depth, field_table& out, std::string_view where) {
    reader body{{}};
    if (!sized(r, "field table", where, body)) return false;
    while (body.remaining() > 0) {
      table_entry entry;
      std::uint8_t len = 0;
      if (!body.u8(len) || !body.take(len, entry.name)) {
        return fail("field table entry name after " + quoted(where) + " is truncated");
      }
      if (!value(body, depth, entry.value, entry.name)) return false;
      out.entries.push_back(std::move(entry));
    }
    return true;
  }

 private:
  // A u32 length followed by that many octets, which must all be present.
  bool sized(reader& r, std::string_view what, std::string_view where, reader& inner) {
    std::uint32_t len = 0;
    std::span<const std::uint8_t> octets;
    if (!r.u32(len)) return fail(std::string(what) + " length of " + quoted(where) + " is truncated");
    if (!r.take(len, octets)) {
      return fail(std::string(what) + " of " + std::to_string(len) + " octets in " + quoted(where) +
                  " overruns the " + std::to_string(r.remaining()) + " octets left in its frame");
    }
    inner = reader(octets);
    return true;
  }

  bool array(reader& r, int depth, field_array& out, std::string_view where) {
    reader body{{}};
    if (!sized(r, "field array", where, body)) return false;
    while (body.remaining() > 0) {
      field_value item;
      if (!value(body, depth, item, where)) return false;
      out.items.push_back(std::move(item));
    }
    return true;
  }

  bool value(reader& r, int depth, field_value& out, std::string_view where) {
    std::uint8_t code = 0;
    if (!r.u8(code)) return fail("type code of field " + quoted(where) + " is truncated");
    if (!scalar(r, code, out, where)) return false;
    if (code != 'F' && code != 'A') return true;
    if (depth + 1 > max_table_depth) {
      return fail("field tables and arrays are nested deeper than " + std::to_string(max_table_depth) +
                  " levels at " + quoted(where) + "; flatten the value");
    }
    if (code == 'F') {
      field_table t;
      if (!table(r, depth + 1, t, where)) return false;
      out = std::move(t);
      return true;
    }
    field_array a;
    if (!array(r, depth + 1, a, where)) return false;
    out = std::move(a);
    return true;
  }

  template <class T, class Raw>
  bool number(reader& r, field_value& out, std::string_view where, bool (reader::*get)(Raw&)) {
    Raw raw{};
    if (!(r.*get)(raw)) return fail("value of field " + quoted(where) + " is truncated");
    if constexpr (std::is_same_v<T, bool>) {
      out = raw != 0;
    } else {
      out = std::bit_cast<T>(raw);
    }
    return true;
  }

  bool blob(reader& r, std::string& out, std::string_view where) {
    std::uint32_t len = 0;
    if (!r.u32(len)) return fail("length of field " + quoted(where) + " is truncated");
    if (!r.take(len, out)) {
      return fail("long string of " + std::to_string(len) + " octets in field " + quoted(where) +
                  " overruns the " + std::to_string(r.remaining()) + " octets left in its table");
    }
    return true;
  }

  // Everything but F and A (which recurse; value() handles them).
  bool scalar(reader& r, std::uint8_t code, field_value& out, std::string_view where) {
    switch (code) {
      case 't': return number<bool>(r, out, where, &reader::u8);
      case 'b': return number<std::int8_t>(r, out, where, &reader::u8);
      case 'B': return number<std::uint8_t>(r, out, where, &reader::u8);
      case 's': return number<std::int16_t>(r, out, where, &reader::u16);
      case 'u': return number<std::uint16_t>(r, out, where, &reader::u16);
      case 'I': return number<std::int32_t>(r, out, where, &reader::u32);
      case 'i': return number<std::uint32_t>(r, out, where, &reader::u32);
      // 'L' is the spec's long-long-uint, which py-amqp (kombu, Celery) writes for every integer
      // beyond 32 bits: RabbitMQ reads it as a signed 64-bit long, the same as 'l' (written back).
      case 'l':
      case 'L': return number<std::int64_t>(r, out, where, &reader::u64);
      case 'f': return number<float>(r, out, where, &reader::u32);
      case 'd': return number<double>(r, out, where, &reader::u64);
      case 'D': {
        decimal_value d;
        if (!r.u8(d.scale) || !r.u32(d.value)) return fail("decimal field " + quoted(where) + " is truncated");
        out = d;
        return true;
      }
      case 'S': {
        std::string s;
        if (!blob(r, s, where)) return false;
        out = std::move(s);
        return true;
      }
      case 'x': {
        byte_array b;
        if (!blob(r, b.bytes, where)) return false;
        out = std::move(b);
        return true;
      }
      case 'T': {
        timestamp_value t;
        if (!r.u64(t.seconds)) return fail("timestamp field " + quoted(where) + " is truncated");
        out = t;
        return true;
      }
      case 'V': out = void_value{}; return true;
      case 'F':
      case 'A': return true;
      default:
        return fail("field " + quoted(where) + " has unknown type code " + describe_code(code) +
                    "; the accepted codes are t b B s u I i l L f d D S x T F A V");
    }
  }

  bool fail(std::string text) {
    error_ = syntax(std::move(text));
    return false;
  }

  refusal& error_;
};

void encode_value(std::string& out, const field_value& v);

void encode_array(std::string& out, const field_array& a) {
  const std::size_t at = out.size();
  detail::put_u32(out, 0);
  for (const auto& item : a.items) encode_value(out, item);
  const auto len = static_cast<std::uint32_t>(out.size() - at - 4);
  detail::patch_u32(out, at, len);
}

void encode_value(std::string& out, const field_value& v) {
  detail::put_u8(out, static_cast<std::uint8_t>(type_codes[v.value.index()]));
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          detail::put_u8(out, x ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) {
          detail::put_u8(out, static_cast<std::uint8_t>(x));
        } else if constexpr (std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t>) {
          detail::put_u16(out, static_cast<std::uint16_t>(x));
        } else if constexpr (std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t>) {
          detail::put_u32(out, static_cast<std::uint32_t>(x));
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          detail::put_u64(out, static_cast<std::uint64_t>(x));
        } else if constexpr (std::is_same_v<T, float>) {
          detail::put_u32(out, std::bit_cast<std::uint32_t>(x));
        } else if constexpr (std::is_same_v<T, double>) {
          detail::put_u64(out, std::bit_cast<std::uint64_t>(x));
        } else if constexpr (std::is_same_v<T, decimal_value>) {
          detail::put_u8(out, x.scale);
          detail::put_u32(out, x.value);
        } else if constexpr (std::is_same_v<T, std::string>) {
          detail::put_longstr(out, x);
        } else if constexpr (std::is_same_v<T, byte_array>) {
          detail::put_longstr(out, x.bytes);
        } else if constexpr (std::is_same_v<T, timestamp_value>) {
          detail::put_u64(out, x.seconds);
        } else if constexpr (std::is_same_v<T, field_table>) {
          encode_table(out, x);
        } else if constexpr (std::is_same_v<T, field_array>) {
          encode_array(out, x);
        }  // void_value: the type code is the whole value
      },
      v.value);
}

}  // namespace

bool read_table(reader& r, field_table& table, refusal& error) {
  return table_decoder(error).table(r, 0, table, "table");
}

result<field_table> decode_table(std::span<const std::uint8_t> table_octets_with_length) {
  reader r(table_octets_with_length);
  field_table table;
  refusal error;
  if (!read_table(r, table, error)) return error;
  if (r.remaining() != 0) {
    return syntax(std::to_string(r.remaining()) + " octets follow the field table's declared length");
  }
  return table;
}

void encode_table(std::string& out, const field_table& table) {
  const std::size_t at = out.size();
  detail::put_u32(out, 0);
  for (const auto& e : table.entries) {
    detail::put_shortstr(out, e.name);
    encode_value(out, e.value);
  }
  const auto len = static_cast<std::uint32_t>(out.size() - at - 4);
  detail::patch_u32(out, at, len);
}

const field_value* find(const field_table& table, std::string_view name) {
  for (const auto& e : table.entries) {
    if (e.name == name) return &e.value;
  }
  return nullptr;
}

std::optional<std::int64_t> integer_of(const field_value& value) {
  std::optional<std::int64_t> n;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) n = static_cast<std::int64_t>(x);
      },
      value.value);
  return n;
}

}  // namespace amqp::wire
