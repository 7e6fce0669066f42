#pragma once
// The amqp plugin's configuration, read from the environment (README, 'Configuration'). Every variable
// has a default; a malformed value is refused with a sentence naming the variable and value.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "amqp/routing/names.hpp"

namespace amqp::server {

struct server_config {
  std::string host = "127.0.0.1";  // CLOUD_AMQP_HOST: an address other than loopback needs auth bus
  std::uint16_t port = 5672;       // CLOUD_AMQP_PORT: 0 asks the kernel for a free port
  std::string pubsub_creds;        // CLOUD_AMQP_PUBSUB_CREDS: a NATS .creds file, optional
  // CLOUD_AMQP_HANDSHAKE_TIMEOUT (seconds, 1..3600): from accept to connection.open.
  std::chrono::seconds handshake_timeout{30};
  // CLOUD_AMQP_REPLICAS (1..5) for the stream, the bucket and, inherited, the queue consumers.
  // Unset: 1 on the embedded server, else the smaller of 3 and the bus's cluster size.
  std::optional<int> replicas;
  // CLOUD_AMQP_PUBLISH_TIMEOUT (seconds, 1..120): a publish the bus has not stored by then is
  // nacked; on a replicated stream it is sent again meanwhile (a leader failing over). At most
  // the stream's two-minute duplicate window, within which a retry is stored once.
  std::chrono::seconds publish_timeout{30};
  // CLOUD_AMQP_BUS_TIMEOUT (seconds, 1..300): each bus request (a declare, a count, a get).
  std::chrono::seconds bus_timeout{5};
  // CLOUD_AMQP_ACK_WAIT (seconds, 6..300): how long an unacknowledged delivery whose holder is
  // gone (its process died, or it was lost in flight when a bus node died) stays away from its
  // queue. A delivery a live client holds is never redelivered, however long it is held.
  std::chrono::seconds ack_wait{30};
  // CLOUD_AMQP_MAX_QUEUES (1..100,000,000): the most queues a virtual host holds, RabbitMQ's
  // max-queues vhost limit; stream AMQP takes as many consumers, and the adaptor's own besides.
  std::uint64_t max_queues = 1'000'000;
  // The amqps listener, on CLOUD_AMQP_HOST: on when CLOUD_AMQPS_CERT and CLOUD_AMQPS_KEY name
  // readable files; CLOUD_AMQPS_CA (optional) makes client certificates required and verified.
  std::uint16_t tls_port = 5671;  // CLOUD_AMQPS_PORT: 0 asks the kernel for a free port
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  bool tls() const { return !tls_cert.empty(); }
  // CLOUD_AMQP_AUTH: `none` (anyone may connect; only on a loopback CLOUD_AMQP_HOST) or `bus`
  // (connection.start-ok's credentials sign in to the bus, whose permissions then decide).
  enum class auth_mode { none, bus };
  auth_mode auth = auth_mode::none;
  // False on a reachable CLOUD_AMQP_HOST under auth none, allowed only beside CLOUD_AMQPS_CA:
  // then only the amqps listener opens, where a verified certificate says who connects.
  bool plain_listener = true;
  // CLOUD_AMQP_VHOSTS: the virtual hosts besides "/", each a NATS account of its own on the same
  // bus, reached as a user of that account: `name=user:password`, space-separated.
  struct vhost_account {
    std::string name;
    std::string user;
    std::string password;
  };
  std::vector<vhost_account> vhosts;
  // CLOUD_AMQP_MANAGEMENT_PORT and CLOUD_AMQP_PROMETHEUS_PORT (0..65535, 0: any free port): RabbitMQ's
  // management HTTP API and Prometheus metrics on CLOUD_AMQP_HOST; unset: none.
  std::optional<std::uint16_t> management_port;
  std::optional<std::uint16_t> prometheus_port;
  // CLOUD_AMQP_NAMES (hip | escaped): which exchange and queue names clients may use.
  routing::name_rules names = routing::name_rules::hip;
};

// Looks a variable up; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(std::string_view)>;

// Either the configuration or the sentence that refuses it.
using config_result = std::variant<server_config, std::string>;
config_result read_config(const env_lookup& env);

// The bus's largest message, as pubsub published it ("max_payload"): a positive integer.
std::variant<std::uint64_t, std::string> parse_max_payload(std::string_view published);

}  // namespace amqp::server
