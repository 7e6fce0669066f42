#include "config.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace cloud::pubsub {
namespace {

// nats-server refuses a max_payload above its max_pending (64 MiB).
constexpr std::uint64_t max_payload_limit = 64ULL * 1024 * 1024;

std::optional<std::uint64_t> parse_unsigned(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

std::string malformed(const char* variable, const std::string& value, const char* expected) {
  return std::string{variable} + "=\"" + value + "\" is malformed; expected " + expected;
}

bool valid_host(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':';
    if (!ok) return false;
  }
  return true;
}

bool valid_url_list(const std::string& urls) {
  // getline drops an empty last entry: "a," would pass as "a".
  if (urls.empty() || urls.back() == ',') return false;
  std::istringstream in{urls};
  std::string url;
  bool any = false;
  while (std::getline(in, url, ',')) {
    if (url.rfind("nats://", 0) != 0 && url.rfind("tls://", 0) != 0) return false;
    if (url.find(' ') != std::string::npos || url.size() < 8) return false;
    any = true;
  }
  return any;
}

using refusal_text = std::optional<std::string>;

// Where the bus is: an existing cluster's URLs, or the address the launched server listens on.
refusal_text read_address(const lookup_fn& lookup, config& c) {
  if (auto v = lookup("CLOUD_PUBSUB_URL")) {
    if (!valid_url_list(*v)) return malformed("CLOUD_PUBSUB_URL", *v, "nats://host:port, or a comma-separated list of them");
    c.external_url = *v;
  }
  if (auto v = lookup("CLOUD_PUBSUB_HOST")) {
    if (!valid_host(*v)) return malformed("CLOUD_PUBSUB_HOST", *v, "an IP address or host name");
    c.host = *v;
  }
  if (auto v = lookup("CLOUD_PUBSUB_PORT")) {
    const auto port = parse_unsigned(*v);
    if (!port || *port > 65535) return malformed("CLOUD_PUBSUB_PORT", *v, "a port number 0-65535 (0 picks a free port)");
    c.port = static_cast<std::uint16_t>(*port);
  }
  return std::nullopt;
}

// How the launched server stores and keeps running.
refusal_text read_server(const lookup_fn& lookup, config& c) {
  if (auto v = lookup("CLOUD_PUBSUB_MAX_PAYLOAD")) {
    const auto bytes = parse_unsigned(*v);
    if (!bytes || *bytes == 0 || *bytes > max_payload_limit)
      return malformed("CLOUD_PUBSUB_MAX_PAYLOAD", *v, "a number of bytes from 1 to 67108864 (64 MiB)");
    c.max_payload = *bytes;
  }
  if (auto v = lookup("CLOUD_PUBSUB_STORE_DIR")) {
    if (v->empty()) return malformed("CLOUD_PUBSUB_STORE_DIR", *v, "a directory path");
    c.store_dir = *v;
  } else {
    const auto data = lookup("CLOUD_DATA_DIR");
    if (data && data->empty()) return malformed("CLOUD_DATA_DIR", *data, "a directory path");
    c.store_dir = std::filesystem::path{data ? *data : "data"} / "pubsub";
  }
  if (auto v = lookup("CLOUD_PUBSUB_RESTARTS")) {
    const auto n = parse_unsigned(*v);
    if (!n || *n > 1000) return malformed("CLOUD_PUBSUB_RESTARTS", *v, "a number of restarts from 0 (never restart) to 1000");
    c.restarts = static_cast<unsigned>(*n);
  }
  if (auto v = lookup("CLOUD_PUBSUB_SYNC")) {
    if (*v != "interval" && *v != "always")
      return malformed("CLOUD_PUBSUB_SYNC", *v, "interval (the server's default) or always (fsync before every ack)");
    c.sync_always = *v == "always";
  }
  return std::nullopt;
}

// The launched server's own configuration file and the user the adaptor logs in as.
refusal_text read_server_config(const lookup_fn& lookup, config& c) {
  if (auto v = lookup("CLOUD_PUBSUB_CONFIG"); v && !v->empty()) {
    std::error_code ec;
    const auto file = std::filesystem::absolute(*v, ec);
    if (ec || !std::ifstream(file)) return malformed("CLOUD_PUBSUB_CONFIG", *v, "a readable nats-server configuration file");
    if (c.external_url) {
      return "CLOUD_PUBSUB_CONFIG=\"" + *v + "\" configures the nats-server pubsub launches, and "
             "CLOUD_PUBSUB_URL is set, so none is launched: unset one of them";
    }
    c.server_config = file.lexically_normal();
  }
  if (auto v = lookup("CLOUD_PUBSUB_USER"); v && !v->empty()) c.user = *v;
  if (auto v = lookup("CLOUD_PUBSUB_PASSWORD"); v && !v->empty()) c.password = *v;
  if (c.user.empty() != c.password.empty() || (!c.user.empty() && !c.server_config)) {
    return "CLOUD_PUBSUB_USER and CLOUD_PUBSUB_PASSWORD go together, beside CLOUD_PUBSUB_CONFIG (a user "
           "of the launched server's configuration); CLOUD_PUBSUB_USER=\"" + c.user + "\"";
  }
  if (auto v = lookup("NATS_SERVER_BIN")) {
    if (v->empty()) return malformed("NATS_SERVER_BIN", *v, "the nats-server executable");
    c.server_bin = *v;
  }
  return std::nullopt;
}

}  // namespace

config_result read_config(const lookup_fn& lookup) {
  config c;
  for (auto read : {read_address, read_server, read_server_config})
    if (auto refused = read(lookup, c)) return {std::nullopt, *refused};
  return {c, {}};
}

std::filesystem::path default_server_binary(const std::filesystem::path& plugin_library) {
  return (plugin_library.parent_path() / ".." / "bin" / "nats-server").lexically_normal();
}

std::optional<std::filesystem::path> resolve_binary(const std::string& name,
                                                    const std::optional<std::string>& path_env) {
  const auto executable = [](const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return std::filesystem::path{name};
    return std::nullopt;
  }
  std::istringstream dirs{path_env.value_or("/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")};
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const auto candidate = std::filesystem::path{dir.empty() ? "." : dir} / name;
    if (executable(candidate)) return candidate;
  }
  return std::nullopt;
}

}  // namespace cloud::pubsub
