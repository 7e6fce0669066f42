#include "topology/queue_arguments.hpp"

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <variant>

namespace amqp::broker {
namespace {

struct refused_argument {
  std::string_view name;
  std::string_view remedy;  // what to do instead
};

// Each entry changes which messages a consumer receives; nothing on the bus does that. The first
// two are a stream queue's retention, honoured there (stream_only).
constexpr std::array<refused_argument, 4> refused{{
    {"x-max-length-bytes",
     "the bus counts a classic or quorum queue's messages, not their bytes; bound the queue by x-max-length (a "
     "count), or declare a stream queue (x-queue-type 'stream'), whose bytes it bounds"},
    {"x-max-age", "only a stream queue's messages have an age limit; declare it with x-queue-type 'stream', or bound "
                  "a classic or quorum queue's messages with x-message-ttl"},
    {"x-max-priority", "there are no priority queues; use one queue per priority and consume the higher one first"},
    {"x-stream-max-segment-size-bytes",
     "the bus stores a stream queue in blocks of its own choosing; leave the argument unset"},
}};

bool stream_only(std::string_view name) { return name == "x-max-length-bytes" || name == "x-max-age"; }

// RabbitMQ's names of the AMQP field types, as its refusals of a value show them.
std::string_view rabbit_type_name(const wire::field_value& v) {
  static constexpr std::array<std::string_view, 17> names{
      "bool", "byte", "unsignedbyte", "short", "unsignedshort", "signedint", "unsignedint", "long", "float",
      "double", "decimal", "longstr", "binary", "timestamp", "table", "array", "void"};
  return names.at(v.value.index());
}

std::string sentence(std::string_view name, std::string_view remedy) {
  return "queue argument '" + std::string(name) + "' is not implemented: " + std::string(remedy);
}

}  // namespace

std::string invalid_argument_sentence(std::string_view name, std::string_view queue, std::string_view vhost,
                                      std::string_view why) {
  return "invalid arg '" + std::string(name) + "' for queue '" + std::string(queue) + "' in vhost '" +
         std::string(vhost) + "': " + std::string(why);
}

std::optional<routing::queue_type> declared_type(const wire::field_table& arguments) {
  const auto* type = wire::find(arguments, "x-queue-type");
  const auto* text = type ? std::get_if<std::string>(&type->value) : nullptr;
  return text ? routing::parse_queue_type(*text) : std::nullopt;
}

std::optional<std::string> refused_queue_argument(const wire::field_table& arguments) {
  const bool stream = declared_type(arguments) == routing::queue_type::stream;
  for (const auto& entry : arguments.entries) {
    for (const auto& r : refused)
      if (entry.name == r.name && !(stream && stream_only(r.name))) return sentence(r.name, r.remedy);
  }
  return std::nullopt;
}

std::optional<std::string> refused_by_queue_type(const wire::field_table& arguments, bool durable, bool exclusive,
                                                 bool auto_delete, bool server_named, std::string_view queue,
                                                 std::string_view vhost) {
  const auto type = declared_type(arguments);
  if (type != routing::queue_type::quorum && type != routing::queue_type::stream) return std::nullopt;
  const bool stream = type == routing::queue_type::stream;
  const std::string module = stream ? "rabbit_stream_queue" : "rabbit_quorum_queue";
  const auto for_queue = "for queue '" + std::string(queue) + "' in vhost '" + std::string(vhost) + "'";
  // RabbitMQ 3.10's order: the name, the arguments the type has no use for, then the properties
  // a replicated queue cannot have.
  if (server_named) return "Cannot declare a server-named queue for type " + module;
  static constexpr std::array<std::string_view, 4> quorum_unused{"x-max-priority", "x-queue-mode",
                                                                 "x-queue-master-locator", "x-queue-version"};
  // A stream keeps every message for its readers: nothing about a message's life in a queue
  // applies to it.
  static constexpr std::array<std::string_view, 13> stream_unused{
      "x-max-length", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
      "x-single-active-consumer", "x-expires", "x-overflow", "x-delivery-limit", "x-max-priority",
      "x-queue-mode", "x-queue-master-locator", "x-queue-version", "x-dead-letter-strategy"};
  for (const auto& entry : arguments.entries) {
    const bool unused = stream ? std::find(stream_unused.begin(), stream_unused.end(), entry.name) != stream_unused.end()
                               : std::find(quorum_unused.begin(), quorum_unused.end(), entry.name) != quorum_unused.end();
    if (unused) return "invalid arg '" + entry.name + "' " + for_queue + " of queue type " + module;
  }
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
    } else if (name == "x-max-age") {
      // Only a stream queue's (refused_queue_argument refused it on others).
      const auto* text = std::get_if<std::string>(&entry.value.value);
      if (!text) return invalid(name, "{unacceptable_type," + std::string(rabbit_type_name(entry.value)) + "}");
      auto seconds = max_age_seconds(*text);
      if (!seconds) return invalid(name, "invalid_max_age");
      def.max_age = *text;
    } else if (name == "x-max-length-bytes") {
      auto n = wire::integer_of(entry.value);
      if (!n) return invalid(name, "\"expected integer, got " + std::string(rabbit_type_name(entry.value)) + "\"");
      if (*n < 0) return invalid(name, "{value_negative," + std::to_string(*n) + "}");
      def.max_length_bytes = static_cast<std::uint64_t>(*n);
    } else if (name == "x-queue-type") {
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

std::optional<std::uint64_t> max_age_seconds(std::string_view text) {
  // RabbitMQ's units: years, months, days, hours, minutes, seconds (a year 365 days, a month 30).
  if (text.size() < 2) return std::nullopt;
  const char unit = text.back();
  std::uint64_t scale = 0;
  switch (unit) {
    case 'Y': scale = 365ULL * 24 * 3600; break;
    case 'M': scale = 30ULL * 24 * 3600; break;
    case 'D': scale = 24ULL * 3600; break;
    case 'h': scale = 3600; break;
    case 'm': scale = 60; break;
    case 's': scale = 1; break;
    default: return std::nullopt;
  }
  std::uint64_t n = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9' || n > 1'000'000'000) return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n * scale;
}

}  // namespace amqp::broker
