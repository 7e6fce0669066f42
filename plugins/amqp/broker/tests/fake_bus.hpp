#pragma once
// An in-memory bus::client for the broker's unit tests: no nats-server, no threads.
//
// What it models (what the broker relies on, read from bus/src and client.hpp):
//  - the KV bucket `amqp`: get/create/update/put/delete with one revision counter, a snapshot,
//    and a watch that replays synchronously and then posts each later change to its executor;
//  - stream AMQP: every stored message has a subject and the next sequence number;
//  - limits retention: a queue's consumer is made by its first reader (ensure_queue_consumer),
//    and starts at the stream's first message, filtered by NATS subject matching (`*`, `>`);
//    bus::due_consumer, made with the bus, on every due delayed message;
//  - the messages stored on each subject (stored_per_subject), what a queue without a consumer holds;
//  - pullers: waiting requests are served in arrival order; a message goes to the oldest open
//    request, requeued (NAK'ed) messages first in NAK order, then never-delivered ones in stream
//    order; a no-wait request (expires 0) gets one message or a 404 no_messages event at once;
//    stop() drops the open requests, lets what was already sent arrive, then runs on_stopped;
//  - ack/nak/term by reply subject, recorded in call order; a NAK makes the message deliverable
//    again with its delivery count raised; a stale reply is recorded and has no effect;
//  - publish: by default stored and confirmed at once; in manual mode each publish waits until
//    the test completes it with success (stored) or a failure, in any order;
//  - queue_info's counts (pending, ack pending, held here, delivered stream sequence, last active).
// What it does not model: ack wait expiry, pinned groups (single active consumer), max bytes
// per request, the NAK gate that holds pulls back, direct reply-to delivery, credentials.
// Everything runs on the test's thread: worker_executor() is the test's io_context, so a
// "blocking" call answers at once.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "amqp/bus/client.hpp"

namespace amqp::broker::test {

// What the bus was told to do with one delivery, in call order.
struct settlement {
  enum class kind { ack, nak, term };
  kind what = kind::ack;
  std::string queue;       // the consumer's name (routing::consumer_name of the AMQP queue)
  std::uint64_t seq = 0;   // stream sequence of the message
  bool stale = false;      // the reply named no delivery held any more: no effect
};
inline const char* name_of(settlement::kind k) {
  return k == settlement::kind::ack ? "ack" : k == settlement::kind::nak ? "nak" : "term";
}
inline std::ostream& operator<<(std::ostream& os, settlement::kind k) { return os << name_of(k); }

// One puller request as the broker made it.
struct pull_request {
  std::string queue;
  std::uint32_t batch = 0;
  std::chrono::milliseconds expires{0};
  int priority = 0;  // the puller's consumer priority
};

class fake_puller;

class fake_bus final : public bus::client {
 public:
  explicit fake_bus(boost::asio::io_context& io);
  ~fake_bus() override;

  // ---- what tests do and look at
  // A message another publisher stored: its sequence. Served to open requests at once.
  std::uint64_t store(const std::string& subject, const std::string& property_octets = {},
                      const std::string& body = {});
  // Manual publishes wait for complete_publish; automatic ones (the default) are stored at once.
  void set_manual_publishes(bool manual) { manual_publishes_ = manual; }
  // may_publish refuses subjects that match `filter`, as a user's publish deny permission does.
  void deny_publishing(std::string filter) { publish_denied_.push_back(std::move(filter)); }
  // The next `n` purge_subject calls time out, as a bus without a stream leader does.
  void fail_purges(int n) { failing_purges_ = n; }
  bool has_key(const std::string& key) const { return kv_.contains(key); }
  // read_message answers not_found for it while it is still stored: a stream leader whose store
  // lacks what another node's consumer delivered (a node that came back from a full disk).
  void hide_from_reads(std::uint64_t seq, bool hidden = true) {
    if (hidden) unreadable_.insert(seq); else unreadable_.erase(seq);
  }
  // Publishes the broker made so far (in call order, completed ones included).
  std::size_t publish_count() const { return publishes_.size(); }
  std::size_t publishes_waiting() const;
  const std::string& published_subject(std::size_t index) const { return publishes_.at(index).subject; }
  // Answers the index-th publish (0-based, call order): ok stores the message; an error does not.
  void complete_publish(std::size_t index, bus::bus_status outcome);
  // Delayed publishes (publish_delayed), stored and confirmed at once, waiting until fired.
  struct delayed_message {
    std::string subject;
    std::string schedule_prefix;
    std::chrono::system_clock::time_point at;
    std::string property_octets;
    std::string body;
    bool fired = false;   // stored on `subject` (its due subject), as the server does at `at`
    bool purged = false;  // purge_subject of its prefix's ".>" dropped it first
  };
  const std::vector<delayed_message>& delayed() const { return delayed_; }
  void fire_delayed(std::size_t index);
  const std::vector<settlement>& settlements() const { return settlements_; }
  // Every delivery the bus handed out (its reply subject, the consumer, the message), in order,
  // and how many times each reply was settled (stale settlements included): what the sequence
  // fuzzer's "settled exactly once" invariant reads.
  struct handout {
    std::string reply;
    std::string consumer;
    std::uint64_t seq = 0;
  };
  const std::vector<handout>& handed_out() const { return handed_out_; }
  std::uint32_t times_settled(const std::string& reply) const {
    auto it = times_settled_.find(reply);
    return it == times_settled_.end() ? 0 : it->second;
  }
  // The delivery `reply` names is still held: handed out, not settled, its consumer alive.
  bool holds(const std::string& reply) const;
  // The index-th publish was answered (complete_publish).
  bool answered(std::size_t index) const { return publishes_.at(index).answered; }
  std::vector<settlement> settlements_of(settlement::kind k) const;
  const std::vector<pull_request>& requests() const { return requests_; }
  // Messages of the queue's consumer (by consumer name): never delivered or requeued (before its
  // first read, what its subject holds), and delivered but not yet settled.
  std::uint64_t ready(const std::string& consumer) const;
  std::uint64_t unsettled(const std::string& consumer) const;
  bool has_consumer(const std::string& consumer) const { return consumers_.contains(consumer); }
  // Open pull requests' messages not yet served, over every puller of the queue.
  std::uint32_t open_requests(const std::string& consumer) const;

  // ---- bus::client
  bus::bus_result<std::shared_ptr<bus::client>> sign_in(const bus::credentials&,
                                                        std::chrono::steady_clock::time_point) override;
  bus::bus_status join(const bus::client&) override;
  bus::bus_status may_publish(std::string_view subject) override;
  bus::bus_result<bus::topology_watch> watch_topology(
      boost::asio::any_io_executor ex, on_change_fn on_change,
      std::optional<std::chrono::steady_clock::time_point> deadline) override;
  bus::bus_result<std::vector<bus::kv_keyed_entry>> kv_snapshot(std::chrono::steady_clock::time_point) override;
  bus::bus_result<bus::kv_entry> kv_get(const std::string& key) override;
  bus::bus_result<std::uint64_t> kv_create(const std::string& key, const std::string& value) override;
  bus::bus_result<std::uint64_t> kv_update(const std::string& key, const std::string& value,
                                           std::uint64_t expected_revision) override;
  bus::bus_result<std::uint64_t> kv_put(const std::string& key, const std::string& value) override;
  bus::bus_status kv_delete(const std::string& key) override;
  bus::bus_status ensure_queue_consumer(const std::string& queue, const std::vector<std::string>& filters,
                                        bus::queue_sharing sharing) override;
  bus::bus_status delete_queue_consumer(const std::string& queue) override;
  bus::bus_result<std::vector<std::string>> queues_to_converge() override;
  bus::bus_result<std::map<std::string, std::vector<std::string>>> queue_consumer_filters() override;
  bus::bus_result<bus::queue_info> queue_info(const std::string& queue) override;
  bus::bus_result<bus::queue_info> peek_queue(const std::string& queue) override;
  bus::bus_result<std::map<std::string, bus::queue_info>> peek_all_queues() override;
  std::map<std::string, std::uint64_t> holdings() const override;
  std::uint64_t requests_made() const override { return 0; }  // it makes none: it is in memory
  bool publishes_uncounted() const override { return false; }
  bus::bus_status count_publishes() override { return bus::bus_ok(); }
  bus::bus_status purge_subject(const std::string& subject) override;
  bus::bus_status purge_subject_below(const std::string& subject, std::uint64_t below) override;
  bus::bus_result<bool> use_limits_retention() override { return true; }
  bus::bus_result<std::size_t> retarget_schedules(
      const std::function<std::optional<std::string>(std::string_view target)>& retarget) override;
  bool retains_by_limits() const override { return true; }
  bus::bus_result<std::map<std::string, std::uint64_t>> stored_per_subject(const std::string& filter) override;
  std::vector<std::string> take_settled() override;
  bus::bus_status purge_queue(const std::string& queue, const std::vector<std::string>& filters,
                              bus::queue_sharing sharing) override;
  bus::bus_result<std::uint64_t> last_sequence() override { return stream_.size(); }
  bus::bus_result<std::optional<bus::stored_message>> next_message(std::uint64_t from,
                                                                   const std::vector<std::string>& filters) override;
  bus::bus_result<bus::delivery> read_message(std::uint64_t seq) override;
  void publish(std::string subject, std::string amqp_props_b64, std::string body, std::string routed_as,
               boost::asio::any_io_executor ex,
               std::function<void(bus::bus_status)> done) override;
  // Stored once per msg_id: a publish of an id already stored is confirmed and not kept again.
  void publish_identified(std::string subject, std::string msg_id, std::string amqp_props_b64, std::string body,
                          std::string routed_as, boost::asio::any_io_executor ex,
                          std::function<void(bus::bus_status)> done) override;
  void publish_delayed(std::string subject, std::string schedule_prefix, std::chrono::system_clock::time_point at,
                       std::string amqp_props_b64, std::string body, boost::asio::any_io_executor ex,
                       std::function<void(bus::bus_status)> done) override;
  std::size_t publish_backlog() const override { return publishes_waiting(); }
  std::shared_ptr<bus::puller> make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                           bus::puller_callbacks callbacks, bus::queue_sharing sharing,
                                           int priority) override;
  // Stream queues: their streams are kept (limits and copies) for tests to look at; readers read nothing.
  bus::bus_status ensure_queue_stream(const std::string& queue, const bus::stream_limits& limits) override {
    queue_streams_[queue].limits = limits;
    return bus::bus_ok();
  }
  bus::bus_status delete_queue_stream(const std::string& queue) override {
    queue_streams_.erase(queue);
    return bus::bus_ok();
  }
  bus::bus_result<bus::stream_state> queue_stream_state(const std::string& queue) override;
  void publish_to_queue_stream(const std::string& queue, std::string msg_id, std::string amqp_props_b64,
                               std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                               std::function<void(bus::bus_status)> done) override;
  bus::bus_result<std::string> create_stream_reader(const std::string&, const bus::stream_start&) override {
    return std::string("reader");
  }
  bus::bus_status delete_stream_reader(const std::string&, const std::string&) override { return bus::bus_ok(); }
  std::shared_ptr<bus::puller> make_stream_puller(const std::string& queue, const std::string& reader,
                                                  boost::asio::any_io_executor ex,
                                                  bus::puller_callbacks callbacks) override;
  struct queue_stream {
    bus::stream_limits limits;
    std::vector<std::string> msg_ids;    // of what was stored in it, in order ("" without one)
    std::vector<std::string> bodies;     // the same messages' bodies
    std::vector<std::string> routed_as;  // and the subject each shows
  };
  const std::map<std::string, queue_stream>& queue_streams() const { return queue_streams_; }
  void ack(const std::string& reply) override { settle(reply, settlement::kind::ack); }
  void nak(const std::string& reply) override { settle(reply, settlement::kind::nak); }
  void term(const std::string& reply) override { settle(reply, settlement::kind::term); }
  std::shared_ptr<bus::direct_subscription> subscribe_direct(const std::string& subject,
                                                             boost::asio::any_io_executor ex,
                                                             std::function<void(bus::delivery)> on_message) override;
  void publish_direct(const std::string& subject, std::string amqp_props_b64, std::string body,
                      boost::asio::any_io_executor ex, std::function<void(bool received)> done) override;
  boost::asio::any_io_executor worker_executor() override { return io_.get_executor(); }
  void close() override;

 private:
  friend class fake_puller;
  std::set<std::string> settled_consumers_;  // settled for good since take_settled
  std::map<std::string, queue_stream> queue_streams_;

  struct message {
    std::string subject;
    std::string property_octets;
    std::string body;
    bool purged = false;  // purge_subject: no consumer reads it again
  };
  struct held {
    std::uint64_t deliveries = 0;  // times delivered so far
    std::string reply;             // the current delivery's; empty while requeued
  };
  struct consumer_state {
    std::vector<std::string> filters;
    std::uint64_t cursor = 0;                 // every message up to it was delivered once
    std::deque<std::uint64_t> requeued;       // NAK'ed, in NAK order: served first
    std::map<std::uint64_t, held> ack_pending;  // delivered and not acked/termed
    std::uint64_t last_active_ms = now_ms();    // made, delivered or settled last (queue_info)
  };
  static std::uint64_t now_ms() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  }
  struct waiting_request {
    std::weak_ptr<fake_puller> puller;
    std::uint32_t left = 0;
  };
  struct pending_publish {
    std::string subject;
    std::string property_octets;
    std::string body;
    boost::asio::any_io_executor ex;
    std::function<void(bus::bus_status)> done;
    bool answered = false;
    std::string msg_id;  // set: stored only if no message of this id is
  };

  bool matches(const consumer_state& c, const std::string& subject) const;
  std::optional<std::uint64_t> next_pending(const consumer_state& c) const;
  std::uint64_t pending_count(const consumer_state& c) const;
  // Serves the queue's open requests while it has messages for them.
  void dispatch(const std::string& consumer);
  // Takes the next message for `consumer` (requeued first) and makes a delivery of it.
  std::optional<bus::delivery> take(const std::string& consumer);
  void request(const std::shared_ptr<fake_puller>& p, std::uint32_t batch, std::chrono::milliseconds expires);
  void forget_requests(const fake_puller& p);
  void settle(const std::string& reply, settlement::kind how);
  void notify(const std::string& key, std::optional<std::string> value, std::uint64_t revision);
  std::uint64_t write(const std::string& key, const std::string& value);

  boost::asio::io_context& io_;
  std::map<std::string, bus::kv_entry> kv_;
  std::uint64_t kv_revision_ = 0;
  std::optional<boost::asio::any_io_executor> watch_ex_;
  std::shared_ptr<on_change_fn> on_change_;
  std::vector<message> stream_;  // seq = index + 1
  std::map<std::string, consumer_state> consumers_;
  std::deque<waiting_request> waiting_;  // every queue's, in arrival order
  std::map<std::string, std::pair<std::string, std::uint64_t>> replies_;  // reply → consumer, seq
  std::uint64_t reply_serial_ = 0;
  std::vector<pending_publish> publishes_;
  std::set<std::string> stored_ids_;  // the msg_ids of identified publishes stored
  std::vector<delayed_message> delayed_;
  bool manual_publishes_ = false;
  std::vector<std::string> publish_denied_;  // deny_publishing
  std::set<std::uint64_t> unreadable_;
  int failing_purges_ = 0;
  std::vector<settlement> settlements_;
  std::vector<handout> handed_out_;
  std::map<std::string, std::uint32_t> times_settled_;
  std::vector<pull_request> requests_;
};

}  // namespace amqp::broker::test
