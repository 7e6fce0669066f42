#pragma once
// The broker's internal interface: what every per-class handler file (exchange.cpp, queue.cpp,
// channel_flow.cpp, refusals.cpp and the basic/confirm engineer's basic*.cpp) builds on.
//
// Threads, in one paragraph: every channel_context call is made on its connection's executor
// (connection_port::executor(): serial, one thread's). `broker` is shared by every connection
// of the process: its public members are safe to call from any connection's executor.
// Blocking bus calls never run on an io thread: run_on_bus() moves them to the bus client's
// worker pool and brings the result back to the connection's executor.
#include <utility>  // before Asio: see platform-notes (Boost 1.74 awaitable.hpp with g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/codec.hpp"
#include "amqp/wire/methods.hpp"
#include "amqp/wire/reply_code.hpp"
#include "bus_failure.hpp"

namespace amqp::broker {

class channel_context;
class expiry_sweeper;
class turn;

// ---------------------------------------------------------------------------------------------
// broker: per-process state shared by every connection (the class broker.hpp forward-declares).
// ---------------------------------------------------------------------------------------------
class broker : public std::enable_shared_from_this<broker> {
 public:
  broker(boost::asio::io_context& io, std::shared_ptr<bus::client> bus, settings s);
  ~broker();
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  const settings& config() const { return settings_; }
  // " in vhost '<name>'", where RabbitMQ's sentences name it.
  std::string in_vhost() const { return " in vhost '" + settings_.vhost + "'"; }
  bus::client& bus() { return *bus_; }
  const std::shared_ptr<bus::client>& bus_ptr() const { return bus_; }
  boost::asio::io_context& io() { return io_; }
  // The bus client's worker pool: blocking nats.c calls run there and nowhere else.
  boost::asio::any_io_executor bus_executor() { return bus_->worker_executor(); }
  // One lane of that pool, serial: a queue's rejected messages are read back for dead-lettering
  // in the order they were rejected (dead_letter.hpp).
  const boost::asio::any_io_executor& dead_letter_lane() const { return dead_letter_lane_; }

  // ---- the topology mirror (a cache of the KV bucket `amqp`, HIP-1326 §1)
  // Runs `fn(const routing::topology&)` under a shared lock and returns what it returns.
  // Keep fn short: it holds writers off. Never call the bus inside it.
  template <class Fn>
  auto read_topology(Fn&& fn) const {
    std::shared_lock lock(topology_mutex_);
    return std::forward<Fn>(fn)(static_cast<const routing::topology&>(topology_));
  }
  // The queue's filters as its bus consumer is asked for them (normalized queue_filters, the
  // default binding included). Empty when the queue is not in the mirror.
  std::vector<std::string> filters_of(const std::string& queue) const;
  // How the queue's consumers share it on the bus (x-single-active-consumer); all_consumers when
  // the queue is not in the mirror.
  bus::queue_sharing sharing_of(const std::string& queue) const;
  // Was this delivery routed to the queue? Its consumer also reads what a binding's window
  // leaves out (routing::topology::admits): such a delivery is acked unseen. And the queue's
  // x-message-ttl and x-delivery-limit, if it has them.
  struct delivery_rules {
    bool routed = true;
    std::optional<std::uint64_t> message_ttl;
    std::optional<std::uint64_t> delivery_limit;
  };
  delivery_rules rules_for(const std::string& queue, const bus::delivery& d) const;

  // ---- exclusive queues (owned by one connection of THIS process; see broker.cpp on replicas)
  std::optional<std::uint64_t> exclusive_owner(const std::string& queue) const;
  void claim_exclusive(const std::string& queue, std::uint64_t connection_id);
  std::vector<std::string> exclusive_queues_of(std::uint64_t connection_id) const;
  // Drops a claim made before the bucket said another replica declared the queue first.
  void forget_exclusive_claim(const std::string& queue);
  // True when `connection_id` may use `queue`: it is not exclusive, or this connection owns
  // it. An exclusive queue with no owner in this process belongs to another replica's
  // connection (or to one that is gone): refused too. On false, `sentence` gets the 405 text.
  bool may_use(const std::string& queue, std::uint64_t connection_id, std::string& sentence) const;

  // ---- live consumers of this process, per queue (declare-ok's consumer count, if-unused,
  //      auto-delete, and the server-initiated basic.cancel when a queue is deleted)
  // basic.consume registers its consumer here, and the check and the registration are one step
  // so two connections cannot both take a queue that an exclusive consumer wants (exclusive
  // consumers are per process like exclusive queues, HIP-1326 §6). False with the 403 sentence
  // when the consumer may not start.
  bool add_consumer(const std::string& queue, const std::shared_ptr<channel_context>& channel,
                    const std::string& consumer_tag, bool exclusive, std::string& refusal);
  // Removes one consumer (unknown: no-op). When it was the queue's last one in this process
  // and the queue is auto-delete, the queue is deleted (HIP-1326 §6: counted per process).
  void remove_consumer(const std::string& queue, const channel_context& channel,
                       const std::string& consumer_tag);
  std::uint32_t consumer_count(const std::string& queue) const;
  // x-single-active-consumer: this process's consumers of a queue wait in line, in registration
  // order, and only the first asks the bus (which serves one asker at a time, across replicas).
  // True when this consumer is first; when the first goes, the next one's channel is told
  // (basic_class::consumers_may_ask) on its own executor.
  bool first_in_line(const std::string& queue, const channel_context& channel, const std::string& consumer_tag) const;
  // A queue with x-expires was used by what the bus cannot see (a declare, a basic.get, the end
  // of its last consumer here): the time is written to its `u.` key in the bucket, for every
  // replica's expiry check (expiry.hpp).
  enum class use { declare, get, consumer_gone };
  void note_use(const std::string& queue, use how);
  // The latest use of the queue noted here (ms since the epoch; 0: none), written or not yet.
  std::uint64_t last_use_here_ms(const std::string& queue) const;

  // ---- deleting a queue (queue.delete, exclusive owner gone, auto-delete, a watch delete)
  // The local half, immediate: mirror entry, exclusive claim and live consumers (each channel
  // that had one gets basic_class::queue_deleted on its own executor).
  void forget_queue(const std::string& queue);
  // The whole deletion, asynchronous: forget_queue, then the bus consumer and the KV key on
  // the bus pool. Failures are logged to stderr; there is nobody to answer.
  void delete_queue(const std::string& queue);

  // ---- writes (topology_store.hpp does the bucket half)
  // Local-first: fn(routing::topology&) under the exclusive lock (the same connection sees
  // the change on its next frame, before the bucket write returns).
  template <class Fn>
  auto write_topology(Fn&& fn) {
    std::unique_lock lock(topology_mutex_);
    return std::forward<Fn>(fn)(topology_);
  }
  // A bucket entry written or re-read by this process: applied unless the mirror already
  // holds a newer revision of the key. nullopt = deleted.
  void apply_entry(const std::string& key, const std::optional<std::string>& value,
                   std::uint64_t revision);

  // Transient names this process declared (non-durable, or exclusive): shutdown() deletes
  // those still carrying this node's mark.
  void remember_transient(const std::string& bucket_key);

  // Mount: opens the watch (initial replay applied before it returns), then removes the
  // transient entries a previous incarnation of this node left behind. Throws
  // std::runtime_error naming the cause.
  void open();
  // Clean stop (blocking; off the io threads): deletes this node's transient entries, stops
  // the watch. Idempotent.
  void stop();

  // The identity stored on transient entries: settings.node_name, or (unset) a per-process
  // name that never matches a later incarnation.
  const std::string& node() const { return node_; }
  // Reports what no client can be told (settings.log_warning, or standard error).
  void warn(std::string_view text) const;

 private:
  struct consumer_ref {
    std::weak_ptr<channel_context> channel;
    const channel_context* key = nullptr;  // identity only
    std::string tag;
    bool exclusive = false;
  };
  void on_watch_change(const std::string& key, const std::optional<std::string>& value,
                       std::uint64_t revision, bool replay);
  // Applies a bucket entry to the mirror unless the mirror already holds a newer revision.
  // Returns true when the mirror changed.
  bool apply_locked(const std::string& key, const std::optional<std::string>& value,
                    std::uint64_t revision);
  // Removes and returns the channels with consumers on `queue` (owners_mutex_ held).
  std::vector<std::weak_ptr<channel_context>> take_consumers_locked(const std::string& queue);
  void notify_deleted(const std::string& queue,
                      std::vector<std::weak_ptr<channel_context>> channels);
  void sweep_leftovers();
  // Gives every queue consumer this process's ack wait (bus::client_options::ack_wait), so that
  // CLOUD_AMQP_ACK_WAIT holds for queues declared before it was set too. Blocking: run once,
  // on the bus's worker pool, soon after open.
  void converge_ack_waits();
  // Once a second, off the io threads, the windowed queues' routes are narrowed to what their
  // consumers have not passed (store::narrow_windows), so that delivery soon costs nothing again.
  void narrow_windows_soon();
  void narrow_windows(const std::vector<std::string>& queues);

  boost::asio::io_context& io_;
  std::shared_ptr<bus::client> bus_;
  settings settings_;
  std::string node_;

  mutable std::shared_mutex topology_mutex_;
  routing::topology topology_;
  std::map<std::string, std::uint64_t> revisions_;  // bucket key → newest revision applied
  boost::asio::strand<boost::asio::io_context::executor_type> mirror_strand_;
  bus::topology_watch watch_;
  std::vector<std::string> leftovers_;  // this node's transient keys seen in the replay
  std::vector<std::string> pending_warnings_;  // collected under the lock, logged after it
  boost::asio::steady_timer narrow_timer_;     // on mirror_strand_
  struct narrowing_pace {
    std::chrono::steady_clock::time_point due{};
    int seconds = 1;
  };
  std::map<std::string, narrowing_pace> narrowing_;  // touched only by one narrowing round at a time
  std::atomic<bool> narrowing_stopped_{false};
  std::shared_ptr<expiry_sweeper> expiry_;  // expires the heads of idle queues (expiry.hpp)
  boost::asio::any_io_executor dead_letter_lane_;

  mutable std::mutex owners_mutex_;
  std::map<std::string, std::uint64_t> exclusive_owners_;
  std::map<std::string, std::vector<consumer_ref>> consumers_;
  std::set<std::string> transient_;
  struct use_record {
    std::uint64_t at_ms = 0;                       // the latest use here (wall clock)
    std::chrono::steady_clock::time_point written{};  // when the bucket was last told
  };
  std::map<std::string, use_record> uses_;  // by note_use
  bool stopped_ = false;

};
using broker_state = broker;

// ---------------------------------------------------------------------------------------------
// basic_class: the basic/confirm engineer's half of a channel (basic*.cpp, consumer*, delivery*,
// publish*). The channel core (channel.cpp) owns one per channel and calls exactly these, on
// the connection's executor, one method at a time in arrival order.
// Its state is the engineer's: define `basic_class::state` and every member below in basic.cpp.
// ---------------------------------------------------------------------------------------------
class basic_class {
 public:
  explicit basic_class(channel_context& ctx);
  ~basic_class();
  basic_class(const basic_class&) = delete;
  basic_class& operator=(const basic_class&) = delete;

  // One per basic-class method a client sends: each answers or fails the channel. Those that
  // take the method's turn answer from a continuation that carries it (turn, below).
  void on_method(wire::basic_qos m);
  void on_method(wire::basic_consume m, turn held);
  void on_method(wire::basic_cancel m, turn held);
  void on_method(wire::basic_get m, turn held);
  void on_method(wire::basic_ack m);
  void on_method(wire::basic_reject m);
  void on_method(wire::basic_nack m);
  void on_method(wire::basic_recover m);
  void on_method(wire::basic_recover_async m);
  // A complete publish. Its turn ends as soon as the publish is handed to the bus in order (the
  // confirm, if any, follows later) so a publisher is not held to one round trip.
  void on_publish(wire::basic_publish m, std::string property_octets, std::string body, turn held);
  // The channel is gone: requeue outstanding deliveries, stop consumers (remove_consumer each).
  // Nothing may be sent any more. Called once.
  void closed();
  // Runs `work` once every publish this channel handed to the bus so far was answered (at once
  // when none is in flight), so that a method that reports on a queue after a publish on the
  // same channel sees that message, as a channel's methods are ordered in RabbitMQ. Dropped
  // when the channel closes first.
  void after_publishes(std::function<void()> work);
  // The broker deleted `queue` (queue.delete anywhere, its exclusive owner gone, auto-delete,
  // or another replica deleted it): send a server-initiated basic.cancel to each consumer of
  // this channel on it and stop them. Their registry entries are already gone.
  void queue_deleted(const std::string& queue);
  // A consumer of this channel may now ask the bus for messages (broker::first_in_line).
  void consumers_may_ask();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// ---------------------------------------------------------------------------------------------
// turn: a method's turn on its channel. The channel's methods are answered in arrival order:
// the next one starts when this one's turn ends, at the first end() of any copy, or when the
// last copy is gone. A handler that answers at once just returns; one that answers from a
// continuation carries a copy into it. So a method ends exactly once, and a continuation
// dropped because the channel closed ends it too.
// ---------------------------------------------------------------------------------------------
class turn {
 public:
  turn() = default;  // no method's: ending it does nothing
  // The method is answered (its continuation may go on, e.g. a publish waiting for the bus).
  void end() {
    if (state_) state_->end();
  }

 private:
  friend class channel_context;
  struct state {
    explicit state(std::function<void()> n) : next(std::move(n)) {}
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() { end(); }
    void end() {
      if (auto n = std::exchange(next, nullptr)) n();
    }
    std::function<void()> next;
  };
  explicit turn(std::function<void()> next) : state_(std::make_shared<state>(std::move(next))) {}
  std::shared_ptr<state> state_;
};

// Where a channel is in its life, as the broker sees it. Only forward: open → failed → closed,
// or open → closed.
enum class channel_phase {
  open,    // methods run and are answered
  failed,  // this side raised a channel or connection exception: nothing more goes out
  closed,  // closed() ran (either side closed it, or the connection ended): consumers stopped,
           // outstanding deliveries requeued
};

// ---------------------------------------------------------------------------------------------
// channel_context: one open channel, as the handler files see it. Held by shared_ptr: pending
// bus work keeps it alive after the channel closed, but then nothing is sent.
// ---------------------------------------------------------------------------------------------
class channel_context : public std::enable_shared_from_this<channel_context> {
 public:
  channel_context(std::shared_ptr<broker> b, connection_port& port, std::uint16_t id);
  ~channel_context();
  channel_context(const channel_context&) = delete;
  channel_context& operator=(const channel_context&) = delete;

  broker& state() { return *broker_; }
  const std::shared_ptr<broker>& state_ptr() const { return broker_; }
  // Valid only while is_open(): the session outlives its open channels, not their bus work.
  connection_port& port() { return port_; }
  std::uint16_t id() const { return id_; }
  std::uint64_t connection_id() const { return connection_id_; }
  const boost::asio::any_io_executor& executor() const { return executor_; }
  std::uint32_t frame_max() const { return frame_max_; }
  // The connection's bus client: its publishes, pulls and settlements go through it.
  bus::client& bus() { return *bus_; }
  const std::shared_ptr<bus::client>& bus_ptr() const { return bus_; }
  basic_class& basic() { return *basic_; }
  channel_phase phase() const { return phase_; }
  // False once the channel failed or closed: nothing may be sent any more, and handlers drop
  // their work.
  bool is_open() const { return phase_ == channel_phase::open; }
  // closed() ran: what is still answered by the bus goes straight back.
  bool is_closed() const { return phase_ == channel_phase::closed; }

  // Sends a method on this channel (one frame). Ignored once the channel is not open.
  template <class M>
  void reply(const M& m) {
    if (!is_open()) return;
    std::string out;
    wire::encode_method(out, id_, m);
    port_.send(std::move(out));
  }
  // Sends already-encoded frames (a delivery: method + header + bodies, as one unit).
  void send(std::string frames);

  // Channel exception: channel.close with `code` and the sentence (the session adds "<NAME> - "),
  // naming `offending`. Later methods of this channel are dropped; the session then calls
  // channel::closed().
  void fail(wire::reply_code code, std::string_view sentence, wire::method_key offending);
  // Connection exception (503, 541 …): connection.close, then the socket goes.
  void fail_connection(wire::reply_code code, std::string_view sentence, wire::method_key offending);

  // Runs `work()` (blocking bus calls) on the bus pool, then `then(result)` on this channel's
  // executor — only if the channel is still open then. `work` may return void (`then()` takes
  // no argument then). An exception escaping `work` closes the channel through
  // bus_failure_reply (541, naming `during` and the exception's text). `work` must not touch the
  // channel.
  template <class Work, class Then>
  void run_on_bus(wire::method_key during, Work work, Then then);

  // The queue an empty queue name means (AMQP: the channel's last declared queue). Fails the
  // channel with 404 and returns nullopt when nothing was declared on it yet.
  std::optional<std::string> resolve_queue(const std::string& name, wire::method_key during);
  std::string last_queue;

  // Confirm mode (confirm.select sets it; basic.publish reads it).
  bool confirms = false;

  // ---- channel.cpp only
  // The one transition function: phases only move forward (channel_phase).
  void enter(channel_phase next);
  // The turn of the method about to run; `next` runs when it ends while the channel is open.
  turn begin_turn(std::function<void()> next);

 private:
  static std::string method_name_(wire::method_key key) {
    const auto* info = wire::find_method(key);
    return info != nullptr ? std::string(info->name) : std::string("the method");
  }
  static std::string describe_(const std::exception& e) {
    std::string text = e.what();
    return text.empty() ? std::string("unknown error") : text;
  }

  std::shared_ptr<broker> broker_;
  connection_port& port_;
  std::uint16_t id_;
  std::uint64_t connection_id_;
  std::uint32_t frame_max_;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<bus::client> bus_;
  std::unique_ptr<basic_class> basic_;
  channel_phase phase_ = channel_phase::open;
};

template <class Work, class Then>
void channel_context::run_on_bus(wire::method_key during, Work work, Then then) {
  using result_t = std::invoke_result_t<Work&>;
  using value_t = std::conditional_t<std::is_void_v<result_t>, std::monostate, result_t>;
  boost::asio::post(broker_->bus_executor(), [self = shared_from_this(), during,
                                              work = std::move(work),
                                              then = std::move(then)]() mutable {
    std::optional<value_t> value;
    std::string error;
    {
      // `work` and its captures die here, before the continuation exists: a pool thread
      // must never drop the last reference to the broker.
      auto w = std::move(work);
      try {
        if constexpr (std::is_void_v<result_t>) {
          w();
          value.emplace();
        } else {
          value.emplace(w());
        }
      } catch (const std::exception& e) {
        error = describe_(e);
      }
    }
    auto exec = self->executor_;
    boost::asio::post(exec, [self = std::move(self), during, error = std::move(error),
                             value = std::move(value), then = std::move(then)]() mutable {
      if (!self->is_open()) return;
      if (!value) {
        const auto reply = bus_failure_reply(bus::bus_errc::failed, "the bus did not complete " + method_name_(during),
                                             error, "retry on a new channel");
        self->fail(reply.code, reply.text, during);
        return;
      }
      if constexpr (std::is_void_v<result_t>) {
        then();
      } else {
        then(std::move(*value));
      }
    });
  });
}

}  // namespace amqp::broker
