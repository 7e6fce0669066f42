#include "queue_arguments.hpp"

#include <array>
#include <type_traits>
#include <string_view>
#include <variant>

namespace amqp::broker {
namespace {

struct refused_argument {
  std::string_view name;
  std::string_view remedy;  // what to do instead
};

// Each entry changes which messages a consumer receives; nothing on the bus does that.
constexpr std::array<refused_argument, 9> refused{{
    {"x-dead-letter-exchange", "there is no dead-lettering; reject with requeue=false drops a message, so publish it to another exchange yourself before rejecting"},
    {"x-dead-letter-routing-key", "there is no dead-lettering; publish a rejected message to another exchange yourself"},
    {"x-max-length", "queues are not length-limited; bound the backlog in the publisher or with publisher confirms"},
    {"x-max-length-bytes", "queues are not size-limited; bound the backlog in the publisher or with publisher confirms"},
    {"x-overflow", "queues are not length-limited, so there is no overflow behaviour to choose"},
    {"x-max-priority", "there are no priority queues; use one queue per priority and consume the higher one first"},
    {"x-delivery-limit", "deliveries are not limited; read x-delivery-count in the consumer and reject with requeue=false past your limit"},
    {"x-max-age", "stream queues are not implemented; declare a classic or quorum queue"},
    {"x-stream-max-segment-size-bytes", "stream queues are not implemented; declare a classic or quorum queue"},
}};

std::string sentence(std::string_view name, std::string_view remedy) {
  return "queue argument '" + std::string(name) + "' is not implemented: " + std::string(remedy);
}

bool is_true(const wire::field_value& v) {
  if (const auto* b = std::get_if<bool>(&v.value)) return *b;
  return true;  // any other type: RabbitMQ would refuse it too; do not pretend it is off
}

}  // namespace

std::optional<std::string> refused_queue_argument(const wire::field_table& arguments) {
  for (const auto& entry : arguments.entries) {
    for (const auto& r : refused)
      if (entry.name == r.name) return sentence(r.name, r.remedy);
    if (entry.name == "x-single-active-consumer" && is_true(entry.value))
      return sentence(entry.name, "every consumer of a queue receives messages; cancel the others, or use an exclusive consumer");
    if (entry.name == "x-queue-type") {
      const auto* type = std::get_if<std::string>(&entry.value.value);
      if (type && *type == "stream")
        return sentence("x-queue-type=stream", "stream queues are not implemented; declare a classic or quorum queue");
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> message_ttl_argument(const wire::field_table& arguments, std::string_view queue,
                                                  std::string& refusal) {
  for (const auto& entry : arguments.entries) {
    if (entry.name != "x-message-ttl") continue;
    std::optional<std::int64_t> ms;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) ms = static_cast<std::int64_t>(v);
        },
        entry.value.value);
    if (ms && *ms >= 0) return static_cast<std::uint64_t>(*ms);
    refusal = "invalid arg 'x-message-ttl' for queue '" + std::string(queue) + "' in vhost '/': " +
              (ms ? "the value is negative" : "the value is not an integer") +
              "; give the milliseconds a message may wait in the queue, e.g. 60000";
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace amqp::broker
