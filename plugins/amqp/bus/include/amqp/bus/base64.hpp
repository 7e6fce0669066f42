#pragma once
// The Amqp-Props header carries the content header's property octets, base64-encoded
// (HIP-1326, "A message keeps its properties and stays readable"). Standard alphabet, with
// padding.
#include <optional>
#include <string>
#include <string_view>

namespace amqp::bus {

std::string base64_encode(std::string_view octets);
// nullopt when `text` is not valid padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace amqp::bus
