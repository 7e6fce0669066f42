#pragma once
// The seam between the session (server/, octets and connection state) and the broker
// (broker/, what AMQP methods mean on the bus). The session owns the socket, the handshake,
// heartbeats, channel open/close bookkeeping and content assembly; a broker `channel` owns
// everything a channel method means. Neither reaches into the other.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/routing/names.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/codec.hpp"

namespace amqp::bus { class client; }

namespace amqp::broker {

struct settings {
  std::uint16_t channel_max = 2047;
  std::uint32_t frame_max = 128 * 1024;          // offered in connection.tune
  std::uint16_t heartbeat_seconds = 60;          // offered in connection.tune
  std::chrono::seconds handshake_timeout{30};
  std::uint64_t max_body_size = 8 * 1024 * 1024;  // the bus's max payload: larger is 311 on the header
  std::string product = "cloud";
  std::string vhost = "/";  // the virtual host this broker serves (its NATS account's)
  std::string version;
  // CLOUD_AMQP_NAMES: which exchange and queue names clients may use (routing/names.hpp).
  routing::name_rules names = routing::name_rules::hip;
  // CLOUD_AMQP_MAX_QUEUES: a declaration of a new queue beyond it is refused as RabbitMQ refuses
  // one past a vhost's max-queues limit.
  std::uint64_t max_queues = 1'000'000;
  // How long a queue's bus consumer outlives its last use (nothing held, no pull waiting, no reader
  // here): then it goes, and the queue costs one bucket entry again until it is read.
  std::chrono::seconds idle_consumer_after{60};
  // This replica's identity across restarts (RabbitMQ's node name), e.g.
  // "<hostname>:<CLOUD_DATA_DIR>". Non-durable and exclusive queues/exchanges are marked with it
  // in the bucket: a clean stop deletes this process's ones, and a restart of the same node
  // deletes what a crash left behind (RabbitMQ drops them on node restart). Empty: a
  // per-process name, so leftovers of a crash stay until deleted by hand.
  std::string node_name;
  // Where the broker reports what it cannot answer to a client (a failed background deletion,
  // a malformed bucket entry). Empty: standard error.
  std::function<void(std::string_view)> log_warning;
  // Where it reports a refusal it answered with RabbitMQ's own text, with the remedy that text
  // leaves out. Empty: nowhere.
  std::function<void(std::string_view)> log_info;
};

// One vhost's broker state: the adaptor's own bus client in the vhost's account, the topology
// mirror, exclusive-queue owners, consumer counts. Shared by every connection of the vhost.
class broker;
// Blocking (call it from mount, not from an io thread): opens the bucket's watch and applies
// its initial replay before returning (HIP-1326, "Where it sits"), then removes the transient
// entries a crash of this node left. Throws std::runtime_error naming the cause (mount fails
// closed).
std::shared_ptr<broker> make_broker(boost::asio::io_context& io, std::shared_ptr<bus::client> bus,
                                    settings s);
const settings& settings_of(const broker& b);
// Blocking, idempotent, for the plugin's shutdown after the listener closed and before the
// bus client closes: deletes the non-durable/exclusive queues and exchanges this process
// declared (RabbitMQ drops them when its node stops) and stops the topology watch.
void stop_broker(broker& b);

// What a channel needs from its connection. Implemented by server::session; every call is
// made on the connection's executor.
class connection_port {
 public:
  virtual ~connection_port() = default;
  // Encoded frames, written to the socket as one unit, in call order.
  virtual void send(std::string frames) = 0;
  virtual std::uint32_t frame_max() const = 0;      // negotiated
  virtual std::uint64_t connection_id() const = 0;  // unique in this process (exclusive owners)
  // Serial (one thread's): the channels' work and their bus completions run here, in order.
  virtual boost::asio::any_io_executor executor() = 0;
  // The bus client this connection's channels publish, pull, settle and declare through: the
  // signed-in user's (CLOUD_AMQP_AUTH=bus), or the adaptor's own in the connection's vhost.
  virtual std::shared_ptr<bus::client> bus() = 0;
  // The user the bus signed this connection in as (CLOUD_AMQP_AUTH=bus): a publish's user_id
  // property must name it. Empty when authentication is off.
  virtual const std::string& user() const = 0;
  // Output back-pressure: more is queued for the socket than the connection's cap. Consumers
  // stop pulling while this holds.
  virtual bool backlogged() const = 0;
  // `resume` runs on executor() once the queued output drained to half the cap (or at once
  // when not backlogged); never when the connection ended first.
  virtual void when_drained(std::function<void()> resume) = 0;
  // Inbound back-pressure (RabbitMQ's flow control): `cost` of a publish handed to the bus,
  // then the same cost once the bus answered it (or its channel closed). Over the
  // connection's cap the session stops reading, so a publisher faster than the bus is slowed
  // down instead of buffered without bound.
  virtual void publish_handed(std::size_t cost) = 0;
  virtual void publish_answered(std::size_t cost) = 0;
  // Channel exception: the session sends channel.close, calls channel::closed(), and ignores
  // the channel's frames until close-ok. `sentence` is bare: the session makes the reply text
  // "<NAME> - <sentence>" (wire::reply_text), once.
  virtual void close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                             wire::method_key offending) = 0;
  // Connection exception: connection.close with the code and the sentence, then the socket goes.
  virtual void close_connection(wire::reply_code code, std::string sentence,
                                wire::method_key offending) = 0;
};

// One open channel. The session creates it on channel.open-ok and destroys it after the
// channel is closed either way. Methods are answered in arrival order.
class channel {
 public:
  virtual ~channel() = default;
  // Any method of classes exchange/queue/basic/confirm/tx and channel.flow. Never
  // channel.open/close/close-ok (the session's) and never basic.publish (see on_publish).
  virtual void on_method(wire::method m) = 0;
  // A complete publish: the method, the content header's property octets verbatim, the body.
  virtual void on_publish(wire::basic_publish m, std::string property_octets, std::string body) = 0;
  // The channel is gone (closed by either side, or the connection ended): requeue outstanding
  // deliveries at once, cancel consumers, release exclusive/auto-delete claims.
  virtual void closed() = 0;
};

std::unique_ptr<channel> open_channel(std::shared_ptr<broker> b, connection_port& port,
                                      std::uint16_t id);

// ---- what an operator reads (the management API) -------------------------------------------
// A copy of the vhost's topology mirror: every replica's exchanges, queues and bindings.
routing::topology topology_of(const broker& b);
// The consumers of this process (HIP-1326, "Two facts a single process cannot answer for the
// fleet": another replica's are its own to list).
struct consumer_view {
  std::string queue;
  std::string tag;
  std::uint64_t connection_id = 0;
  std::uint16_t channel = 0;
  bool exclusive = false;
  bool ack_required = true;
  std::uint16_t prefetch = 0;
};
std::vector<consumer_view> consumers_of(const broker& b);
// The vhost's own bus client.
std::shared_ptr<bus::client> bus_of(const broker& b);
// By consumer name, the deliveries this process's bus clients hold unsettled: its connections'
// (a signed-in user's own under CLOUD_AMQP_AUTH=bus) and the vhost's own. A count read through one
// client knows only what that one holds.
std::map<std::string, std::uint64_t> held_of(const broker& b);
// The channel and connection exceptions raised so far, by reply code.
std::map<int, std::uint64_t> refusals_of(const broker& b);
// What this process's channels of the vhost did with messages since it started, RabbitMQ's global
// counters (rabbitmq_prometheus's rabbitmq_global_messages_*, the management API's message_stats).
struct message_counts {
  std::uint64_t received = 0;          // basic.publish
  std::uint64_t received_confirm = 0;  // of them, on a channel in confirm mode
  std::uint64_t confirmed = 0;         // basic.ack sent for a publish
  std::uint64_t unroutable_returned = 0;
  std::uint64_t delivered_consume_manual_ack = 0;
  std::uint64_t delivered_consume_auto_ack = 0;
  std::uint64_t delivered_get_manual_ack = 0;
  std::uint64_t delivered_get_auto_ack = 0;
  std::uint64_t get_empty = 0;
  std::uint64_t redelivered = 0;
  std::uint64_t acknowledged = 0;  // deliveries a client acked
  // Every delivery, by consume or get, either acknowledgement mode.
  std::uint64_t delivered() const {
    return delivered_consume_manual_ack + delivered_consume_auto_ack + delivered_get_manual_ack + delivered_get_auto_ack;
  }
  message_counts& operator+=(const message_counts& o) {
    received += o.received;
    received_confirm += o.received_confirm;
    confirmed += o.confirmed;
    unroutable_returned += o.unroutable_returned;
    delivered_consume_manual_ack += o.delivered_consume_manual_ack;
    delivered_consume_auto_ack += o.delivered_consume_auto_ack;
    delivered_get_manual_ack += o.delivered_get_manual_ack;
    delivered_get_auto_ack += o.delivered_get_auto_ack;
    get_empty += o.get_empty;
    redelivered += o.redelivered;
    acknowledged += o.acknowledged;
    return *this;
  }
};
message_counts message_counts_of(const broker& b);
// Queues this process declared, created and deleted in the vhost since it started
// (rabbitmq_prometheus's rabbitmq_queues_{declared,created,deleted}_total).
struct queue_counts {
  std::uint64_t declared = 0;  // every queue.declare answered, but passive ones
  std::uint64_t created = 0;   // of them, those that made the queue
  std::uint64_t deleted = 0;   // for any reason, by this process
  queue_counts& operator+=(const queue_counts& o) {
    declared += o.declared;
    created += o.created;
    deleted += o.deleted;
    return *this;
  }
};
queue_counts queue_counts_of(const broker& b);
// RabbitMQ's policies (routing/policy.hpp), kept in the vhost's bucket and applied by every
// replica's mirror. Blocking (call it on the bus's pool). The write goes through `as`, the
// operator's own bus client, so the bus's permissions apply; the mirror here has it at once. As in
// RabbitMQ, a queue the policy gives an expiry counts as used now, and one it gives a drop-head
// length limit is trimmed to it.
struct policy_change {
  bool existed = false;                // the name had a policy before
  std::optional<std::string> refused;  // not a policy to keep: why, in RabbitMQ's terms (a 400)
  std::optional<std::string> failure;  // the bus did not take the change: its words
  bool denied = false;                 // of them, the bus's permissions refused this user
};
// `json`: the policy as RabbitMQ's API takes it.
policy_change put_policy(broker& b, bus::client& as, const std::string& name, std::string_view json);
policy_change delete_policy(broker& b, bus::client& as, const std::string& name);
// The connection ended: exclusive queues it owned are deleted. Called once, after every
// channel of the connection got closed().
void connection_closed(broker& b, std::uint64_t connection_id);

}  // namespace amqp::broker
