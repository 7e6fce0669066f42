#pragma once
// Encoding and decoding of method frames, content headers, bodies and heartbeats. Every
// encoder appends one or more complete frames to `out`, so a delivery (method + header +
// bodies) is built into one buffer and written as one unit.
//
// Notes on the implementation (no name or signature changed from the agreed API):
// - Encoders cannot fail. A short string over 255 octets (only ever an over-long reply text;
//   names are validated by their owners first) is cut at the last whole UTF-8 character.
// - Every decoder error is 502 SYNTAX_ERROR with a sentence naming the method/property/field,
//   except an unknown method (503 COMMAND_INVALID) and frame-level faults from parse_frame
//   (501 FRAME_ERROR: size over frame-max, end octet, unknown type, a heartbeat that is not
//   empty on channel 0). A content header shorter than 12 octets is 502.
// - decode_table wants exactly one table: octets after its declared length are 502.
// - encode_body: frame_max 0 (tune's "no limit") gives one frame per body; a value under
//   min_frame_max is treated as min_frame_max.
// - codec_impl.hpp also exposes the octet writers in amqp::wire::detail (put_u8/16/32/64,
//   put_shortstr, put_longstr, begin_frame/end_frame) for code that builds frames by hand.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "amqp/wire/field_table.hpp"
#include "amqp/wire/frame.hpp"
#include "amqp/wire/methods.hpp"
#include "amqp/wire/properties.hpp"
#include "amqp/wire/result.hpp"

namespace amqp::wire {

// Maximum nesting of tables/arrays inside a field value (a guard against stack exhaustion).
inline constexpr int max_table_depth = 64;

// ---- methods
// Decodes a method frame's payload (class id, method id, arguments). Unknown ids → 503
// COMMAND_INVALID naming them; truncated or trailing-garbage arguments → 502 SYNTAX_ERROR.
result<method> decode_method(std::span<const std::uint8_t> payload);
// Appends a method frame for any method struct.
template <class M> void encode_method(std::string& out, std::uint16_t channel, const M& m);
void encode_method(std::string& out, std::uint16_t channel, const method& m);

// ---- content
struct content_header {
  std::uint16_t class_id = 0;
  std::uint64_t body_size = 0;
  std::span<const std::uint8_t> property_octets;  // flags + property list, as sent (views payload)
};
// Splits a header frame's payload; the properties stay raw so they can ride on the bus as sent.
result<content_header> decode_content_header(std::span<const std::uint8_t> payload);
// Property flags (with continuation) and list ↔ struct.
result<basic_properties> decode_properties(std::span<const std::uint8_t> property_octets);
std::string encode_properties(const basic_properties& props);
// RabbitMQ's reading of `expiration`: how many milliseconds the message may wait in a queue,
// written as decimal digits. nullopt when absent; 406 naming the value when it is not that.
result<std::optional<std::uint64_t>> expiration_ms(const basic_properties& props);
// The same, read from property octets as a content header carries them; decoded only when the
// expiration flag is set (most messages have none), so a decoding error is returned only then.
result<std::optional<std::uint64_t>> expiration_of(std::string_view property_octets);
// The `user_id` property, read from property octets likewise (decoded only when its flag is set).
result<std::optional<std::string>> user_id_of(std::string_view property_octets);
// Appends a header frame whose property section is `property_octets` verbatim.
void encode_content_header(std::string& out, std::uint16_t channel, std::uint16_t class_id,
                           std::uint64_t body_size, std::string_view property_octets);
// Appends body frames of at most frame_max - 8 payload octets each (none for an empty body).
void encode_body(std::string& out, std::uint16_t channel, std::string_view body,
                 std::uint32_t frame_max);
void encode_heartbeat(std::string& out);

// ---- field tables (exposed for tests and for the broker's server-properties)
result<field_table> decode_table(std::span<const std::uint8_t> table_octets_with_length);
void encode_table(std::string& out, const field_table& table);  // with its u32 length prefix

}  // namespace amqp::wire

#include "amqp/wire/codec_impl.hpp"  // the encode_method template, written once over for_each_field
