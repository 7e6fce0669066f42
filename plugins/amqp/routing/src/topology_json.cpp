// The bucket's keys and JSON values, exactly the reference's so one bucket serves both.
#include <nlohmann/json.hpp>

#include "amqp/routing/names.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::routing {
namespace {

using json = nlohmann::json;
using wire::reply_code;

wire::refusal malformed(std::string_view what, std::string why) {
  return wire::refusal{reply_code::internal_error,
                       "malformed " + std::string(what) + " in the topology bucket: " + std::move(why)};
}

// Reads an optional boolean member; false when absent. nullopt when present but not a bool.
std::optional<bool> flag(const json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end()) return false;
  if (!it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

std::optional<json> parse_object(std::string_view text) {
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

wire::result<binding> parse_binding(const json& entry) {
  if (!entry.is_object()) return malformed("queue", "a binding is not an object");
  auto exchange = entry.find("exchange");
  auto key = entry.find("key");
  // The reference omits neither, but Go would read a missing string as "".
  if ((exchange != entry.end() && !exchange->is_string()) ||
      (key != entry.end() && !key->is_string())) {
    return malformed("queue", "a binding's exchange or key is not a string");
  }
  return binding{exchange == entry.end() ? std::string() : exchange->get<std::string>(),
                 key == entry.end() ? std::string() : key->get<std::string>()};
}

// An optional array member parsed entry by entry; null is absent (Go encodes nil as null).
template <class T, class Parse>
std::optional<wire::refusal> parse_list(const json& object, const char* name, std::vector<T>& out, Parse parse) {
  auto list = object.find(name);
  if (list == object.end() || list->is_null()) return std::nullopt;
  if (!list->is_array()) return malformed("queue", "member " + std::string(name) + " is not an array");
  for (const auto& entry : *list) {
    auto parsed = parse(entry);
    if (!parsed) return parsed.error();
    out.push_back(std::move(*parsed));
  }
  return std::nullopt;
}

// binding_filters admits only UTF-8 keys, so the replacement never happens; it keeps a
// stray octet from turning into an exception.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string exchange_key(std::string_view exchange) { return "x." + exchange_word(exchange); }
std::string queue_key(std::string_view queue) { return "q." + name_word(queue); }
std::string use_key(std::string_view queue) { return "u." + name_word(queue); }
std::string policy_key(std::string_view policy) { return "p." + name_word(policy); }

std::optional<bucket_key> parse_bucket_key(std::string_view key) {
  if (key.size() < 3 || key[1] != '.') return std::nullopt;
  const auto word = key.substr(2);
  std::optional<std::string> name;
  bucket_key::kind what = bucket_key::kind::exchange;
  if (key[0] == 'x') {
    name = exchange_of_word(word);
    if (name && is_standard_exchange(*name)) return std::nullopt;
  } else if (key[0] == 'q' || key[0] == 'u' || key[0] == 'p') {
    what = key[0] == 'q' ? bucket_key::kind::queue : key[0] == 'u' ? bucket_key::kind::use : bucket_key::kind::policy;
    name = name_of_word(word);
  }
  // Read in either mode: whichever rules declared a name, its key means that name.
  const auto* noun = key[0] == 'x' ? "exchange" : key[0] == 'p' ? "policy" : "queue";
  if (!name || check_name(name_rules::escaped, noun, *name)) return std::nullopt;
  return bucket_key{what, std::move(*name)};
}

std::string encode_exchange(const exchange_def& def) {
  json value{{"kind", to_string(def.kind)}, {"durable", def.durable}};
  if (def.auto_delete) value["auto_delete"] = true;
  if (def.internal) value["internal"] = true;
  if (def.delayed) value["delayed"] = true;
  return dump(value);
}

std::string encode_queue(const queue_def& def) {
  json value{{"durable", def.durable}};
  if (def.exclusive) value["exclusive"] = true;
  if (def.auto_delete) value["auto_delete"] = true;
  if (!def.bindings.empty()) {
    json bindings = json::array();
    for (const auto& b : def.bindings) {
      bindings.push_back(json{{"exchange", b.exchange}, {"key", b.key}});
    }
    value["bindings"] = std::move(bindings);
  }
  if (def.message_ttl) value["message_ttl"] = *def.message_ttl;
  if (def.dead_letter) {
    json target{{"exchange", def.dead_letter->exchange}};
    if (def.dead_letter->routing_key) target["routing_key"] = *def.dead_letter->routing_key;
    value["dead_letter"] = std::move(target);
  }
  if (def.delivery_limit) value["delivery_limit"] = *def.delivery_limit;
  if (def.unlimited_deliveries) value["delivery_limit"] = -1;
  if (def.expires) value["expires"] = *def.expires;
  if (def.single_active_consumer) value["single_active_consumer"] = true;
  if (def.max_length) value["max_length"] = *def.max_length;
  if (def.overflow) value["overflow"] = to_string(*def.overflow);
  if (def.declared_type) value["type"] = to_string(*def.declared_type);
  if (def.max_age) value["max_age"] = *def.max_age;
  if (def.max_length_bytes) value["max_length_bytes"] = *def.max_length_bytes;
  return dump(value);
}

wire::result<exchange_def> parse_exchange(std::string_view text) {
  auto value = parse_object(text);
  if (!value) return malformed("exchange", "the value is not a JSON object");
  auto kind = value->find("kind");
  if (kind == value->end() || !kind->is_string()) {
    return malformed("exchange", "it has no \"kind\" string");
  }
  auto parsed_kind = parse_exchange_kind(kind->get<std::string>());
  if (!parsed_kind) return malformed("exchange", parsed_kind.error().text);
  auto durable = flag(*value, "durable");
  auto auto_delete = flag(*value, "auto_delete");
  auto internal = flag(*value, "internal");
  auto delayed = flag(*value, "delayed");
  if (!durable || !auto_delete || !internal || !delayed) {
    return malformed("exchange", "durable, auto_delete, internal or delayed is not a boolean");
  }
  return exchange_def{*parsed_kind, *durable, *auto_delete, *internal, *delayed};
}

wire::result<queue_def> parse_queue(std::string_view text) {
  auto value = parse_object(text);
  if (!value) return malformed("queue", "the value is not a JSON object");
  auto durable = flag(*value, "durable");
  auto exclusive = flag(*value, "exclusive");
  auto auto_delete = flag(*value, "auto_delete");
  if (!durable || !exclusive || !auto_delete) {
    return malformed("queue", "durable, exclusive or auto_delete is not a boolean");
  }
  queue_def def{*durable, *exclusive, *auto_delete, {}, {}};
  if (auto ttl = value->find("message_ttl"); ttl != value->end()) {
    if (!ttl->is_number_unsigned()) return malformed("queue", "\"message_ttl\" is not a count of milliseconds");
    def.message_ttl = ttl->get<std::uint64_t>();
  }
  if (auto target = value->find("dead_letter"); target != value->end()) {
    auto exchange = target->is_object() ? target->find("exchange") : target->end();
    if (exchange == target->end() || !exchange->is_string())
      return malformed("queue", "\"dead_letter\" is not an object with an \"exchange\" string");
    def.dead_letter = dead_letter_target{exchange->get<std::string>(), std::nullopt};
    if (auto key = target->find("routing_key"); key != target->end()) {
      if (!key->is_string()) return malformed("queue", "\"dead_letter\".\"routing_key\" is not a string");
      def.dead_letter->routing_key = key->get<std::string>();
    }
  }
  for (auto [member, field] : {std::pair{"delivery_limit", &queue_def::delivery_limit}, std::pair{"expires", &queue_def::expires},
                               std::pair{"max_length", &queue_def::max_length},
                               std::pair{"max_length_bytes", &queue_def::max_length_bytes}}) {
    if (auto count = value->find(member); count != value->end()) {
      if (field == &queue_def::delivery_limit && count->is_number_integer() && count->get<std::int64_t>() == -1) {
        def.unlimited_deliveries = true;
        continue;
      }
      if (!count->is_number_unsigned()) return malformed("queue", "\"" + std::string(member) + "\" is not a count");
      def.*field = count->get<std::uint64_t>();
    }
  }
  if (auto overflow = value->find("overflow"); overflow != value->end()) {
    auto mode = overflow->is_string() ? parse_overflow(overflow->get<std::string>()) : std::nullopt;
    if (!mode) return malformed("queue", "\"overflow\" is not drop-head, reject-publish or reject-publish-dlx");
    def.overflow = *mode;
  }
  if (auto type = value->find("type"); type != value->end()) {
    auto parsed = type->is_string() ? parse_queue_type(type->get<std::string>()) : std::nullopt;
    if (!parsed) return malformed("queue", "\"type\" is not classic, quorum or stream");
    def.declared_type = *parsed;
  }
  if (auto age = value->find("max_age"); age != value->end()) {
    if (!age->is_string()) return malformed("queue", "\"max_age\" is not a string");
    def.max_age = age->get<std::string>();
  }
  if (auto single = value->find("single_active_consumer"); single != value->end()) {
    if (!single->is_boolean()) return malformed("queue", "\"single_active_consumer\" is not a boolean");
    def.single_active_consumer = single->get<bool>();
  }
  if (auto failed = parse_list(*value, "bindings", def.bindings, parse_binding)) return *failed;
  return def;
}

}  // namespace amqp::routing
