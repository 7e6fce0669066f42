#include "sasl.hpp"

#include <cstdint>
#include <span>

#include "amqp/wire/codec.hpp"

namespace amqp::server {
namespace {

std::variant<bus::credentials, std::string> read_plain(std::string_view response) {
  const auto first = response.find('\0');
  const auto second = first == std::string_view::npos ? first : response.find('\0', first + 1);
  if (second == std::string_view::npos || response.find('\0', second + 1) != std::string_view::npos)
    return std::string{"the PLAIN response is not [authzid] NUL user NUL password"};
  return bus::credentials{std::string{response.substr(first + 1, second - first - 1)},
                          std::string{response.substr(second + 1)}};
}

std::variant<bus::credentials, std::string> read_amqplain(std::string_view response) {
  std::string table;
  const auto size = static_cast<std::uint32_t>(response.size());
  for (int shift = 24; shift >= 0; shift -= 8) table += static_cast<char>((size >> shift) & 0xff);
  table += response;
  auto decoded = wire::decode_table({reinterpret_cast<const std::uint8_t*>(table.data()), table.size()});
  if (!decoded) return "the AMQPLAIN response is not a field table (" + decoded.error().text + ")";
  bus::credentials who;
  for (auto [name, field] : {std::pair{"LOGIN", &who.user}, std::pair{"PASSWORD", &who.password}}) {
    const auto* value = wire::find(*decoded, name);
    const auto* text = value == nullptr ? nullptr : std::get_if<std::string>(&value->value);
    if (text == nullptr) return std::string{"the AMQPLAIN response has no "} + name + " string";
    *field = *text;
  }
  return who;
}

}  // namespace

std::variant<bus::credentials, std::string> read_credentials(std::string_view mechanism, std::string_view response) {
  if (mechanism == "PLAIN") return read_plain(response);
  if (mechanism == "AMQPLAIN") return read_amqplain(response);
  return "SASL mechanism '" + std::string{mechanism} + "' is not offered; use PLAIN or AMQPLAIN";
}

}  // namespace amqp::server
