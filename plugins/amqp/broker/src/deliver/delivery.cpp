#include "deliver/delivery.hpp"

#include <algorithm>
#include <span>

namespace amqp::broker {
namespace {

constexpr std::string_view delivery_count_header = "x-delivery-count";

std::span<const std::uint8_t> octets(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// The properties with header `name` set to `value`, replacing any earlier one (e.g. one a client
// forged); a message without properties gets just that header.
wire::result<std::string> with_header(std::string_view property_octets, std::string_view name, std::int64_t value) {
  wire::basic_properties props;
  if (!property_octets.empty()) {
    auto decoded = wire::decode_properties(octets(property_octets));
    if (!decoded) return decoded.error();
    props = std::move(*decoded);
  }
  if (!props.headers) props.headers.emplace();
  auto& entries = props.headers->entries;
  std::erase_if(entries, [&](const wire::table_entry& e) { return e.name == name; });
  entries.push_back({std::string(name), wire::field_value(value)});
  return wire::encode_properties(props);
}

}  // namespace

wire::result<std::string> delivered_properties(std::string_view property_octets, std::uint64_t delivered,
                                               delivery_count shown) {
  const bool counted = shown == delivery_count::always || (shown == delivery_count::on_redelivery && delivered > 1);
  if (!counted) {
    if (property_octets.empty()) return std::string(2, '\0');  // flags 0: no property present
    return std::string(property_octets);
  }
  return with_header(property_octets, delivery_count_header, static_cast<std::int64_t>(delivered > 0 ? delivered - 1 : 0));
}

wire::result<std::string> stream_properties(std::string_view property_octets, std::uint64_t offset) {
  return with_header(property_octets, "x-stream-offset", static_cast<std::int64_t>(offset));
}

}  // namespace amqp::broker
