#include "queue_arguments.hpp"

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"

#include <array>
#include <string_view>
#include <variant>

namespace amqp::broker {
namespace {

struct refused_argument {
  std::string_view name;
  std::string_view remedy;  // what to do instead
};

// Each entry changes which messages a consumer receives; nothing on the bus does that.
constexpr std::array<refused_argument, 4> refused{{
    {"x-max-length-bytes",
     "the bus counts a queue's messages, not their bytes; bound the queue by x-max-length (a count)"},
    {"x-max-priority", "there are no priority queues; use one queue per priority and consume the higher one first"},
    {"x-max-age", "stream queues are not implemented; declare a classic or quorum queue"},
    {"x-stream-max-segment-size-bytes", "stream queues are not implemented; declare a classic or quorum queue"},
}};

std::string sentence(std::string_view name, std::string_view remedy) {
  return "queue argument '" + std::string(name) + "' is not implemented: " + std::string(remedy);
}

}  // namespace

std::string invalid_argument_sentence(std::string_view name, std::string_view queue, std::string_view vhost,
                                      std::string_view why) {
  return "invalid arg '" + std::string(name) + "' for queue '" + std::string(queue) + "' in vhost '" +
         std::string(vhost) + "': " + std::string(why);
}

std::optional<std::string> refused_queue_argument(const wire::field_table& arguments) {
  for (const auto& entry : arguments.entries) {
    for (const auto& r : refused)
      if (entry.name == r.name) return sentence(r.name, r.remedy);
    if (entry.name == "x-queue-type") {
      const auto* type = std::get_if<std::string>(&entry.value.value);
      if (type && *type == "stream")
        return sentence("x-queue-type=stream", "stream queues are not implemented; declare a classic or quorum queue");
    }
  }
  return std::nullopt;
}

std::optional<std::string> refused_by_queue_type(const wire::field_table& arguments, bool durable, bool exclusive,
                                                 bool auto_delete, bool server_named, std::string_view queue,
                                                 std::string_view vhost) {
  const auto* type = wire::find(arguments, "x-queue-type");
  const auto* text = type ? std::get_if<std::string>(&type->value) : nullptr;
  if (!text || routing::parse_queue_type(*text) != routing::queue_type::quorum) return std::nullopt;
  const auto for_queue = "for queue '" + std::string(queue) + "' in vhost '" + std::string(vhost) + "'";
  // RabbitMQ 3.10's order: the name, the arguments its quorum queues have no use for, then the
  // properties a replicated queue cannot have.
  if (server_named) return std::string("Cannot declare a server-named queue for type rabbit_quorum_queue");
  for (std::string_view name : {"x-max-priority", "x-queue-mode", "x-queue-master-locator", "x-queue-version"})
    if (wire::find(arguments, name)) return "invalid arg '" + std::string(name) + "' " + for_queue + " of queue type rabbit_quorum_queue";
  if (auto_delete) return "invalid property 'auto-delete' " + for_queue;
  if (exclusive) return "invalid property 'exclusive-owner' " + for_queue;
  if (!durable) return "invalid property 'non-durable' " + for_queue;
  return std::nullopt;
}

bool read_queue_arguments(const wire::field_table& arguments, std::string_view queue, std::string_view vhost,
                          routing::name_rules names,
                          routing::queue_def& def, std::string& refusal) {
  auto invalid = [&](std::string_view name, std::string_view why) {
    refusal = invalid_argument_sentence(name, queue, vhost, why);
    return false;
  };
  for (const auto& entry : arguments.entries) {
    const auto& name = entry.name;
    if (name == "x-message-ttl" || name == "x-delivery-limit" || name == "x-expires" || name == "x-max-length") {
      const bool ms = name == "x-message-ttl" || name == "x-expires";
      auto n = wire::integer_of(entry.value);
      if (!n) return invalid(name, std::string("the value is not an integer; give a count, e.g. ") +
                                       (ms ? "60000 (milliseconds)" : "5"));
      // RabbitMQ 4 reads a delivery limit of -1 as none, which undoes a quorum queue's default.
      if (*n == -1 && name == "x-delivery-limit") {
        def.unlimited_deliveries = true;
        continue;
      }
      if (*n < 0)
        return invalid(name, name == "x-delivery-limit" ? "the value is negative; give a count of 0 or more, or -1 for no limit"
                                                        : "the value is negative; give a count of 0 or more");
      if (*n == 0 && name == "x-expires")
        return invalid(name, "the value is zero; give the milliseconds an unused queue stays, 1 or more");
      auto& field = name == "x-message-ttl"  ? def.message_ttl
                    : name == "x-expires"    ? def.expires
                    : name == "x-max-length" ? def.max_length
                                             : def.delivery_limit;
      field = static_cast<std::uint64_t>(*n);
    } else if (name == "x-dead-letter-exchange") {
      const auto* exchange = std::get_if<std::string>(&entry.value.value);
      if (!exchange) return invalid(name, "the value is not a string; give the name of the exchange to dead-letter to");
      if (!exchange->empty()) {
        if (auto bad = routing::check_name(names, "exchange", *exchange)) return invalid(name, bad->text);
      }
      if (!def.dead_letter) def.dead_letter.emplace();
      def.dead_letter->exchange = *exchange;
    } else if (name == "x-dead-letter-routing-key") {
      const auto* key = std::get_if<std::string>(&entry.value.value);
      if (!key) return invalid(name, "the value is not a string; give the routing key dead letters are published with");
      if (key->size() > routing::max_routing_key_length)
        return invalid(name, "the key is longer than 255 octets; give a shorter routing key");
      if (!def.dead_letter) def.dead_letter.emplace();
      def.dead_letter->routing_key = *key;
    } else if (name == "x-overflow") {
      const auto* text = std::get_if<std::string>(&entry.value.value);
      auto mode = text ? routing::parse_overflow(*text) : std::nullopt;
      if (!mode) return invalid(name, "the value is not 'drop-head', 'reject-publish' or 'reject-publish-dlx'");
      def.overflow = *mode;
    } else if (name == "x-single-active-consumer") {
      const auto* on = std::get_if<bool>(&entry.value.value);
      if (!on) return invalid(name, "the value is not a boolean; give true or false");
      def.single_active_consumer = *on;
    } else if (name == "x-queue-type") {
      // Stream was refused before; any other type is not one RabbitMQ knows either.
      const auto* text = std::get_if<std::string>(&entry.value.value);
      auto type = text ? routing::parse_queue_type(*text) : std::nullopt;
      if (!type) return invalid(name, "the value is not 'classic', 'quorum' or 'stream'; give one of them");
      def.declared_type = *type;
    } else if (name == "x-dead-letter-strategy") {
      const auto* strategy = std::get_if<std::string>(&entry.value.value);
      if (!strategy || (*strategy != "at-most-once" && *strategy != "at-least-once"))
        return invalid(name, "the value is neither 'at-most-once' nor 'at-least-once'");
    }
  }
  if (def.dead_letter && !wire::find(arguments, "x-dead-letter-exchange")) {
    return invalid("x-dead-letter-routing-key",
                   "routing_key_but_no_dlx_defined; give x-dead-letter-exchange too ('' for the default exchange)");
  }
  return true;
}

}  // namespace amqp::broker
