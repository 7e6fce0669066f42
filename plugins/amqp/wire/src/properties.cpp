// Content headers and the basic class's properties. Presence is the flag bit and nothing
// else: a property that is present with a zero value stays present.
#include <charconv>
#include <string>

#include "amqp/wire/codec.hpp"
#include "reader.hpp"
#include "table_codec.hpp"

namespace amqp::wire {
namespace {

// The one list of basic properties: flag bit (15 down to 2; bit 0 is "more flags"), kind,
// name and member, in the spec's order, which is also the property list's order.
template <class Props, class Fn>
void for_each_property(Props& p, Fn&& f) {
  f(15, kind::shortstr{}, "content-type", p.content_type);
  f(14, kind::shortstr{}, "content-encoding", p.content_encoding);
  f(13, kind::table{}, "headers", p.headers);
  f(12, kind::octet{}, "delivery-mode", p.delivery_mode);
  f(11, kind::octet{}, "priority", p.priority);
  f(10, kind::shortstr{}, "correlation-id", p.correlation_id);
  f(9, kind::shortstr{}, "reply-to", p.reply_to);
  f(8, kind::shortstr{}, "expiration", p.expiration);
  f(7, kind::shortstr{}, "message-id", p.message_id);
  f(6, kind::timestamp{}, "timestamp", p.timestamp);
  f(5, kind::shortstr{}, "type", p.type);
  f(4, kind::shortstr{}, "user-id", p.user_id);
  f(3, kind::shortstr{}, "app-id", p.app_id);
  f(2, kind::shortstr{}, "cluster-id", p.cluster_id);
}

constexpr std::uint16_t more_flags = 1;
constexpr std::uint16_t known_flags = 0xFFFC;  // bits 15..2

constexpr std::size_t content_header_prefix = 2 + 2 + 8;  // class, weight, body size

refusal syntax(std::string text) { return {reply_code::syntax_error, std::move(text)}; }

bool read_property(reader& r, kind::shortstr, std::string& v, refusal&) {
  std::uint8_t len = 0;
  return r.u8(len) && r.take(len, v);
}
bool read_property(reader& r, kind::octet, std::uint8_t& v, refusal&) { return r.u8(v); }
bool read_property(reader& r, kind::timestamp, std::uint64_t& v, refusal&) { return r.u64(v); }
bool read_property(reader& r, kind::table, field_table& v, refusal& error) { return read_table(r, v, error); }

void put_property(std::string& out, kind::shortstr, const std::string& v) { detail::put_shortstr(out, v); }
void put_property(std::string& out, kind::octet, std::uint8_t v) { detail::put_u8(out, v); }
void put_property(std::string& out, kind::timestamp, std::uint64_t v) { detail::put_u64(out, v); }
void put_property(std::string& out, kind::table, const field_table& v) { encode_table(out, v); }

// Reads the flag words. Continuation words may follow, but basic defines no property beyond
// the first word, so any bit they set names a property nobody can decode.
result<std::uint16_t> read_flags(reader& r) {
  std::uint16_t first = 0;
  if (!r.u16(first)) return syntax("content header has no property flags; it needs at least one flag word");
  std::uint16_t word = first;
  while ((word & more_flags) != 0) {
    if (!r.u16(word)) return syntax("content header property flags announce another flag word that is missing");
    if ((word & ~more_flags) != 0) {
      return syntax("content header property flags set bits in a continuation word; basic defines 14 properties only");
    }
  }
  if ((first & ~known_flags & ~more_flags) != 0) {
    return syntax("content header property flags set bit 1, which basic does not define");
  }
  return first;
}

}  // namespace

result<content_header> decode_content_header(std::span<const std::uint8_t> payload) {
  reader r(payload);
  content_header h;
  std::uint16_t weight = 0;
  if (!r.u16(h.class_id) || !r.u16(weight) || !r.u64(h.body_size)) {
    return syntax("content header of " + std::to_string(payload.size()) + " octets is shorter than its " +
                  std::to_string(content_header_prefix) + "-octet class, weight and body size");
  }
  h.property_octets = payload.subspan(content_header_prefix);
  return h;
}

result<basic_properties> decode_properties(std::span<const std::uint8_t> property_octets) {
  reader r(property_octets);
  auto flags = read_flags(r);
  if (!flags) return flags.error();
  basic_properties props;
  refusal error{reply_code::syntax_error, {}};
  std::string_view failed;
  for_each_property(props, [&](int bit, auto tag, std::string_view name, auto& member) {
    if (!failed.empty() || (*flags & (1u << bit)) == 0) return;
    member.emplace();
    if (!read_property(r, tag, *member, error)) failed = name;
  });
  if (!failed.empty()) {
    if (error.text.empty()) return syntax("content header property '" + std::string(failed) + "' is truncated");
    return syntax("content header property '" + std::string(failed) + "': " + error.text);
  }
  if (r.remaining() != 0) {
    return syntax("content header has " + std::to_string(r.remaining()) +
                  " octets after the properties its flags announce");
  }
  return props;
}

std::string encode_properties(const basic_properties& props) {
  std::string out;
  detail::put_u16(out, 0);
  std::uint16_t flags = 0;
  for_each_property(props, [&](int bit, auto tag, std::string_view, const auto& member) {
    if (!member) return;
    flags = static_cast<std::uint16_t>(flags | (1u << bit));
    put_property(out, tag, *member);
  });
  out[0] = static_cast<char>(flags >> 8);
  out[1] = static_cast<char>(flags & 0xFF);
  return out;
}

result<std::optional<std::uint64_t>> expiration_ms(const basic_properties& props) {
  if (!props.expiration) return std::optional<std::uint64_t>{};
  const std::string& text = *props.expiration;
  std::uint64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || text[0] == '+' || text[0] == '-') {
    return refusal{reply_code::precondition_failed,
                      "invalid expiration '" + text.substr(0, 64) +
                          "': it is the milliseconds a message may wait in a queue, written as decimal digits "
                          "(e.g. '60000')"};
  }
  return std::optional<std::uint64_t>{ms};
}

result<std::optional<std::uint64_t>> expiration_of(std::string_view property_octets) {
  constexpr std::uint8_t expiration_bit = 1;  // bit 8 of the flags: the first octet's lowest
  if (property_octets.empty() || (static_cast<std::uint8_t>(property_octets[0]) & expiration_bit) == 0)
    return std::optional<std::uint64_t>{};
  auto props = decode_properties(
      {reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  if (!props) return props.error();
  return expiration_ms(*props);
}

result<std::optional<std::string>> user_id_of(std::string_view property_octets) {
  constexpr std::uint8_t user_id_bit = 0x10;  // bit 4 of the flags: in the second octet
  if (property_octets.size() < 2 || (static_cast<std::uint8_t>(property_octets[1]) & user_id_bit) == 0)
    return std::optional<std::string>{};
  auto props = decode_properties(
      {reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  if (!props) return props.error();
  return props->user_id;
}

}  // namespace amqp::wire
