#pragma once
// Frames (spec §4.2.3): type octet, channel short, size long, payload, end octet 0xCE.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "amqp/wire/reply_code.hpp"

namespace amqp::wire {

inline constexpr std::array<std::uint8_t, 8> protocol_header{'A', 'M', 'Q', 'P', 0, 0, 9, 1};
inline constexpr std::uint8_t frame_end = 0xCE;
inline constexpr std::size_t frame_header_size = 7;
inline constexpr std::size_t frame_overhead = frame_header_size + 1;  // header + end octet
inline constexpr std::uint32_t min_frame_max = 4096;                   // spec: frame-min-size

enum class frame_type : std::uint8_t { method = 1, header = 2, body = 3, heartbeat = 8 };

// A frame as it sits in the reader's buffer; `payload` views that buffer.
struct frame_view {
  frame_type type = frame_type::heartbeat;
  std::uint16_t channel = 0;
  std::span<const std::uint8_t> payload;
};

// What the front of a buffer holds: a whole frame, not enough bytes yet, or garbage.
struct parse_result {
  enum class status { complete, need_more, malformed } state = status::need_more;
  frame_view frame;           // valid when complete
  std::size_t consumed = 0;   // octets the frame occupies, valid when complete
  refusal error;              // valid when malformed (501 FRAME_ERROR for size/end octet/type)
};

// Parses one frame from the front of `buffer`. The declared size is checked against
// `frame_max` (whole frame, header and end octet included) before anything else, so a hostile
// size never becomes an allocation; 0 means "no limit negotiated yet" and uses min_frame_max…
// callers pass the server's offer during the handshake.
parse_result parse_frame(std::span<const std::uint8_t> buffer, std::uint32_t frame_max);

// Checks the 8 octets a client opens with. False: answer with protocol_header, raw, and close.
bool is_protocol_header(std::span<const std::uint8_t> first_eight);

}  // namespace amqp::wire
