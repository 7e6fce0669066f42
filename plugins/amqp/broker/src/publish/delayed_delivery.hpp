#pragma once
// RabbitMQ's delayed-message exchange (the rabbitmq_delayed_message_exchange plugin): a publish to
// an x-delayed-message exchange with an x-delay header of N > 0 milliseconds is routed N ms later,
// by the bindings in force then. Here the stream keeps it as a message schedule
// (bus::client::publish_delayed): stored and replicated like any message, it survives a restart
// of `cloud` and the loss of a bus node, as the plugin's single-node table does not.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "amqp/wire/result.hpp"

namespace amqp::broker {

// The plugin's bound: an Erlang timer's longest wait, 2^32 - 1 ms (49.7 days).
inline constexpr std::uint64_t max_delay_ms = 4'294'967'295;

struct delayed_publish {
  std::chrono::milliseconds delay{};
  std::string property_octets;  // x-delay set to -delay, as the plugin delivers it
};

// A publish's x-delay, read as the plugin reads it (an integer; a string of digits; a float,
// truncated). nullopt when the message is not delayed (no header, or 0 or less): it is routed
// now. A string that is no integer, another type, or a delay over max_delay_ms is refused 406
// (the plugin crashes the channel on the first and routes the last at once).
wire::result<std::optional<delayed_publish>> read_delay(const std::string& property_octets);

// The stream subjects an exchange's delayed messages wait under: "amqp.~delayed.<exchange word>".
std::string delayed_subject_prefix(const std::string& exchange);

}  // namespace amqp::broker
