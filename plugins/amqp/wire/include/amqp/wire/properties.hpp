#pragma once
// The 13 basic content properties (spec §4.2.6 and the basic class). Presence is carried by
// the optional, never inferred from the value: a priority or delivery-mode of 0 that a
// client sent stays present (the reference dropped them).
#include <cstdint>
#include <optional>
#include <string>

#include "amqp/wire/field_table.hpp"

namespace amqp::wire {

struct basic_properties {
  std::optional<std::string> content_type;
  std::optional<std::string> content_encoding;
  std::optional<field_table> headers;
  std::optional<std::uint8_t> delivery_mode;
  std::optional<std::uint8_t> priority;
  std::optional<std::string> correlation_id;
  std::optional<std::string> reply_to;
  std::optional<std::string> expiration;
  std::optional<std::string> message_id;
  std::optional<std::uint64_t> timestamp;
  std::optional<std::string> type;
  std::optional<std::string> user_id;
  std::optional<std::string> app_id;
  std::optional<std::string> cluster_id;  // deprecated in 0-9-1 ("reserved"), kept for round-trip
  bool operator==(const basic_properties&) const = default;
};

}  // namespace amqp::wire
