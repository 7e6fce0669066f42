#pragma once
// RabbitMQ's delayed-message exchange (the rabbitmq_delayed_message_exchange plugin): a publish to
// an x-delayed-message exchange with an x-delay header of N > 0 milliseconds is routed N ms later,
// by the bindings in force then. Here the stream keeps it as a message schedule
// (bus::client::publish_delayed): stored and replicated like any message, it survives a restart
// of `cloud` and the loss of a bus node, as the plugin's single-node table does not. When due, the
// server stores it on its due subject, and a replica's router (due_router.hpp) routes it then.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "amqp/routing/subject.hpp"
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

// Where a delayed publish to `publish_subject` (amqp.<exchange word>[.<key>]) is stored when due:
// "amqp.~due.<exchange word>[.<key>]".
std::string due_subject(std::string_view publish_subject);
// The exchange and routing key a due subject names; nullopt when it is none.
std::optional<routing::address> due_address(std::string_view due_subject);

}  // namespace amqp::broker
