// The bucket's keys and JSON values, exactly the reference's so one bucket serves both.
#include <nlohmann/json.hpp>

#include "amqp/routing/names.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::routing {
namespace {

using json = nlohmann::json;
using wire::reply_code;

refusal malformed(std::string_view what, std::string why) {
  return refusal{reply_code::internal_error,
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

outcome<binding> parse_binding(const json& entry) {
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

// binding_filters admits only UTF-8 keys, so the replacement never happens; it keeps a
// stray octet from turning into an exception.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string exchange_key(std::string_view exchange) { return "x." + std::string(exchange); }
std::string queue_key(std::string_view queue) { return "q." + std::string(queue); }

std::optional<bucket_key> parse_bucket_key(std::string_view key) {
  if (key.size() < 3 || key[1] != '.') return std::nullopt;
  bucket_key parsed{bucket_key::kind::exchange, std::string(key.substr(2))};
  if (key[0] == 'x') {
    if (is_standard_exchange(parsed.name) || check_name("exchange", parsed.name)) return std::nullopt;
  } else if (key[0] == 'q') {
    parsed.what = bucket_key::kind::queue;
    if (check_name("queue", parsed.name)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return parsed;
}

std::string encode_exchange(const exchange_def& def) {
  json value{{"kind", to_string(def.kind)}, {"durable", def.durable}};
  if (def.auto_delete) value["auto_delete"] = true;
  if (def.internal) value["internal"] = true;
  return dump(value);
}

std::string encode_queue(const queue_def& def) {
  json value{{"durable", def.durable}};
  if (def.exclusive) value["exclusive"] = true;
  if (def.auto_delete) value["auto_delete"] = true;
  if (!def.bindings.empty()) {
    json bindings = json::array();
    for (const auto& b : def.bindings) bindings.push_back({{"exchange", b.exchange}, {"key", b.key}});
    value["bindings"] = std::move(bindings);
  }
  return dump(value);
}

outcome<exchange_def> parse_exchange(std::string_view text) {
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
  if (!durable || !auto_delete || !internal) {
    return malformed("exchange", "durable, auto_delete or internal is not a boolean");
  }
  return exchange_def{*parsed_kind, *durable, *auto_delete, *internal};
}

outcome<queue_def> parse_queue(std::string_view text) {
  auto value = parse_object(text);
  if (!value) return malformed("queue", "the value is not a JSON object");
  auto durable = flag(*value, "durable");
  auto exclusive = flag(*value, "exclusive");
  auto auto_delete = flag(*value, "auto_delete");
  if (!durable || !exclusive || !auto_delete) {
    return malformed("queue", "durable, exclusive or auto_delete is not a boolean");
  }
  queue_def def{*durable, *exclusive, *auto_delete, {}};
  auto bindings = value->find("bindings");
  if (bindings == value->end() || bindings->is_null()) return def;  // Go encodes nil as null
  if (!bindings->is_array()) return malformed("queue", "\"bindings\" is not an array");
  for (const auto& entry : *bindings) {
    auto b = parse_binding(entry);
    if (!b) return b.error();
    def.bindings.push_back(std::move(*b));
  }
  return def;
}

}  // namespace amqp::routing
