// Frame boundaries: parse one frame off the front of a buffer, and write heartbeat, content
// header and body frames.
#include <algorithm>
#include <string>

#include "amqp/wire/codec.hpp"
#include "reader.hpp"

namespace amqp::wire {
namespace {

parse_result malformed(std::string text) {
  parse_result r;
  r.state = parse_result::status::malformed;
  r.error = {reply_code::frame_error, std::move(text)};
  return r;
}

bool known_type(std::uint8_t t) {
  switch (static_cast<frame_type>(t)) {
    case frame_type::method:
    case frame_type::header:
    case frame_type::body:
    case frame_type::heartbeat: return true;
  }
  return false;
}

}  // namespace

parse_result parse_frame(std::span<const std::uint8_t> buffer, std::uint32_t frame_max) {
  reader r(buffer);
  std::uint8_t type = 0;
  std::uint16_t channel = 0;
  std::uint32_t size = 0;
  if (!r.u8(type) || !r.u16(channel) || !r.u32(size)) return {};  // need_more
  // The size is judged before anything else, so a hostile size is refused rather than awaited.
  const std::uint64_t limit = frame_max == 0 ? min_frame_max : frame_max;
  const std::uint64_t whole = std::uint64_t{size} + frame_overhead;
  if (whole > limit) {
    return malformed("frame of " + std::to_string(whole) + " octets exceeds the negotiated frame-max of " +
                     std::to_string(limit) + " octets; split content into body frames of at most frame-max - 8 octets");
  }
  if (!known_type(type)) {
    return malformed("unknown frame type " + std::to_string(type) +
                     "; AMQP 0-9-1 frames are method (1), header (2), body (3) and heartbeat (8)");
  }
  std::span<const std::uint8_t> payload;
  std::uint8_t end = 0;
  if (!r.take(size, payload) || !r.u8(end)) return {};  // need_more
  if (end != frame_end) {
    return malformed("frame end octet is " + std::to_string(end) + ", not 206 (0xCE); the frame's size field is wrong");
  }
  if (static_cast<frame_type>(type) == frame_type::heartbeat && (channel != 0 || size != 0)) {
    return malformed("heartbeat frame on channel " + std::to_string(channel) + " with " + std::to_string(size) +
                     " payload octets; a heartbeat is empty and on channel 0");
  }
  parse_result result;
  result.state = parse_result::status::complete;
  result.frame = {static_cast<frame_type>(type), channel, payload};
  result.consumed = r.position();
  return result;
}

bool is_protocol_header(std::span<const std::uint8_t> first_eight) {
  return std::ranges::equal(first_eight, protocol_header);
}

void encode_content_header(std::string& out, std::uint16_t channel, std::uint16_t class_id,
                           std::uint64_t body_size, std::string_view property_octets) {
  const std::size_t start = detail::begin_frame(out, frame_type::header, channel);
  detail::put_u16(out, class_id);
  detail::put_u16(out, 0);  // weight: unused, must be zero
  detail::put_u64(out, body_size);
  out.append(property_octets);
  detail::end_frame(out, start);
}

void encode_body(std::string& out, std::uint16_t channel, std::string_view body, std::uint32_t frame_max) {
  // 0 is "no limit" in connection.tune; a frame still cannot carry more than a u32 size.
  // A value under the spec's minimum cannot have been negotiated, so the minimum applies.
  const std::uint64_t limit = frame_max == 0 ? 0xFFFFFFFFull : std::max<std::uint64_t>(frame_max, min_frame_max);
  const std::size_t chunk = static_cast<std::size_t>(limit - frame_overhead);
  for (std::size_t at = 0; at < body.size(); at += chunk) {
    const std::size_t start = detail::begin_frame(out, frame_type::body, channel);
    out.append(body.substr(at, chunk));
    detail::end_frame(out, start);
  }
}

void encode_heartbeat(std::string& out) {
  const std::size_t start = detail::begin_frame(out, frame_type::heartbeat, 0);
  detail::end_frame(out, start);
}

}  // namespace amqp::wire
