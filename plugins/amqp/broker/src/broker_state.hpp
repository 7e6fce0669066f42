#pragma once
// class broker: one vhost's state, shared by every connection of the vhost (broker.hpp declares
// it; broker.cpp defines it). Its public members are safe to call from any connection's
// executor; blocking bus calls never run on an io thread.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::broker {

class channel_context;
class expiry_sweeper;
struct expiry_look;
class legacy_filters;
class settled_removal;
class due_router;

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

  // ---- the topology mirror (a cache of the KV bucket `amqp`, HIP-1326, "Where it sits")
  // Runs `fn(const routing::topology&)` under a shared lock and returns what it returns.
  // Keep fn short: it holds writers off. Never call the bus inside it.
  template <class Fn>
  auto read_topology(Fn&& fn) const {
    std::shared_lock lock(topology_mutex_);
    return std::forward<Fn>(fn)(static_cast<const routing::topology&>(topology_));
  }
  // The queue's filters as its bus consumer is asked for them: its own subject, or those a
  // consumer of the previous release still reads (legacy_filters.hpp). Empty when the queue is not
  // in the mirror.
  std::vector<std::string> filters_of(const std::string& queue) const;
  // How the queue's consumers share it on the bus (x-single-active-consumer); all_consumers when
  // the queue is not in the mirror.
  bus::queue_sharing sharing_of(const std::string& queue) const;
  // The queue's x-queue-type (classic when the queue is not in the mirror).
  routing::queue_type type_of(const std::string& queue) const;
  // The queue's x-message-ttl and x-delivery-limit, if it has them.
  struct delivery_rules {
    std::optional<std::uint64_t> message_ttl;
    std::optional<std::uint64_t> delivery_limit;
  };
  delivery_rules rules_for(const std::string& queue) const;

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
  // RabbitMQ's 405 text for an exclusive queue this connection may not use, or may not declare so.
  std::string locked_text(const std::string& queue) const;

  // ---- live consumers of this process, per queue (declare-ok's consumer count, if-unused,
  //      auto-delete, and the server-initiated basic.cancel when a queue is deleted)
  // basic.consume registers its consumer here, and the check and the registration are one step
  // so two connections cannot both take a queue that an exclusive consumer wants (exclusive
  // consumers are per process like exclusive queues, HIP-1326, "Two facts a single process
  // cannot answer for the fleet"). False with the 403 sentence when the consumer may not start.
  bool add_consumer(const std::string& queue, const std::shared_ptr<channel_context>& channel,
                    const std::string& consumer_tag, bool exclusive, std::string& refusal, bool ack_required = true,
                    std::uint16_t prefetch = 0);
  // Every consumer of this process (the management API's list).
  std::vector<consumer_view> consumers() const;
  // The bus client a connection's channels use, kept (weakly) until connection_closed, so that
  // held() sees what every client of this process holds.
  void note_connection_client(std::uint64_t connection_id, const std::shared_ptr<bus::client>& client);
  // The consumers any bus client of this broker settled deliveries of since the last call.
  std::set<std::string> take_settled_consumers();
  // The queue whose consumer this is, when the mirror has it.
  std::optional<std::string> queue_of_consumer(const std::string& consumer) const;
  bool has_legacy_queues() const;
  // Under limits retention a queue has a bus consumer only once it is read: each reader (consume,
  // get, the expiry sweeper, a head drop) makes sure of it first. Blocking, on the bus pool. Known
  // made afterwards, until the queue goes or a pull finds the consumer gone (forget_consumer).
  // `bus`: the reader's client, whose credentials make it.
  bus::bus_status make_consumer(bus::client& bus, const std::string& queue);
  bool consumer_made(const std::string& queue) const;
  void forget_consumer(const std::string& queue);
  // make_consumer with the broker's client, off the caller's thread: `then` runs on `ex` with its answer.
  void after_consumer_made(const std::string& queue, boost::asio::any_io_executor ex,
                           std::function<void(bus::bus_status)> then);
  void forget_connection_client(std::uint64_t connection_id);
  std::map<std::string, std::uint64_t> held() const;
  // Removes one consumer (unknown: no-op). When it was the queue's last one in this process
  // and the queue is auto-delete, the queue is deleted (counted per process: HIP-1326, "Two
  // facts a single process cannot answer for the fleet").
  void remove_consumer(const std::string& queue, const channel_context& channel,
                       const std::string& consumer_tag);
  std::uint32_t consumer_count(const std::string& queue) const;
  // x-single-active-consumer: this process's consumers of a queue wait in line, in registration
  // order, and only the first asks the bus (which serves one asker at a time, across replicas).
  // True when this consumer is first; when the first goes, the next one's channel is told
  // (basic_class::consumers_may_ask) on its own executor.
  bool first_in_line(const std::string& queue, const channel_context& channel, const std::string& consumer_tag) const;
  // A queue with x-expires was used by what the bus cannot see (a declare, a basic.get, a
  // consumer here: its start, its life, the end of the last one): the time is written to its `u.`
  // key in the bucket, for every replica's expiry check (expiry.hpp).
  enum class use { declare, get, consumer_added, consumer_lives, consumer_gone };
  void note_use(const std::string& queue, use how);
  // A policy's trim of a queue to its length limit (policies.cpp), one at a time per queue:
  // begin_trim is false while one runs (which is then asked to count again); end_trim is true when
  // it was asked again meanwhile (the trim goes on, and stays the queue's).
  bool begin_trim(const std::string& queue);
  bool end_trim(const std::string& queue);
  // A policy came or changed: the queues it gives a TTL, a dead-letter exchange or an expiry are
  // looked at as a declaration with those arguments would have them looked at.
  void look_at_policy_queues(const std::string& policy);
  // A message this process stored: each queue whose head may expire while nobody reads it is
  // looked at when the message expires there (expiry.hpp; the looks come with the route, from
  // the same mirror read: expiries_of).
  void expect_expiries(const std::vector<expiry_look>& looks);
  // The latest use of the queue noted here (ms since the epoch; 0: none), written or not yet.
  std::uint64_t last_use_here_ms(const std::string& queue) const;

  // ---- deleting a queue (queue.delete, exclusive owner gone, auto-delete, a watch delete)
  // The local half, immediate: mirror entry, exclusive claim and live consumers (each channel
  // that had one gets basic_class::queue_deleted on its own executor).
  void forget_queue(const std::string& queue);
  // The whole deletion, asynchronous: forget_queue, then the bus consumer and the KV key on
  // the bus pool. There is nobody to answer: a failure is logged, and the bus part is tried
  // again until it is done (remove_from_bus).
  void delete_queue(const std::string& queue);
  // A deletion of `queue` this process started has not reached the bus yet: a declaration that
  // meets it waits (after_deletion), so that it ends with a queue that exists rather than one
  // the deletion removes after declare-ok. deletion_finished runs on the bus pool, once each.
  void deletion_started(const std::string& queue);
  void deletion_finished(const std::string& queue);
  bool being_deleted(const std::string& queue) const;
  // `then` runs once no deletion of `queue` is under way (at once when none is).
  void after_deletion(const std::string& queue, std::function<void()> then);

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
  // Reports what an operator may want to know (settings.log_info; nowhere without it).
  void note(std::string_view text) const;
  // A confirmed publish the bus did not store, and why: warned once a second at most (a bus that
  // stores nothing nacks every publish), with how many went unreported since.
  void report_nack(std::string_view subject, std::string_view why);
  // A channel or connection exception this vhost raised, by reply code (an operator's metric).
  void count_refusal(wire::reply_code code);
  std::map<int, std::uint64_t> refusals() const;
  // message_counts, counted as the channels go (relaxed: each is read alone, by an operator).
  struct counters {
    std::atomic<std::uint64_t> received{0}, received_confirm{0}, confirmed{0}, unroutable_returned{0},
        delivered_consume_manual_ack{0}, delivered_consume_auto_ack{0}, delivered_get_manual_ack{0},
        delivered_get_auto_ack{0}, get_empty{0}, redelivered{0}, acknowledged{0};
    std::atomic<std::uint64_t> queues_declared{0}, queues_created{0}, queues_deleted{0};
  };
  static void count(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  counters& message_counters() { return counters_; }
  message_counts counts() const;
  queue_counts queues_counted() const;

 private:
  struct consumer_ref {
    std::weak_ptr<channel_context> channel;
    const channel_context* key = nullptr;  // identity only
    std::string tag;
    bool exclusive = false;
    bool ack_required = true;
    std::uint16_t prefetch = 0;
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
  // CLOUD_AMQP_ACK_WAIT holds for queues declared before it was set too, and its priority group,
  // so that consumer priorities hold on queues declared before they existed. Blocking: run once,
  // on the bus's worker pool, soon after open.
  void converge_queue_consumers();
  // delete_queue's bus part; after a failure (a node down, no leader) it runs again `wait` later,
  // doubling to 30 s, unless the queue is known here again (declared anew, or written by another
  // replica): that declaration stands.
  void remove_from_bus(const std::string& queue, std::chrono::seconds wait);
  // At open: the schedules of the release before #55's step 3 target the due root.
  void retarget_previous_schedules();
  // At open, on the bus pool: what an earlier release left for each stream queue on stream AMQP
  // (its durable there) is copied into the queue's stream, one message after another.
  void feed_stream_queues_left();
  void copy_stream_queue_left(const std::string& queue, std::uint64_t from);
  static std::string copying_left(const std::string& queue, const std::string& why);

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
  std::mutex nack_report_mutex_;
  std::chrono::steady_clock::time_point last_nack_report_{};  // under nack_report_mutex_
  std::uint64_t nacks_unreported_ = 0;                        // under nack_report_mutex_
  std::shared_ptr<expiry_sweeper> expiry_;  // expires the heads of idle queues (expiry.hpp)
  // Starts the due router, once (on the mirror strand).
  void route_due_messages();
  std::atomic<bool> due_routing_{false};
  std::shared_ptr<due_router> due_router_;  // on mirror_strand_: routes delayed messages once due (due_router.hpp)
  std::set<std::shared_ptr<bus::client>> bus_clients() const;  // its own and its connections'
  std::shared_ptr<settled_removal> settled_removal_;
  std::shared_ptr<legacy_filters> legacy_;  // queues still reading the previous release's filters
  bool due_routing_stopped_ = false;  // on mirror_strand_
  boost::asio::any_io_executor dead_letter_lane_;

  mutable std::mutex owners_mutex_;
  std::map<std::string, std::uint64_t> exclusive_owners_;
  std::map<std::string, std::vector<consumer_ref>> consumers_;
  std::map<std::uint64_t, std::weak_ptr<bus::client>> connection_clients_;
  std::set<std::string> transient_;
  std::set<std::string> consumers_made_;  // queues whose bus consumer this process made or found
  struct use_record {
    std::uint64_t at_ms = 0;                       // the latest use here (wall clock)
    std::chrono::steady_clock::time_point written{};  // when the bucket was last told
  };
  std::map<std::string, use_record> uses_;  // by note_use
  std::map<std::string, bool> trims_;        // queue → asked again, while a policy's trim runs (owners_mutex_)
  struct deletion {
    int under_way = 0;
    std::vector<std::function<void()>> waiting;
  };
  std::map<std::string, deletion> deletions_;  // queues whose deletion has not reached the bus
  std::map<int, std::uint64_t> refusals_;        // by reply code
  counters counters_;
  bool stopped_ = false;

};

}  // namespace amqp::broker
