#pragma once
// basic.consume arguments: RabbitMQ's `x-*` consumer arguments. A consumer priority
// (`x-priority`) within the bus's ten levels and what every consumer here already gets (no
// cancel on a failover) are accepted; a priority outside them, and those that would
// change what a consumer is delivered, and are not built yet, answer 540 with a remedy (HIP-1326,
// "What is not implemented, and how it says so"); a value of the wrong type is RabbitMQ's 406.
// Arguments RabbitMQ itself does not know are ignored, as it does.
#include <chrono>
#include <optional>
#include <variant>
#include <string>
#include <string_view>

#include "amqp/bus/client.hpp"
#include "amqp/wire/field_table.hpp"
#include "amqp/wire/reply_code.hpp"

namespace amqp::broker {

struct consume_refusal {
  wire::reply_code code;
  std::string sentence;
};

// The refusal for the first argument that cannot be honoured, or nullopt when all can.
// `queue` and `vhost` name the queue in RabbitMQ's 406 sentence.
std::optional<consume_refusal> refused_consume_argument(const wire::field_table& arguments, std::string_view queue,
                                                        std::string_view vhost);

// Where a consumer of a stream queue starts reading (x-stream-offset: absent or "next", "first",
// "last", an offset from 0, a timestamp, an interval such as "1h" back from `now`), or RabbitMQ's
// 406 for another value.
std::variant<bus::stream_start, consume_refusal> stream_offset(const wire::field_table& arguments,
                                                              std::string_view queue, std::string_view vhost,
                                                              std::chrono::system_clock::time_point now);

// The consumer priority (`x-priority`) of arguments refused_consume_argument accepted; 0 without one.
int consumer_priority(const wire::field_table& arguments);

}  // namespace amqp::broker
