#pragma once
// A request body's fields as RabbitMQ's management API reads them: a boolean is true or false,
// or the string "true" or "false"; a number may come as a string (rabbitmqadmin sends every
// field it is given on its command line as one). A field of any other form is the request's
// first error, which the caller answers with 400.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "amqp/wire/field_table.hpp"

namespace amqp::management {

class request_body {
 public:
  // nullopt with `why` set when the text is neither empty nor a JSON object.
  static std::optional<request_body> parse(const std::string& text, std::string& why);

  bool flag(const char* key, bool otherwise);
  std::int64_t number(const char* key, std::int64_t otherwise);
  std::string text(const char* key, std::string otherwise);
  // A field table (arguments), RabbitMQ's JSON form of one; absent: empty.
  wire::field_table table(const char* key);
  // The field as it is (null when absent), for tables and properties.
  const nlohmann::json& value(const char* key) const;
  bool has(const char* key) const { return body_.contains(key); }
  // The first field that had none of the forms asked for.
  const std::optional<std::string>& error() const { return error_; }

 private:
  explicit request_body(nlohmann::json body) : body_(std::move(body)) {}
  void refuse(const char* key, const char* wanted);

  nlohmann::json body_;
  std::optional<std::string> error_;
};

}  // namespace amqp::management
