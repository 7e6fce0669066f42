#include "bus_version.hpp"

#include <algorithm>
#include <charconv>

namespace amqp::server {
namespace {

// One decimal number of at most 9 digits (no sign, no leading '+'), consumed from `text`.
std::optional<unsigned> take_number(std::string_view& text) {
  unsigned value = 0;
  const auto* begin = text.data();
  const auto* end = begin + std::min<std::size_t>(text.size(), 9);
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc{} || ptr == begin) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(ptr - begin));
  return value;
}

bool take(std::string_view& text, char c) {
  if (text.empty() || text.front() != c) return false;
  text.remove_prefix(1);
  return true;
}

bool identifier_chars(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string remedy() {
  return "point CLOUD_PUBSUB_URL at a nats-server " + std::string(minimum_server_version) +
         " or newer, or set NATS_SERVER_BIN to one (unset, pubsub launches the nats-server shipped with "
         "cloud, which is current)";
}

}  // namespace

std::optional<server_version> parse_server_version(std::string_view text) {
  server_version v;
  const auto major = take_number(text);
  if (!major || !take(text, '.')) return std::nullopt;
  const auto minor = take_number(text);
  if (!minor || !take(text, '.')) return std::nullopt;
  const auto patch = take_number(text);
  if (!patch) return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  v.patch = *patch;
  if (const auto plus = text.find('+'); plus != std::string_view::npos) {
    if (!identifier_chars(text.substr(plus + 1))) return std::nullopt;
    text = text.substr(0, plus);
  }
  if (take(text, '-')) {
    if (!identifier_chars(text)) return std::nullopt;
    v.prerelease = std::string(text);
    text = {};
  }
  if (!text.empty()) return std::nullopt;
  return v;
}

int compare(const server_version& a, const server_version& b) {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  if (a.prerelease == b.prerelease) return 0;
  if (a.prerelease.empty()) return 1;  // a release follows its prereleases
  if (b.prerelease.empty()) return -1;
  return a.prerelease < b.prerelease ? -1 : 1;
}

std::optional<std::string> refuse_server_version(const std::optional<std::string>& published) {
  const std::string minimum(minimum_server_version);
  if (!published || published->empty()) {
    return "pubsub published no server_version, so the bus's nats-server version is unknown; the amqp "
           "adaptor needs nats-server " + minimum + " or newer: " + remedy();
  }
  const auto version = parse_server_version(*published);
  if (!version) {
    return "the bus's nats-server reports version \"" + *published +
           "\", which is not a version (MAJOR.MINOR.PATCH); the amqp adaptor needs nats-server " + minimum +
           " or newer: " + remedy();
  }
  if (compare(*version, *parse_server_version(minimum_server_version)) < 0) {
    return "the bus is nats-server " + *published + ", older than " + minimum +
           ", the oldest the amqp adaptor mounts on (the oldest release line NATS supports; earlier "
           "servers refuse or miscount the consumers queues need): " + remedy();
  }
  return std::nullopt;
}

}  // namespace amqp::server
