#include "amqp/bus/base64.hpp"

#include <boost/beast/core/detail/base64.hpp>

namespace amqp::bus {

namespace b64 = boost::beast::detail::base64;

std::string base64_encode(std::string_view octets) {
  std::string out(b64::encoded_size(octets.size()), '\0');
  out.resize(b64::encode(out.data(), octets.data(), octets.size()));
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // Beast's decoder stops quietly at the first bad character; insist on the whole input.
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  while (padding < 2 && !text.empty() && text.back() == '=') {
    text.remove_suffix(1);
    ++padding;
  }
  std::string out(b64::decoded_size(text.size() + padding), '\0');
  auto [written, read] = b64::decode(out.data(), text.data(), text.size());
  if (read != text.size()) return std::nullopt;
  out.resize(written);
  return out;
}

}  // namespace amqp::bus
