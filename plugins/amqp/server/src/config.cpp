#include "config.hpp"

#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <fstream>
#include <utility>

namespace amqp::server {
namespace {

// A whole-string unsigned decimal within [lo, hi]; anything else (sign, space, suffix) fails.
std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end || value < lo || value > hi) return std::nullopt;
  return value;
}

std::string refusal(std::string_view variable, std::string_view value, std::string_view expected) {
  return std::string(variable) + "='" + std::string(value) + "' is not valid: expected " +
         std::string(expected);
}

// "prod=svc-prod:pw staging=svc-st:pw2": each a name (not "/", the adaptor's own account, nor
// empty), once, and a user of that vhost's account with its password.
std::variant<std::vector<server_config::vhost_account>, std::string> parse_vhosts(const std::string& text) {
  std::vector<server_config::vhost_account> out;
  std::size_t at = 0;
  while ((at = text.find_first_not_of(" \t\n", at)) != std::string::npos) {
    const auto end = std::min(text.find_first_of(" \t\n", at), text.size());
    const std::string entry = text.substr(at, end - at);
    at = end;
    const auto eq = entry.find('=');
    const auto colon = eq == std::string::npos ? eq : entry.find(':', eq);
    const std::string name = entry.substr(0, eq);
    // The entry as a message shows it: never its password.
    const std::string shown = colon == std::string::npos ? entry : entry.substr(0, colon + 1) + "***";
    if (eq == 0 || colon == std::string::npos || colon == eq + 1 || name == "/")
      return refusal("CLOUD_AMQP_VHOSTS", shown,
                     "name=user:password per virtual host, space-separated (the user is one of that vhost's NATS "
                     "account; '/' is the adaptor's own and is not listed)");
    for (const auto& seen : out)
      if (seen.name == name) return refusal("CLOUD_AMQP_VHOSTS", shown, "each virtual host once");
    out.push_back({name, entry.substr(eq + 1, colon - eq - 1), entry.substr(colon + 1)});
  }
  return out;
}

using refusal_text = std::optional<std::string>;

refusal_text read_listener(const env_lookup& env, server_config& config) {
  if (auto host = env("CLOUD_AMQP_HOST")) {
    if (host->empty()) return refusal("CLOUD_AMQP_HOST", *host, "an IP address such as 127.0.0.1");
    config.host = *host;
  }
  if (auto port = env("CLOUD_AMQP_PORT")) {
    auto value = parse_unsigned(*port, 0, 65535);
    if (!value) return refusal("CLOUD_AMQP_PORT", *port, "a port number from 0 to 65535 (0: any free port)");
    config.port = static_cast<std::uint16_t>(*value);
  }
  return std::nullopt;
}

refusal_text read_bus(const env_lookup& env, server_config& config) {
  if (auto creds = env("CLOUD_AMQP_PUBSUB_CREDS"); creds && !creds->empty()) {
    // Checked here so that a typo names the variable, not a later "dial" failure.
    if (!std::ifstream(*creds)) {
      return refusal("CLOUD_AMQP_PUBSUB_CREDS", *creds, "a readable NATS credentials (.creds) file");
    }
    config.pubsub_creds = *creds;
  }
  const struct {
    const char* variable;
    std::uint64_t least;
    std::uint64_t most;
    std::chrono::seconds& field;
  } durations[] = {{"CLOUD_AMQP_HANDSHAKE_TIMEOUT", 1, 3600, config.handshake_timeout},
                   {"CLOUD_AMQP_PUBLISH_TIMEOUT", 1, 120, config.publish_timeout},
                   {"CLOUD_AMQP_BUS_TIMEOUT", 1, 300, config.bus_timeout},
                   {"CLOUD_AMQP_ACK_WAIT", 6, 300, config.ack_wait}};
  for (const auto& d : durations) {
    auto text = env(d.variable);
    if (!text) continue;
    auto value = parse_unsigned(*text, d.least, d.most);
    if (!value)
      return refusal(d.variable, *text,
                     "whole seconds from " + std::to_string(d.least) + " to " + std::to_string(d.most));
    d.field = std::chrono::seconds{*value};
  }
  if (auto replicas = env("CLOUD_AMQP_REPLICAS")) {
    auto value = parse_unsigned(*replicas, 1, 5);
    if (!value) return refusal("CLOUD_AMQP_REPLICAS", *replicas, "a replica count from 1 to 5");
    config.replicas = static_cast<int>(*value);
  }
  if (auto max = env("CLOUD_AMQP_MAX_QUEUES")) {
    auto value = parse_unsigned(*max, 1, 100'000'000);
    if (!value) return refusal("CLOUD_AMQP_MAX_QUEUES", *max, "a number of queues from 1 to 100000000");
    config.max_queues = *value;
  }
  return std::nullopt;
}

refusal_text read_tls(const env_lookup& env, server_config& config) {
  if (auto port = env("CLOUD_AMQPS_PORT")) {
    auto value = parse_unsigned(*port, 0, 65535);
    if (!value) return refusal("CLOUD_AMQPS_PORT", *port, "a port number from 0 to 65535 (0: any free port)");
    config.tls_port = static_cast<std::uint16_t>(*value);
  }
  for (auto [variable, field] : {std::pair{"CLOUD_AMQPS_CERT", &config.tls_cert}, std::pair{"CLOUD_AMQPS_KEY", &config.tls_key},
                                 std::pair{"CLOUD_AMQPS_CA", &config.tls_ca}}) {
    auto file = env(variable);
    if (!file || file->empty()) continue;
    if (!std::ifstream(*file)) return refusal(variable, *file, "a readable PEM file");
    *field = *file;
  }
  if (config.tls_cert.empty() != config.tls_key.empty() || (!config.tls_ca.empty() && config.tls_cert.empty())) {
    return "the amqps listener needs both CLOUD_AMQPS_CERT and CLOUD_AMQPS_KEY (CLOUD_AMQPS_CA only beside them); "
           "CLOUD_AMQPS_CERT='" + config.tls_cert + "', CLOUD_AMQPS_KEY='" + config.tls_key + "'";
  }
  return std::nullopt;
}

// Names, logins and virtual hosts.
refusal_text read_access(const env_lookup& env, server_config& config) {
  if (auto names = env("CLOUD_AMQP_NAMES")) {
    auto rules = routing::parse_name_rules(*names);
    if (!rules)
      return refusal("CLOUD_AMQP_NAMES", *names,
                     "hip (HIP-1326 §2: one subject word of [A-Za-z0-9_-]) or escaped (every name RabbitMQ accepts)");
    config.names = *rules;
  }
  if (auto auth = env("CLOUD_AMQP_AUTH")) {
    if (*auth == "none") {
      config.auth = server_config::auth_mode::none;
    } else if (*auth == "bus") {
      config.auth = server_config::auth_mode::bus;
    } else {
      return refusal("CLOUD_AMQP_AUTH", *auth,
                     "none (anyone may connect, on a loopback CLOUD_AMQP_HOST only) or bus (the bus checks "
                     "each connection's user and password)");
    }
  }
  if (auto vhosts = env("CLOUD_AMQP_VHOSTS")) {
    auto parsed = parse_vhosts(*vhosts);
    if (auto* refused = std::get_if<std::string>(&parsed)) return *refused;
    config.vhosts = std::move(std::get<std::vector<server_config::vhost_account>>(parsed));
  }
  return std::nullopt;
}

refusal_text read_management(const env_lookup& env, server_config& config) {
  for (auto [variable, field] : {std::pair{"CLOUD_AMQP_MANAGEMENT_PORT", &config.management_port},
                                 std::pair{"CLOUD_AMQP_PROMETHEUS_PORT", &config.prometheus_port}}) {
    auto text = env(variable);
    if (!text) continue;
    auto value = parse_unsigned(*text, 0, 65535);
    if (!value) return refusal(variable, *text, "a port number from 0 to 65535 (0: any free port), or unset for none");
    *field = static_cast<std::uint16_t>(*value);
  }
  return std::nullopt;
}

// Secure by default: a listener others can reach asks who connects.
refusal_text secure_by_default(server_config& config) {
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(config.host, ec);
  if (config.auth == server_config::auth_mode::none && !ec && !address.is_loopback()) {
    if (config.tls_ca.empty())
      return "CLOUD_AMQP_HOST='" + config.host + "' is reachable from other machines and CLOUD_AMQP_AUTH='none' lets "
             "anyone connect: set CLOUD_AMQP_AUTH=bus (the bus checks each user), require client certificates "
             "(CLOUD_AMQPS_CA: then only the amqps listener opens), or bind a loopback address";
    if (config.management_port || config.prometheus_port)
      return "CLOUD_AMQP_MANAGEMENT_PORT and CLOUD_AMQP_PROMETHEUS_PORT listen on CLOUD_AMQP_HOST='" + config.host +
             "', reachable from other machines, and under CLOUD_AMQP_AUTH='none' they would ask nobody who reads "
             "them: set CLOUD_AMQP_AUTH=bus, or bind a loopback address";
    config.plain_listener = false;
  }
  return std::nullopt;
}

}  // namespace

config_result read_config(const env_lookup& env) {
  server_config config;
  for (auto read : {read_listener, read_bus, read_tls, read_access, read_management})
    if (auto refused = read(env, config)) return *refused;
  if (auto refused = secure_by_default(config)) return *refused;
  return config;
}

std::variant<std::uint64_t, std::string> parse_max_payload(std::string_view published) {
  auto value = parse_unsigned(published, 1, std::uint64_t{1} << 40);
  if (!value) {
    return "pubsub published max_payload='" + std::string(published) +
           "', which is not a positive number of octets; check CLOUD_PUBSUB_MAX_PAYLOAD";
  }
  return *value;
}

}  // namespace amqp::server
