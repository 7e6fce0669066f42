#pragma once
// queue.declare arguments: RabbitMQ's `x-*` queue arguments that this translation honours,
// accepts as hints, or refuses. Refused are those that change WHAT a consumer is delivered
// and are not built yet (byte and age limits outside stream queues, priorities, stream segments):
// approximating them would deliver a different set, so they answer 540 with a remedy (the
// rationale of HIP-1326, "What is not implemented, and how it says so"). Arguments RabbitMQ
// itself does not know are ignored, as it does.
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/routing/names.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/field_table.hpp"

namespace amqp::broker {

// RabbitMQ's 406 sentence for an argument of the wrong type or range (queue.declare's and
// basic.consume's): "invalid arg '<name>' for queue '<queue>' in vhost '<vhost>': <why>".
std::string invalid_argument_sentence(std::string_view name, std::string_view queue, std::string_view vhost,
                                      std::string_view why);

// The 540 sentence for the first refused argument, or nullopt when every argument is fine.
std::optional<std::string> refused_queue_argument(const wire::field_table& arguments);

// RabbitMQ 3.10's 406 sentence for a new quorum or stream queue (x-queue-type) declared as its
// queues of that type cannot be: server-named; with an argument the type has no use for (quorum:
// x-max-priority, x-queue-mode, x-queue-master-locator, x-queue-version; stream: also every
// argument about a message's life in a queue: length, TTL, dead-lettering, expiry, overflow,
// delivery limit, single active consumer); auto-delete, exclusive or non-durable. nullopt for any
// other declaration. RabbitMQ checks these only when it creates the queue.
std::optional<std::string> refused_by_queue_type(const wire::field_table& arguments, bool durable, bool exclusive,
                                                 bool auto_delete, bool server_named, std::string_view queue,
                                                 std::string_view vhost);

// x-max-age's value ("<n><unit>", units Y M D h m s, as RabbitMQ reads it) in seconds; nullopt
// when it is not one.
std::optional<std::uint64_t> max_age_seconds(std::string_view text);

// The arguments honoured with the queue's definition (x-message-ttl, x-dead-letter-exchange,
// x-dead-letter-routing-key, x-delivery-limit, x-expires, x-single-active-consumer, x-max-length,
// x-overflow, x-queue-type; a stream queue's x-max-age and x-max-length-bytes) written into
// `def`; x-dead-letter-strategy is checked (dead-lettering is always at least once, which
// satisfies either value). False with RabbitMQ's 406 "invalid arg" sentence in `refusal` for a
// value of the wrong type or range.
bool read_queue_arguments(const wire::field_table& arguments, std::string_view queue, std::string_view vhost,
                          routing::name_rules names,
                          routing::queue_def& def, std::string& refusal);

}  // namespace amqp::broker
