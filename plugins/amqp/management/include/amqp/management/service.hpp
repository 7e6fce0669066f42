#pragma once
// RabbitMQ's management HTTP API (its 3.x JSON shapes) and Prometheus metrics (rabbitmq_prometheus's
// names), for the tools operators already run: rabbitmqadmin, KEDA's scaler, Celery Flower,
// Grafana's dashboards. Listeners of the amqp capability's own (HIP-1326, "It mounts one HTTP
// route, and does not serve it", keeps the host's router to its health route), served from what
// is on the bus (the topology mirror, the queues' consumers) so every replica answers the same,
// but for what only this process can see (its connections, channels and consumers, HIP-1326
// "Two facts a single process cannot answer for the fleet").
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"

namespace amqp::management {

struct vhost {
  std::string name;
  std::shared_ptr<broker::broker> broker;
};

// One AMQP connection of this process, as the API lists it.
struct connection_view {
  std::uint64_t id = 0;
  std::string name;  // "127.0.0.1:53452 -> 127.0.0.1:5672", RabbitMQ's shape
  std::string vhost;
  std::string user;
  std::string peer_host;
  std::uint16_t peer_port = 0;
  std::string host;
  std::uint16_t port = 0;
  std::uint16_t channels = 0;
  std::uint16_t channel_max = 0;
  std::uint32_t frame_max = 0;
  std::uint16_t heartbeat = 0;
  bool tls = false;
  std::string state;               // running, closing
  std::uint64_t connected_at = 0;  // ms since the epoch
  std::string client_product;      // client properties' product and version, when given
  std::string client_version;
};

// Who a request comes from: a user the API let in, and the bus client it works through in a vhost
// (nullptr: that user may not use that vhost).
struct principal {
  std::string user;
  std::function<std::shared_ptr<bus::client>(const std::string& vhost)> client_for;  // blocking
};

struct listener_view {
  std::string protocol;  // amqp, amqp/ssl, http, http/prometheus
  std::string ip;
  std::uint16_t port = 0;
};

// Connections (past connection.open) and channels this process opened and ended since it started.
struct session_counts {
  std::uint64_t connections_opened = 0;
  std::uint64_t connections_closed = 0;
  std::uint64_t channels_opened = 0;
  std::uint64_t channels_closed = 0;
};

struct sources {
  std::vector<vhost> vhosts;
  std::string node;             // RabbitMQ's node name shape: "cloud@<hostname>"
  std::string product_version;  // cloud's
  std::vector<listener_view> listeners;
  std::function<std::vector<connection_view>()> connections;  // any thread
  std::function<session_counts()> sessions_counted;            // any thread
  // Blocking: the principal (user, password) sign in as, or nullopt (401).
  std::function<std::optional<principal>(const std::string& user, const std::string& password)> sign_in;
  std::function<void(const std::string&)> log;
};

class service {
 public:
  service(boost::asio::io_context& io, sources s);
  ~service();
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  // Binds host:port (0: any free port) for the API, or for Prometheus's /metrics; nullopt on
  // success, else the sentence naming the variable to change.
  std::optional<std::string> listen_api(const std::string& host, std::uint16_t port);
  std::optional<std::string> listen_metrics(const std::string& host, std::uint16_t port);
  std::uint16_t api_port() const;
  std::uint16_t metrics_port() const;
  // Stops accepting, closes the connections, and waits until `deadline` for the requests under way
  // (the loop must still run); a second call does nothing more.
  void stop(std::chrono::steady_clock::time_point deadline);

  struct state;

 private:
  std::shared_ptr<state> state_;
};

}  // namespace amqp::management
