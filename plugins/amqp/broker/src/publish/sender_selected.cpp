#include "publish/sender_selected.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "amqp/wire/codec.hpp"

namespace amqp::broker {
namespace {

// RabbitMQ's name of a field's type, as its "unacceptable_type_in_header" text gives it.
std::string_view type_name(const wire::field_value& v) {
  static constexpr std::string_view names[] = {"bool",   "byte",    "unsignedbyte", "short",    "unsignedshort",
                                               "signedint", "unsignedint", "long",  "float",    "double",
                                               "decimal", "longstr", "binary",       "timestamp", "table",
                                               "array",  "void"};
  static_assert(std::size(names) == std::variant_size_v<wire::field_value::variant>);
  return names[v.value.index()];
}

}  // namespace

wire::result<std::vector<std::string>> read_sender_selected(std::string& property_octets) {
  std::vector<std::string> keys;
  // Cheap test first: most publishes carry neither.
  if (property_octets.find("CC") == std::string::npos) return keys;
  auto props = wire::decode_properties(
      std::span{reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  if (!props || !props->headers) return keys;
  auto& entries = props->headers->entries;
  bool bcc = false;
  for (const char* name : {"CC", "BCC"}) {
    const auto* value = wire::find(*props->headers, name);
    if (value == nullptr) continue;
    const auto* array = std::get_if<wire::field_array>(&value->value);
    if (array == nullptr) {
      return wire::refusal{wire::reply_code::precondition_failed,
                           "invalid message: {unacceptable_type_in_header,\"" + std::string(name) + "\"," +
                               std::string(type_name(*value)) + "}",
                           "give " + std::string(name) + " an array of routing keys"};
    }
    for (const auto& item : array->items)
      if (const auto* key = std::get_if<std::string>(&item.value)) keys.push_back(*key);
    bcc = bcc || std::string_view(name) == "BCC";
  }
  if (bcc) {
    std::erase_if(entries, [](const wire::table_entry& e) { return e.name == "BCC"; });
    property_octets = wire::encode_properties(*props);
  }
  return keys;
}

}  // namespace amqp::broker
