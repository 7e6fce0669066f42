#include "deliver/consume_arguments.hpp"

#include <array>
#include <chrono>
#include <variant>

#include "amqp/bus/client.hpp"
#include "topology/queue_arguments.hpp"

namespace amqp::broker {
namespace {

struct unbuilt {
  std::string_view name;
  std::string_view remedy;
};

constexpr std::string_view filter_remedy =
    "stream filtering (RabbitMQ 3.13) is not implemented; filter on the client, or declare a stream queue per "
    "filter value, each bound to what it wants";

// Each changes which messages a consumer is delivered, or when.
constexpr std::array<unbuilt, 3> unbuilt_arguments{{
    {"x-stream-filter", filter_remedy},
    {"x-stream-match-unfiltered", filter_remedy},
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

std::variant<bus::stream_start, consume_refusal> stream_offset(const wire::field_table& arguments,
                                                              std::string_view queue, std::string_view vhost,
                                                              std::chrono::system_clock::time_point now) {
  bus::stream_start start;
  const auto* offset = wire::find(arguments, "x-stream-offset");
  if (!offset) return start;
  using from = bus::stream_start::from;
  if (const auto* text = std::get_if<std::string>(&offset->value)) {
    if (*text == "next") return start;
    if (*text == "first") {
      start.kind = from::first;
      return start;
    }
    if (*text == "last") {
      start.kind = from::last;
      return start;
    }
    // An interval, as x-max-age's: what was stored within it, back from now.
    if (auto seconds = max_age_seconds(*text)) {
      start.kind = from::time;
      start.time = now - std::chrono::seconds(static_cast<std::int64_t>(*seconds));
      return start;
    }
  } else if (const auto* at = std::get_if<wire::timestamp_value>(&offset->value)) {
    start.kind = from::time;
    start.time = std::chrono::system_clock::time_point(std::chrono::seconds(static_cast<std::int64_t>(at->seconds)));
    return start;
  } else if (auto n = wire::integer_of(*offset)) {
    // Offsets count from 0, the bus's stream sequences from 1; one before the first is the first.
    if (*n < 0) {
      start.kind = from::first;
    } else {
      start.kind = from::sequence;
      start.sequence = static_cast<std::uint64_t>(*n) + 1;
    }
    return start;
  }
  // RabbitMQ 3.10 crashes the channel on such a value (541); the client's mistake is 406 here.
  return consume_refusal{wire::reply_code::precondition_failed,
                         invalid_argument_sentence("x-stream-offset", queue, vhost,
                                                   "give 'first', 'last', 'next', an offset (an integer), a "
                                                   "timestamp, or an interval such as '1h'")};
}

int consumer_priority(const wire::field_table& arguments) {
  for (const auto& entry : arguments.entries)
    if (entry.name == "x-priority")
      if (const auto priority = wire::integer_of(entry.value)) return static_cast<int>(*priority);
  return bus::lowest_consumer_priority;
}

}  // namespace amqp::broker
