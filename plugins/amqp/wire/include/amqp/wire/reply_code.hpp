#pragma once
// AMQP reply codes (spec §1.9 constants, RabbitMQ's list), their names and whether they are
// connection-level (hard) errors, from one X-macro so names and values cannot drift.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace amqp::wire {

// X(name, value, hard)
#define AMQP_REPLY_CODES(X)              \
  X(reply_success, 200, false)           \
  X(content_too_large, 311, false)       \
  X(no_route, 312, false)                \
  X(no_consumers, 313, false)            \
  X(connection_forced, 320, true)        \
  X(invalid_path, 402, true)             \
  X(access_refused, 403, false)          \
  X(not_found, 404, false)               \
  X(resource_locked, 405, false)         \
  X(precondition_failed, 406, false)     \
  X(frame_error, 501, true)              \
  X(syntax_error, 502, true)             \
  X(command_invalid, 503, true)          \
  X(channel_error, 504, true)            \
  X(unexpected_frame, 505, true)         \
  X(resource_error, 506, true)           \
  X(not_allowed, 530, true)              \
  X(not_implemented, 540, true)          \
  X(internal_error, 541, true)

enum class reply_code : std::uint16_t {
#define AMQP_X(name, value, hard) name = value,
  AMQP_REPLY_CODES(AMQP_X)
#undef AMQP_X
};

// "NOT_FOUND", "PRECONDITION_FAILED", … as RabbitMQ spells them in reply texts.
std::string_view reply_name(reply_code code);
// The spec's "hard error" column. Note: the broker may still raise 530/540 as channel
// exceptions where HIP-1326 says so ("What is not implemented, and how it says so"); this is
// the spec's default only.
bool is_hard_error(reply_code code);
// "NOT_FOUND - no queue 'q'": the shape every reply text has.
std::string reply_text(reply_code code, std::string_view sentence);

// Every "no" in AMQP's vocabulary: a reply code and one sentence naming the cause and the remedy,
// without the "PRECONDITION_FAILED - " prefix (reply_text adds it, once, when the reply is sent).
// The codec's (a connection exception), the routing rules' and the broker's.
struct refusal {
  refusal() = default;
  refusal(reply_code c, std::string t, std::string r = {}) : code(c), text(std::move(t)), remedy(std::move(r)) {}
  reply_code code = reply_code::syntax_error;
  std::string text;
  // Where RabbitMQ answers the same refusal with a fixed text of its own, which clients and their
  // tests match literally, `text` is exactly that text and the remedy goes here, for the log.
  std::string remedy;
  friend bool operator==(const refusal&, const refusal&) = default;
};

}  // namespace amqp::wire
