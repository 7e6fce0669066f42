#pragma once
// queue.declare arguments: RabbitMQ's `x-*` queue arguments that this translation honours,
// accepts as hints, or refuses. Refused are those that change WHAT a consumer is delivered
// (dead-lettering, length limits, priorities, single active consumer, streams):
// approximating them would deliver a different set, so they answer 540 with a remedy (the
// rationale of HIP-1326 §4). Arguments RabbitMQ itself does not know are ignored, as it does.
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/wire/field_table.hpp"

namespace amqp::broker {

// The 540 sentence for the first refused argument, or nullopt when every argument is fine.
std::optional<std::string> refused_queue_argument(const wire::field_table& arguments);

// x-message-ttl, honoured: its milliseconds (nullopt when absent), or RabbitMQ's 406 sentence
// for a value that is not a non-negative integer (in `refusal`).
std::optional<std::uint64_t> message_ttl_argument(const wire::field_table& arguments, std::string_view queue,
                                                  std::string& refusal);

}  // namespace amqp::broker
