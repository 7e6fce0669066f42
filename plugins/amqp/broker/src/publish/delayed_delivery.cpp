#include "publish/delayed_delivery.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <span>
#include <variant>

#include "amqp/bus/client.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/wire/codec.hpp"

namespace amqp::broker {
namespace {

constexpr std::string_view delay_header = "x-delay";
constexpr std::string_view publish_root = "amqp.";  // every publish subject's (routing::publish_subject)

wire::refusal refused(std::string why) {
  return wire::refusal{wire::reply_code::precondition_failed,
                       "invalid x-delay header: " + std::move(why),
                       "give x-delay a whole number of milliseconds, at most 4294967295"};
}

// The header's value in milliseconds as the plugin takes it; nullopt with `why` set when refused.
std::optional<double> milliseconds_of(const wire::field_value& value, std::string& why) {
  if (auto n = wire::integer_of(value)) return static_cast<double>(*n);
  if (const auto* f = std::get_if<float>(&value.value)) return std::trunc(*f);
  if (const auto* d = std::get_if<double>(&value.value)) return std::trunc(*d);
  if (const auto* dec = std::get_if<wire::decimal_value>(&value.value))
    return std::trunc(dec->value / std::pow(10.0, dec->scale));
  if (const auto* text = std::get_if<std::string>(&value.value)) {
    std::int64_t n = 0;
    const char* begin = text->data() + (text->starts_with('+') ? 1 : 0);
    const char* end = text->data() + text->size();
    auto [ptr, ec] = std::from_chars(begin, end, n);
    if (ec == std::errc{} && ptr == end && begin != end) return static_cast<double>(n);
    why = "'" + *text + "' is not an integer";
    return std::nullopt;
  }
  why = "its value is not a number";
  return std::nullopt;
}

}  // namespace

wire::result<std::optional<delayed_publish>> read_delay(const std::string& property_octets) {
  // Cheap test first: most publishes carry no x-delay.
  if (property_octets.find(delay_header) == std::string::npos) return std::optional<delayed_publish>{};
  auto props = wire::decode_properties(
      std::span{reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  if (!props || !props->headers) return std::optional<delayed_publish>{};
  auto entry = std::find_if(props->headers->entries.begin(), props->headers->entries.end(),
                             [](const wire::table_entry& e) { return e.name == delay_header; });
  if (entry == props->headers->entries.end()) return std::optional<delayed_publish>{};
  std::string why;
  const auto ms = milliseconds_of(entry->value, why);
  if (!ms) return refused(why);
  if (*ms <= 0) return std::optional<delayed_publish>{};
  if (*ms > static_cast<double>(max_delay_ms))
    return refused(std::to_string(static_cast<std::uint64_t>(*ms)) + " ms is longer than a message may wait");
  const auto delay = static_cast<std::int64_t>(*ms);
  // The plugin's signedint; a delay past its range keeps its size.
  entry->value = delay <= INT32_MAX ? wire::field_value(static_cast<std::int32_t>(-delay))
                                    : wire::field_value(static_cast<std::int64_t>(-delay));
  delayed_publish out;
  out.delay = std::chrono::milliseconds{delay};
  out.property_octets = wire::encode_properties(*props);
  return std::optional<delayed_publish>{std::move(out)};
}

std::string delayed_subject_prefix(const std::string& exchange) {
  return std::string{bus::delayed_subject_root} + "." + routing::exchange_word(exchange);
}

std::string due_subject(std::string_view publish_subject) {
  return std::string{bus::due_subject_root} + "." + std::string{publish_subject.substr(publish_root.size())};
}

std::optional<routing::address> due_address(std::string_view due_subject) {
  const std::string root = std::string{bus::due_subject_root} + ".";
  if (!due_subject.starts_with(root)) return std::nullopt;
  return routing::split_subject(std::string{publish_root} + std::string{due_subject.substr(root.size())});
}

}  // namespace amqp::broker
