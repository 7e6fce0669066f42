#include "consume_arguments.hpp"

#include <array>
#include <variant>

#include "amqp/bus/client.hpp"
#include "queue_arguments.hpp"

namespace amqp::broker {
namespace {

struct unbuilt {
  std::string_view name;
  std::string_view remedy;
};

constexpr std::string_view stream_remedy = "stream queues are not implemented; consume a classic or quorum queue";

// Each changes which messages a consumer is delivered, or when.
constexpr std::array<unbuilt, 4> unbuilt_arguments{{
    {"x-stream-offset", stream_remedy},
    {"x-stream-filter", stream_remedy},
    {"x-stream-match-unfiltered", stream_remedy},
    {"x-credit", "credit-based flow is not implemented; bound the consumer with basic.qos"},
}};

consume_refusal not_implemented(std::string_view name, std::string_view remedy) {
  return {wire::reply_code::not_implemented,
          "consumer argument '" + std::string(name) + "' is not implemented: " + std::string(remedy)};
}

}  // namespace

std::optional<consume_refusal> refused_consume_argument(const wire::field_table& arguments, std::string_view queue,
                                                        std::string_view vhost) {
  auto invalid = [&](std::string_view name, std::string_view why) {
    return consume_refusal{wire::reply_code::precondition_failed, invalid_argument_sentence(name, queue, vhost, why)};
  };
  for (const auto& entry : arguments.entries) {
    const auto& name = entry.name;
    for (const auto& u : unbuilt_arguments)
      if (name == u.name) return not_implemented(u.name, u.remedy);
    if (name == "x-priority") {
      const auto priority = wire::integer_of(entry.value);
      if (!priority) return invalid(name, "the value is not an integer; give a priority, e.g. 0");
      // The bus serves ten levels (bus::lowest_consumer_priority..highest_consumer_priority);
      // mapping more onto them would serve some priorities alike, which RabbitMQ does not.
      if (*priority < bus::lowest_consumer_priority || *priority > bus::highest_consumer_priority)
        return {{wire::reply_code::not_implemented,
                 "consumer argument 'x-priority' " + std::to_string(*priority) +
                     " is not implemented: consumer priorities are " + std::to_string(bus::lowest_consumer_priority) +
                     " (the default) to " + std::to_string(bus::highest_consumer_priority) +
                     ", higher served first; give the queue's consumers priorities in that range, in the same "
                     "order"}};
    } else if (name == "x-cancel-on-ha-failover") {
      const auto* cancel = std::get_if<bool>(&entry.value.value);
      if (!cancel) return invalid(name, "the value is not a boolean; give true or false");
      if (*cancel)
        return not_implemented("x-cancel-on-ha-failover=true", "a consumer goes on through a failover of the bus "
                                                               "and is not cancelled; leave the argument unset");
    }
  }
  return std::nullopt;
}

int consumer_priority(const wire::field_table& arguments) {
  for (const auto& entry : arguments.entries)
    if (entry.name == "x-priority")
      if (const auto priority = wire::integer_of(entry.value)) return static_cast<int>(*priority);
  return bus::lowest_consumer_priority;
}

}  // namespace amqp::broker
