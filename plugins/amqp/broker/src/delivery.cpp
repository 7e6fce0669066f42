#include "delivery.hpp"

#include <algorithm>
#include <span>

namespace amqp::broker {
namespace {

constexpr std::string_view delivery_count_header = "x-delivery-count";

std::span<const std::uint8_t> octets(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Sets (replacing any earlier value, e.g. one a client forged) the redelivery count.
void set_delivery_count(wire::field_table& headers, std::int64_t count) {
  auto& entries = headers.entries;
  std::erase_if(entries, [](const wire::table_entry& e) { return e.name == delivery_count_header; });
  entries.push_back({std::string(delivery_count_header), wire::field_value(count)});
}

}  // namespace

wire::result<std::string> delivered_properties(std::string_view property_octets, std::uint64_t delivered,
                                               delivery_count shown) {
  const bool counted = shown == delivery_count::always || (shown == delivery_count::on_redelivery && delivered > 1);
  if (!counted) {
    if (property_octets.empty()) return std::string(2, '\0');  // flags 0: no property present
    return std::string(property_octets);
  }
  wire::basic_properties props;
  if (!property_octets.empty()) {
    auto decoded = wire::decode_properties(octets(property_octets));
    if (!decoded) return decoded.error();
    props = std::move(*decoded);
  }
  if (!props.headers) props.headers.emplace();
  set_delivery_count(*props.headers, static_cast<std::int64_t>(delivered > 0 ? delivered - 1 : 0));
  return wire::encode_properties(props);
}

wire::result<std::string> stream_properties(std::string_view property_octets, std::uint64_t offset) {
  constexpr std::string_view offset_header = "x-stream-offset";
  wire::basic_properties props;
  if (!property_octets.empty()) {
    auto decoded = wire::decode_properties(octets(property_octets));
    if (!decoded) return decoded.error();
    props = std::move(*decoded);
  }
  if (!props.headers) props.headers.emplace();
  auto& entries = props.headers->entries;
  std::erase_if(entries, [&](const wire::table_entry& e) { return e.name == offset_header; });
  entries.push_back({std::string(offset_header), wire::field_value(static_cast<std::int64_t>(offset))});
  return wire::encode_properties(props);
}

}  // namespace amqp::broker
