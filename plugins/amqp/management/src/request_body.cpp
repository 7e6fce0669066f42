#include "request_body.hpp"

#include <charconv>

#include "properties_json.hpp"

namespace amqp::management {

std::optional<request_body> request_body::parse(const std::string& text, std::string& why) {
  if (text.empty()) return request_body{nlohmann::json::object()};
  auto body = nlohmann::json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    why = "the request body must be a JSON object";
    return std::nullopt;
  }
  return request_body{std::move(body)};
}

void request_body::refuse(const char* key, const char* wanted) {
  if (!error_) error_ = std::string(key) + " must be " + wanted + ", not " + body_[key].dump();
}

bool request_body::flag(const char* key, bool otherwise) {
  if (!body_.contains(key)) return otherwise;
  const auto& v = body_[key];
  if (v.is_boolean()) return v.get<bool>();
  if (v == "true") return true;
  if (v == "false") return false;
  refuse(key, "true or false");
  return otherwise;
}

std::int64_t request_body::number(const char* key, std::int64_t otherwise) {
  if (!body_.contains(key)) return otherwise;
  const auto& v = body_[key];
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc{} && end == s.data() + s.size() && !s.empty()) return n;
  }
  refuse(key, "an integer");
  return otherwise;
}

std::string request_body::text(const char* key, std::string otherwise) {
  if (!body_.contains(key)) return otherwise;
  const auto& v = body_[key];
  if (v.is_string()) return v.get<std::string>();
  refuse(key, "a string");
  return otherwise;
}

wire::field_table request_body::table(const char* key) {
  std::string why;
  auto t = table_of(value(key), why);
  if (t) return std::move(*t);
  if (!error_) error_ = std::string(key) + ": " + why;
  return {};
}

const nlohmann::json& request_body::value(const char* key) const {
  static const nlohmann::json absent;
  return body_.contains(key) ? body_[key] : absent;
}

}  // namespace amqp::management
