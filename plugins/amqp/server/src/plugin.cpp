// The amqp plugin: mount brings up the bus client, the broker and the listener, in that
// order, and fails closed (HIP-1326, "Fail closed at boot"): nothing accepts until everything
// before it worked.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <tuple>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/management/service.hpp"
#include "bus_version.hpp"
#include "config.hpp"
#include "plugin_api/export.hpp"
#include "server.hpp"

#ifndef CLOUD_VERSION
#define CLOUD_VERSION "0"
#endif

namespace amqp::server {
namespace {

using cloud::plugin_api::host_services;
using cloud::plugin_api::status;

constexpr int io_threads = 2;

// A failed step's status: the step's name, then the cause (which already names the remedy).
status failed(std::string_view step, std::string_view cause) {
  return status::error(std::string(step) + ": " + std::string(cause));
}

// RabbitMQ's node name, in this platform's terms: the machine and the data directory.
std::string node_name(const host_services& host) {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return {};
  auto data_dir = host.config("CLOUD_DATA_DIR");
  if (!data_dir || data_dir->empty()) return {};
  return std::string(name.data()) + ":" + *data_dir;
}

// "host:port" → its parts (the host may be IPv6, so the last colon splits).
std::pair<std::string, std::uint16_t> split_endpoint(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return {text, 0};
  std::uint16_t port = 0;
  for (char c : text.substr(colon + 1)) port = static_cast<std::uint16_t>(port * 10 + (c - '0'));
  return {text.substr(0, colon), port};
}

management::connection_view view_of(const session_summary& s) {
  management::connection_view v;
  v.id = s.id;
  v.name = s.peer + " -> " + s.local;
  v.vhost = s.vhost;
  v.user = s.user;
  std::tie(v.peer_host, v.peer_port) = split_endpoint(s.peer);
  std::tie(v.host, v.port) = split_endpoint(s.local);
  v.channels = s.channels;
  v.channel_max = s.channel_max;
  v.frame_max = s.frame_max;
  v.heartbeat = s.heartbeat;
  v.tls = s.tls;
  v.state = s.running ? "running" : "starting";
  v.connected_at = s.connected_at_ms;
  v.client_product = s.client_product;
  v.client_version = s.client_version;
  return v;
}

}  // namespace

class amqp_plugin final : public cloud::plugin_api::plugin {
 public:
  amqp_plugin() = default;
  ~amqp_plugin() override { shutdown(std::chrono::seconds(5)); }
  amqp_plugin(const amqp_plugin&) = delete;
  amqp_plugin& operator=(const amqp_plugin&) = delete;

  std::string_view name() const noexcept override { return "amqp"; }

  status mount(host_services& host) noexcept override {
    std::lock_guard lock(mutex_);
    try {
      auto result = mount_steps(host);
      if (!result) release(clock::now() + std::chrono::seconds(5));
      return result;
    } catch (const std::exception& e) {
      release(clock::now() + std::chrono::seconds(5));
      return status::error(std::string("mount failed: ") + e.what());
    }
  }

  void shutdown(std::chrono::milliseconds deadline) noexcept override {
    std::lock_guard lock(mutex_);
    try {
      release(clock::now() + deadline);
    } catch (...) {
      // Nothing may cross the boundary; release() already logged what it could.
    }
  }

 private:
  status mount_steps(host_services& host) {
    auto config = read_config([&host](std::string_view v) { return host.config(v); });
    if (auto* refusal = std::get_if<std::string>(&config)) return failed("configuration", *refusal);
    const auto& cfg = std::get<server_config>(config);
    std::shared_ptr<ssl::context> tls;  // the amqps listener's, checked before anything starts
    if (cfg.tls()) {
      auto made = make_tls_context({cfg.tls_cert, cfg.tls_key, cfg.tls_ca});
      if (auto* refusal = std::get_if<std::string>(&made)) return failed("configuration", *refusal);
      tls = std::get<std::shared_ptr<ssl::context>>(made);
    }
    bus::client_options options;
    std::optional<std::uint64_t> published_max;  // pubsub's max_payload, when it says one
    if (auto opened = open_bus(host, cfg, options, published_max); !opened) return opened;
    const auto settings = broker_settings(host, cfg, published_max);
    log_fn log = [&host](log_level level, std::string_view m) { host.log(level, m); };
    server_ = std::make_unique<server>(log, io_threads);
    server_->run_threads();
    if (auto made = open_vhosts(host, cfg, options, settings); !made) return made;
    session_options session;
    session.settings = settings;
    if (cfg.auth == server_config::auth_mode::bus) {
      identities_ = std::make_shared<identities>(bus_);
      session.identities = identities_;
    }
    server_->serve(std::make_shared<const vhost_map>(vhosts_), session);
    if (auto listening = listen(host, cfg, tls); !listening) return listening;
    return serve_management(host, cfg);
  }

  // The default vhost's bus client, on the server pubsub published, once its version and its
  // limits fit.
  status open_bus(host_services& host, const server_config& cfg, bus::client_options& options,
                  std::optional<std::uint64_t>& published_max) {
    auto url = host.lookup("pubsub", "url");
    if (!url || url->empty()) {
      return failed("bus", "pubsub published no url; mount pubsub before amqp (its manifest row comes first)");
    }
    // The bus's nats-server must be one the adaptor supports (bus_version.hpp).
    if (auto refusal = refuse_server_version(host.lookup("pubsub", "server_version"))) {
      return failed("bus version", *refusal);
    }
    if (auto text = host.lookup("pubsub", "max_payload")) {
      auto parsed = parse_max_payload(*text);
      if (auto* refusal = std::get_if<std::string>(&parsed)) return failed("bus", *refusal);
      published_max = std::get<std::uint64_t>(parsed);
    }
    options.url = *url;
    options.creds_file = cfg.pubsub_creds;
    // The embedded server's own users (CLOUD_PUBSUB_CONFIG): the adaptor is the one pubsub names.
    if (auto user = host.lookup("pubsub", "user"))
      options.who = bus::credentials{*user, host.lookup("pubsub", "password").value_or("")};
    options.deadline = host.startup_deadline();
    const bool embedded = host.lookup("pubsub", "embedded") == std::optional<std::string>{"true"};
    options.reclaim_unacked = embedded;
    if (embedded && cfg.replicas.value_or(1) > 1) {
      return failed("bus", "CLOUD_AMQP_REPLICAS='" + std::to_string(*cfg.replicas) +
                               "' needs a NATS cluster, and the embedded nats-server is one server; point "
                               "CLOUD_PUBSUB_URL at a cluster or unset CLOUD_AMQP_REPLICAS");
    }
    options.replicas = cfg.replicas.value_or(embedded ? 1 : 0);
    options.publish_timeout = cfg.publish_timeout;
    options.request_timeout = cfg.bus_timeout;
    options.ack_wait = cfg.ack_wait;
    options.max_queues = cfg.max_queues;
    auto opened = bus::client::open(options);
    if (!opened) return failed("bus", opened.error().text);
    bus_ = std::move(*opened);
    host.log(log_level::info, "stream " + std::string{bus::stream_name} + " and bucket " + bus::bucket_name +
                                  " keep " + std::to_string(bus_->replicas()) + " replica(s), and so does each queue (" +
                                  (cfg.replicas ? "CLOUD_AMQP_REPLICAS" : embedded ? "the embedded server" :
                                                                                     "the smaller of 3 and the bus's servers") +
                                  ")");
    return status::ok();
  }

  broker::settings broker_settings(host_services& host, const server_config& cfg,
                                   std::optional<std::uint64_t> published_max) const {
    broker::settings settings;
    settings.handshake_timeout = cfg.handshake_timeout;
    // The bus refuses a message over its max payload; the smaller of what pubsub said and what
    // the server's INFO says is the ceiling a header is judged against (311).
    auto max_body = static_cast<std::uint64_t>(std::max<std::int64_t>(bus_->max_payload(), 0));
    if (published_max) max_body = max_body == 0 ? *published_max : std::min(max_body, *published_max);
    if (max_body > 0) settings.max_body_size = max_body;
    settings.names = cfg.names;
    settings.max_queues = cfg.max_queues;
    settings.product = "cloud";
    settings.version = CLOUD_VERSION;
    settings.node_name = node_name(host);
    settings.log_warning = [&host](std::string_view m) { host.log(log_level::warning, m); };
    settings.log_info = [&host](std::string_view m) { host.log(log_level::info, m); };
    return settings;
  }

  // "/" on bus_, each of CLOUD_AMQP_VHOSTS on a bus client of its own account, each with its broker.
  status open_vhosts(host_services& host, const server_config& cfg, const bus::client_options& options,
                     const broker::settings& settings) {
    auto& root = vhosts_[std::string{default_vhost}];
    root = {std::string{default_vhost}, bus_, nullptr};
    for (const auto& account : cfg.vhosts) {
      auto vhost_options = options;
      vhost_options.who = bus::credentials{account.user, account.password};
      vhost_options.connection_name = "cloud-amqp-vhost:" + account.name;
      auto opened_vhost = bus::client::open(vhost_options);
      if (!opened_vhost) return failed("vhost '" + account.name + "' (CLOUD_AMQP_VHOSTS)", opened_vhost.error().text);
      vhosts_[account.name] = {account.name, std::move(*opened_vhost), nullptr};
      host.log(log_level::info, "vhost '" + account.name + "': stream " + bus::stream_name + " and bucket " +
                                    bus::bucket_name + " of user '" + account.user + "''s NATS account");
    }
    for (auto& [name, v] : vhosts_) {
      try {
        auto vhost_settings = settings;
        vhost_settings.vhost = name;
        v.broker = broker::make_broker(server_->io(), v.bus, vhost_settings);
      } catch (const std::exception& e) {
        return failed(name == default_vhost ? std::string{"topology"} : "topology of vhost '" + name + "'", e.what());
      }
    }
    return status::ok();
  }

  status listen(host_services& host, const server_config& cfg, const std::shared_ptr<ssl::context>& tls) {
    if (cfg.plain_listener) {
      if (auto refusal = server_->listen(cfg.host, cfg.port)) return failed("listener", *refusal);
      const auto bound = server_->endpoint();
      host.publish("port", std::to_string(bound.port()));
      host.log(log_level::info, "amqp listening on " + bound.address().to_string() + ":" + std::to_string(bound.port()));
    } else {
      host.log(log_level::info, "no plain amqp listener: CLOUD_AMQP_HOST='" + cfg.host +
                                    "' is reachable and CLOUD_AMQP_AUTH='none', so connections come only through "
                                    "amqps, with a certificate signed by CLOUD_AMQPS_CA");
    }
    if (tls) {
      if (auto refusal = server_->listen_tls(cfg.host, cfg.tls_port, tls)) return failed("amqps listener", *refusal);
      const auto secure = server_->tls_endpoint();
      host.publish("tls_port", std::to_string(secure.port()));
      host.log(log_level::info, "amqps listening on " + secure.address().to_string() + ":" + std::to_string(secure.port()) +
                                    (cfg.tls_ca.empty() ? "" : " (client certificates required, CLOUD_AMQPS_CA)"));
    }
    return status::ok();
  }

  // The management API and Prometheus metrics, when their ports are set: after the AMQP listeners,
  // so that a tool that finds the API finds the broker ready.
  status serve_management(host_services& host, const server_config& cfg) {
    if (!cfg.management_port && !cfg.prometheus_port) return status::ok();
    management::sources src;
    for (const auto& [name, v] : vhosts_) src.vhosts.push_back({name, v.broker});
    std::array<char, 256> hostname{};
    ::gethostname(hostname.data(), hostname.size() - 1);
    src.node = std::string("cloud@") + hostname.data();
    src.product_version = CLOUD_VERSION;
    if (cfg.plain_listener) src.listeners.push_back({"amqp", cfg.host, server_->endpoint().port()});
    if (cfg.tls()) src.listeners.push_back({"amqp/ssl", cfg.host, server_->tls_endpoint().port()});
    src.connections = [s = server_.get()] {
      std::vector<management::connection_view> out;
      for (const auto& summary : s->summaries())
        if (!summary.vhost.empty()) out.push_back(view_of(summary));
      return out;
    };
    src.sessions_counted = [s = server_.get()] {
      using e = session_registry::event;
      return management::session_counts{s->counted(e::connection_opened), s->counted(e::connection_closed),
                                        s->counted(e::channel_opened), s->counted(e::channel_closed)};
    };
    src.sign_in = sign_in_for_management(cfg);
    src.log = [&host](const std::string& m) { host.log(log_level::warning, m); };
    management_ = std::make_unique<management::service>(server_->io(), std::move(src));
    if (cfg.management_port) {
      if (auto refusal = management_->listen_api(cfg.host, *cfg.management_port)) return failed("management", *refusal);
      host.publish("management_port", std::to_string(management_->api_port()));
      host.log(log_level::info, "management API listening on " + cfg.host + ":" + std::to_string(management_->api_port()));
    }
    if (cfg.prometheus_port) {
      if (auto refusal = management_->listen_metrics(cfg.host, *cfg.prometheus_port)) return failed("prometheus", *refusal);
      host.publish("prometheus_port", std::to_string(management_->metrics_port()));
      host.log(log_level::info, "prometheus metrics on " + cfg.host + ":" + std::to_string(management_->metrics_port()) +
                                    "/metrics");
    }
    return status::ok();
  }

  // Who may use the API: under CLOUD_AMQP_AUTH=bus the users the bus signs in, in the vhosts their
  // accounts join, as over AMQP; under none (loopback only) whoever asks, in every vhost.
  decltype(management::sources::sign_in) sign_in_for_management(const server_config& cfg) {
    auto vhosts = std::make_shared<const vhost_map>(vhosts_);
    if (!identities_) {
      return [vhosts](const std::string& user, const std::string&) -> std::optional<management::principal> {
        return management::principal{user, [vhosts](const std::string& name) -> std::shared_ptr<bus::client> {
                                       const auto* v = find_vhost(*vhosts, name);
                                       return v ? v->bus : nullptr;
                                     }};
      };
    }
    const auto timeout = cfg.handshake_timeout;
    return [vhosts, ids = std::weak_ptr<identities>(identities_), timeout](
               const std::string& user, const std::string& password) -> std::optional<management::principal> {
      auto signing = ids.lock();
      if (!signing) return std::nullopt;
      auto client = signing->sign_in(bus::credentials{user, password}, clock::now() + timeout);
      if (!client) return std::nullopt;
      // What the bus said of each vhost, for as long as the principal lives (the service signs in
      // again each minute): a join is a round trip, and a tool lists every vhost's objects.
      auto joined = std::make_shared<std::pair<std::mutex, std::map<std::string, bool>>>();
      return management::principal{
          user, [vhosts, client = *client, joined](const std::string& name) -> std::shared_ptr<bus::client> {
            const auto* v = find_vhost(*vhosts, name);
            if (!v) return nullptr;
            {
              std::lock_guard lock{joined->first};
              if (auto it = joined->second.find(name); it != joined->second.end()) return it->second ? client : nullptr;
            }
            const auto answer = client->join(*v->bus);
            if (!answer && answer.error().kind != bus::bus_errc::denied) return nullptr;  // asked again next time
            std::lock_guard lock{joined->first};
            joined->second[name] = static_cast<bool>(answer);
            return answer ? client : nullptr;
          }};
    };
  }

  // Releases in the order that keeps every promise: connections end (their channels requeue
  // what was outstanding), the broker drops this node's transient topology, the buses go, and
  // only then do the io threads stop. A bus's last callbacks post to the io loops, and what they
  // hold (a consumer's channel, its broker, the bus) is let go only when the loops run them.
  void release(clock::time_point deadline) {
    const auto now = clock::now();
    const auto budget = std::max(deadline - now, clock::duration::zero());
    if (management_) management_->stop(now + budget / 4);
    management_.reset();  // its hold on the brokers and the users' clients goes first
    if (server_) server_->close_connections(now + budget / 2);
    for (auto& [name, v] : vhosts_) {
      if (!v.broker) continue;
      try {
        broker::stop_broker(*v.broker);
      } catch (...) {
        // A failed cleanup leaves transient entries for this node's next start to remove.
      }
    }
    if (server_) server_->let_go_of_vhosts();
    identities_.reset();  // the users' clients close before the adaptor's own
    for (auto& [name, v] : vhosts_) {
      v.broker.reset();
      if (name == default_vhost) {
        v.bus.reset();  // bus_'s, closed last
      } else {
        bus::client::close_and_release(v.bus, now + budget * 3 / 4);
      }
    }
    vhosts_.clear();
    bus::client::close_and_release(bus_, now + budget * 3 / 4);
    if (server_) server_->stop_threads(now + budget);
    server_.reset();
  }

  std::mutex mutex_;
  std::shared_ptr<bus::client> bus_;
  vhost_map vhosts_;  // "/" (bus_'s) and CLOUD_AMQP_VHOSTS
  std::shared_ptr<identities> identities_;  // CLOUD_AMQP_AUTH=bus
  std::unique_ptr<server> server_;
  std::unique_ptr<management::service> management_;  // CLOUD_AMQP_MANAGEMENT_PORT, CLOUD_AMQP_PROMETHEUS_PORT
};

}  // namespace amqp::server

CLOUD_PLUGIN(amqp::server::amqp_plugin)
