#include "properties_json.hpp"

#include <cstdint>
#include <set>
#include <variant>

namespace amqp::management {
namespace {

using json = nlohmann::json;

std::optional<wire::field_value> value_of(const json& v, std::string& why) {
  if (v.is_null()) return wire::field_value{wire::void_value{}};
  if (v.is_boolean()) return wire::field_value{v.get<bool>()};
  if (v.is_number_integer()) return wire::field_value{v.get<std::int64_t>()};
  if (v.is_number_unsigned()) return wire::field_value{static_cast<std::int64_t>(v.get<std::uint64_t>())};
  if (v.is_number_float()) return wire::field_value{v.get<double>()};
  if (v.is_string()) return wire::field_value{v.get<std::string>()};
  if (v.is_array()) {
    wire::field_array a;
    for (const auto& item : v) {
      auto value = value_of(item, why);
      if (!value) return std::nullopt;
      a.items.push_back(std::move(*value));
    }
    return wire::field_value{std::move(a)};
  }
  if (v.is_object()) {
    auto table = table_of(v, why);
    if (!table) return std::nullopt;
    return wire::field_value{std::move(*table)};
  }
  why = "a value of JSON type " + std::string(v.type_name()) + " has no AMQP form";
  return std::nullopt;
}

// A non-negative integer however nlohmann holds it (a parsed one is unsigned, a built one signed).
std::optional<std::uint64_t> unsigned_of(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

template <class T>
void put(json& out, const char* key, const std::optional<T>& value) {
  if (value) out[key] = *value;
}

std::optional<std::string> text_of(const json& object, const char* key, std::string& why) {
  if (!object.contains(key)) return std::nullopt;
  if (!object[key].is_string()) why = std::string("properties.") + key + " must be a string";
  return object[key].is_string() ? std::optional(object[key].get<std::string>()) : std::nullopt;
}

}  // namespace

json to_json(const wire::field_value& value) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, wire::decimal_value>) {
          double d = v.value;
          for (int i = 0; i < v.scale; ++i) d /= 10;
          return d;
        } else if constexpr (std::is_same_v<T, wire::byte_array>) {
          return v.bytes;
        } else if constexpr (std::is_same_v<T, wire::timestamp_value>) {
          return v.seconds;
        } else if constexpr (std::is_same_v<T, wire::void_value>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, wire::field_table>) {
          return to_json(v);
        } else if constexpr (std::is_same_v<T, wire::field_array>) {
          json a = json::array();
          for (const auto& item : v.items) a.push_back(to_json(item));
          return a;
        } else {
          return v;
        }
      },
      value.value);
}

json to_json(const wire::field_table& table) {
  json out = json::object();
  for (const auto& e : table.entries) out[e.name] = to_json(e.value);
  return out;
}

json to_json(const wire::basic_properties& p) {
  json out = json::object();
  put(out, "content_type", p.content_type);
  put(out, "content_encoding", p.content_encoding);
  if (p.headers) out["headers"] = to_json(*p.headers);
  put(out, "delivery_mode", p.delivery_mode);
  put(out, "priority", p.priority);
  put(out, "correlation_id", p.correlation_id);
  put(out, "reply_to", p.reply_to);
  put(out, "expiration", p.expiration);
  put(out, "message_id", p.message_id);
  put(out, "timestamp", p.timestamp);
  put(out, "type", p.type);
  put(out, "user_id", p.user_id);
  put(out, "app_id", p.app_id);
  put(out, "cluster_id", p.cluster_id);
  return out;
}

std::optional<wire::field_table> table_of(const json& object, std::string& why) {
  if (object.is_null()) return wire::field_table{};
  if (!object.is_object()) {
    why = "arguments and headers must be JSON objects";
    return std::nullopt;
  }
  wire::field_table t;
  for (const auto& [key, v] : object.items()) {
    auto value = value_of(v, why);
    if (!value) return std::nullopt;
    t.entries.push_back(wire::table_entry{key, std::move(*value)});
  }
  return t;
}

std::optional<wire::basic_properties> properties_of(const json& object, std::string& why) {
  wire::basic_properties p;
  if (object.is_null()) return p;
  if (!object.is_object()) {
    why = "properties must be a JSON object";
    return std::nullopt;
  }
  static const std::set<std::string, std::less<>> known{
      "content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id", "reply_to",
      "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id"};
  for (const auto& [key, unused] : object.items()) {
    if (!known.contains(key)) {
      why = "properties." + key + " is not a basic property; these are " +
            "content_type, content_encoding, headers, delivery_mode, priority, correlation_id, reply_to, "
            "expiration, message_id, timestamp, type, user_id, app_id and cluster_id";
      return std::nullopt;
    }
  }
  for (auto [key, field] : {std::pair{"content_type", &p.content_type}, std::pair{"content_encoding", &p.content_encoding},
                            std::pair{"correlation_id", &p.correlation_id}, std::pair{"reply_to", &p.reply_to},
                            std::pair{"expiration", &p.expiration}, std::pair{"message_id", &p.message_id},
                            std::pair{"type", &p.type}, std::pair{"user_id", &p.user_id},
                            std::pair{"app_id", &p.app_id}, std::pair{"cluster_id", &p.cluster_id}}) {
    *field = text_of(object, key, why);
    if (!why.empty()) return std::nullopt;
  }
  for (auto [key, field] : {std::pair{"delivery_mode", &p.delivery_mode}, std::pair{"priority", &p.priority}}) {
    if (!object.contains(key)) continue;
    const auto n = unsigned_of(object[key]);
    if (!n || *n > 255) {
      why = std::string("properties.") + key + " must be a number from 0 to 255";
      return std::nullopt;
    }
    *field = static_cast<std::uint8_t>(*n);
  }
  if (object.contains("timestamp")) {
    p.timestamp = unsigned_of(object["timestamp"]);
    if (!p.timestamp) {
      why = "properties.timestamp must be a number of seconds";
      return std::nullopt;
    }
  }
  if (object.contains("headers")) {
    auto headers = table_of(object["headers"], why);
    if (!headers) return std::nullopt;
    p.headers = std::move(*headers);
  }
  return p;
}

}  // namespace amqp::management
