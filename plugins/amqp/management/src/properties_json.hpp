#pragma once
// AMQP values as the management API writes and reads them in JSON, RabbitMQ's way: a field table
// is an object, an array a list, a long string a string, an integer of any width a number (one
// read from JSON becomes a signed 64-bit `l`, as RabbitMQ makes it), void null; and a message's
// basic properties, by their AMQP names.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "amqp/wire/field_table.hpp"
#include "amqp/wire/properties.hpp"

namespace amqp::management {

nlohmann::json to_json(const wire::field_value& value);
nlohmann::json to_json(const wire::field_table& table);
nlohmann::json to_json(const wire::basic_properties& props);

// nullopt with `why` set when the JSON has no AMQP form (a non-object table, a float as an
// argument where RabbitMQ refuses one is left to the broker's own checks).
std::optional<wire::field_table> table_of(const nlohmann::json& object, std::string& why);
std::optional<wire::basic_properties> properties_of(const nlohmann::json& object, std::string& why);

}  // namespace amqp::management
