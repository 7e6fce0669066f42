#pragma once
// How RabbitMQ's management API shapes a list by its query string: `name` (a substring, or with
// `use_regex=true` a regular expression) filters by name, `sort` (a dotted field) and
// `sort_reverse` order, `page` and `page_size` (default 100, at most 500) make it a page object
// ({"filtered_count","item_count","items","page","page_count","page_size","total_count"}), and
// `columns` (dotted fields, comma-separated) keeps only those. Pure: no I/O.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace amqp::management {

using query = std::map<std::string, std::string, std::less<>>;

// The query string after '?', percent-decoded ('+' is a space there).
query parse_query(std::string_view text);
// A path segment or a query part, percent-decoded.
std::string percent_decode(std::string_view text, bool plus_is_space = false);

// RabbitMQ's properties_key of a binding without arguments, which names it in a path: "~" for an
// empty routing key, else the key quoted as a form value ("a.#" is "a.%23"); and back.
std::string properties_key(std::string_view routing_key);
std::string routing_key_of(std::string_view properties_key);

// The list as the query shapes it; the 400 reason when a parameter is not valid.
struct shaped {
  nlohmann::json body;
  std::optional<std::string> bad_request;
};
shaped shape_list(nlohmann::json items, const query& q);
// One object with only `columns` kept (unchanged without them).
nlohmann::json keep_columns(const nlohmann::json& item, const query& q);

}  // namespace amqp::management
