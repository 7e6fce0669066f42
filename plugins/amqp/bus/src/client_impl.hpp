#pragma once
// The client behind amqp/bus/client.hpp. Two nats connections (connection.cpp): a buffered one
// for publishes and settlements, whose wildcard reply subscription (`<inbox>.>`) carries every
// publish ack and answered NAK, and one that sends at once for pull requests and API requests,
// with one subscription per puller, whose interest is what its pull requests live on.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "amqp/bus/client.hpp"
#include "api_reply.hpp"
#include "completion_queue.hpp"
#include "held_deliveries.hpp"
#include "nats_handle.hpp"
#include "permission_denials.hpp"
#include "publish_permissions.hpp"
#include "pin_lease.hpp"
#include "publisher.hpp"
#include "publish_counts.hpp"
#include "requeue_order.hpp"
#include "unseen_returns.hpp"

namespace amqp::bus::detail {

inline constexpr std::int64_t ns_per_second = 1'000'000'000;  // JetStream's durations
// The one priority group of a queue's consumer: pinned (single_active) or prioritized. Every pull
// request names it: the server refuses one without it on a consumer that has a group.
inline constexpr const char* priority_group = "amqp";
// The bus level of a waiting request of an all_consumers puller of RabbitMQ consumer priority
// `priority` (the server serves level 0 first; RabbitMQ the highest priority first).
constexpr int bus_level(int priority) { return highest_consumer_priority - priority; }
// The durable that holds every delayed publish's schedule (ensure_delayed_consumers); '~' is no
// character of a queue's consumer name.
inline constexpr const char* delayed_holder = "~delayed";

using json = nlohmann::json;

// RFC 3339 in UTC with nanoseconds, as the server reads a schedule's "@at" and opt_start_time.
std::string rfc3339(std::chrono::system_clock::time_point at);

class puller_impl;
class client_impl;

// The delivery fields carried by a `$JS.ACK...` reply subject (v1 and v2 forms).
bool parse_ack_subject(std::string_view reply, delivery& out);
// The consumer (queue) a `$JS.ACK...` subject names; empty when it is not one.
std::string_view consumer_of(std::string_view reply);
// The queue and the stream sequence of a delivery, from its `$JS.ACK...` subject.
struct held_ref {
  std::string_view queue;
  std::uint64_t seq = 0;
};
std::optional<held_ref> held_ref_of(std::string_view reply);
// A message a pull brought: a delivery, or the headers-only status that ends a request.
struct arrival {
  std::optional<delivery> message;
  pull_event status;  // when !message; code 100 is a heartbeat
  std::optional<std::uint32_t> unfilled;  // the status's Nats-Pending-Messages, when it has one
  std::string pin;  // a message's Nats-Pin-Id: the pin the server gave its request's puller
  std::size_t bytes = 0;  // a message's size as the server counts it against max_bytes, near enough
  bool filled = false;    // 409 Batch Completed: a request with bytes to spare got all its messages
  bool first = false;     // a message the server counted delivered once (before unseen returns are left out)
};
arrival read_arrival(natsMsg* msg);
// A message's header `key`; "" when it has none.
std::string header(natsMsg* msg, const char* key);
// A message's subject, AMQP properties (decoded from Amqp-Props) and body.
void read_content(natsMsg* msg, delivery& d);

// A queue's pull requests (see amqp/bus/client.hpp). Everything but the nats callbacks runs on
// the executor.
//
// JetStream delivers a pulled message under its own subject, so a delivery cannot be told apart
// by request, only by the inbox (subscription) it came through: what is asked for is counted per
// inbox. A request ends filled (silently), with a 408 naming how many it left unfilled, or with a
// status that says nothing of that (409 consumer deleted, leadership change, ...): then the inbox
// is replaced, and whatever its requests did not bring is known once it is drained.
class puller_impl final : public puller, public std::enable_shared_from_this<puller_impl> {
 public:
  puller_impl(std::weak_ptr<client_impl> owner, std::string queue, boost::asio::any_io_executor ex,
              puller_callbacks callbacks, queue_sharing sharing, int priority);
  // A reader of a stream queue's own stream: `queue` is the reader's consumer there (ack policy
  // none), so nothing it brings is held, settled or handed back.
  puller_impl(std::weak_ptr<client_impl> owner, std::string stream, std::string reader,
              boost::asio::any_io_executor ex, puller_callbacks callbacks);
  ~puller_impl() override;
  bus_status start();
  void request(std::uint32_t batch, std::chrono::milliseconds expires) override;
  std::uint32_t asked() const override { return asked_; }
  std::uint32_t window_in_bytes() const override;
  void stop() override;
  const std::string& queue() const override { return queue_; }

  // Any thread: the bus refused this client's user the queue's pull requests; reported to the
  // executor as a denied event.
  void post_denied(std::string text);
  // Any thread: the bus connection came back. Requests may have died with the old one, or
  // not: the inbox is replaced, which ends them for certain.
  void post_rotate();

 private:
  // One inbox's subscription, shared by the puller (while it is the current one) and the
  // subscription's closure (until its on-complete callback): the handle goes only once both
  // are done with it, so a draining subscription is never destroyed (which would unsubscribe
  // it at once, dropping what is still on its way).
  struct inbox_box {
    std::weak_ptr<puller_impl> puller;
    std::weak_ptr<client_impl> owner;
    std::string queue;
    std::uint32_t generation = 0;
    subscription_ptr sub;
    bool settles = true;
  };
  struct inbox_count {
    std::uint32_t asked = 0;  // asked through this inbox, neither arrived nor reported unfilled
    std::chrono::steady_clock::time_point answer_by{};  // its newest request's expiry, plus a margin
  };
  struct wanted {
    std::uint32_t batch = 0;
    std::chrono::milliseconds expires{};
  };

  static void on_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
  bus_status subscribe();
  void send_wanted();
  void send(const wanted& w);
  void handle(std::uint32_t generation, arrival a);
  void mark_if_sent_again(delivery& d);
  void unfill(inbox_count& count, std::uint32_t n);
  void note_size(std::size_t bytes);
  void drained(std::uint32_t generation);
  void drain_current();
  void rotate();
  void arm_watchdog();
  void on_watchdog();
  bool fence();
  void fenced(int code);
  void end_requests();
  void finish_stop();

  std::weak_ptr<client_impl> owner_;
  std::string queue_;
  boost::asio::any_io_executor ex_;
  puller_callbacks callbacks_;
  std::string inbox_;                    // the current generation's
  std::shared_ptr<inbox_box> current_;   // the current generation's subscription
  std::uint32_t generation_ = 0;
  std::map<std::uint32_t, inbox_count> counts_;  // the current and the draining generations
  std::deque<wanted> wanted_;                    // held back behind the queue's NAKs
  bool waiting_for_naks_ = false;
  bool no_wait_open_ = false;  // a no-wait request is out: its 404/408/503 means it brought nothing
  bool dead_requests_ = false;  // a drained inbox had requests open: the server may still list them
  bool gated_ = false;          // stop() drained with requests open: the client holds the queue's NAKs
  std::uint32_t asked_ = 0;
  std::uint64_t highest_first_ = 0;  // the highest stream sequence of a first delivery so far
  // The largest message of the current and of the previous run of recent_run deliveries.
  std::size_t largest_now_ = 0;
  std::size_t largest_before_ = 0;
  std::uint32_t run_ = 0;
  bool stopping_ = false;
  bool stopped_ = false;
  boost::asio::steady_timer watchdog_;
  bool watchdog_armed_ = false;
  // stop() with requests open: the inbox is drained once they can take nothing more (fence()).
  bool fencing_ = false;
  std::optional<std::uint64_t> fence_;  // the fence out, when one is
  std::chrono::steady_clock::time_point fence_until_{};
  boost::asio::steady_timer fence_timer_;
  queue_sharing sharing_;
  int priority_;                    // all_consumers: its requests' consumer priority
  std::shared_ptr<pin_lease> pin_;  // single_active only
  std::string stream_ = stream_name;  // the stream its consumer is on
  bool settles_ = true;               // false: a stream reader's deliveries need no settlement
};

class client_impl final : public client {
 public:
  explicit client_impl(client_options options);
  ~client_impl() override;

  // Mount steps, run once by client::open in this order.
  bus_status dial();
  bus_status ensure_stream();
  bus_status ensure_bucket();
  // The consumers of delayed publishes, made before any schedule can fire: the holder that keeps
  // their schedules in the interest stream, and due_consumer, which keeps and hands out what is due.
  bus_status ensure_delayed_consumers(const std::string& step);
  bus_status store_schedule_again(natsMsg* stored, const std::string& target, const std::string& step);
  bus_status ensure_own_consumer(const std::string& step, const char* name, const std::string& filter);
  // An existing stream (AMQP, or the bucket's KV_amqp) is changed to what `wanted` sets of its
  // config where JetStream allows it; otherwise the step fails naming both values (`why` says
  // which setting asked for each).
  struct stream_setting {
    const char* field;   // in the stream's config: "num_replicas", "max_consumers", "allow_msg_schedules"
    json value;
    std::string why;     // "CLOUD_AMQP_REPLICAS, or its default"
  };
  bus_status converge_stream(const std::string& step, const std::string& stream, const json& info,
                             const std::vector<stream_setting>& wanted);
  // One STREAM.UPDATE to `wanted`; the bus's refusal, or nullopt when done or nothing differs.
  std::optional<std::string> update_stream(const std::string& step, const std::string& stream, const json& info,
                                           const std::vector<stream_setting>& wanted);
  stream_setting replicas_setting() const;              // every stream's: the bucket's too
  std::vector<stream_setting> stream_settings() const;  // stream AMQP's
  std::int64_t stream_max_consumers() const;            // max_queues + adaptor_consumers
  std::string stream_max_consumers_why() const;         // which settings make it so
  bus_error consumer_limit(std::string_view step) const;  // JetStream's 10026, as the answer says it
  // The NATS account's max_consumers (a limit per stream, of its tier for the stream's replicas)
  // must leave stream AMQP its own: the server refuses a stream whose limit passes the account's.
  bus_status check_account_consumers(const std::string& step);
  bus_status start_inbox();
  bus_status reclaim_unacked();
  bus_status check_inbox_permitted();  // sign_in's: the user receives the answers to its requests
  // Blocking. Asks the server what this client's user may publish (publish_permissions.hpp);
  // reread_permissions does it on the worker pool, one at a time.
  void read_permissions();
  void reread_permissions();

  bus_result<std::shared_ptr<client>> sign_in(const credentials& who,
                                              std::chrono::steady_clock::time_point deadline) override;
  bus_status join(const client& service) override;
  bus_status may_publish(std::string_view subject) override;

  bus_result<topology_watch> watch_topology(
      boost::asio::any_io_executor ex, on_change_fn on_change,
      std::optional<std::chrono::steady_clock::time_point> deadline) override;
  bus_result<std::vector<kv_keyed_entry>> kv_snapshot(std::chrono::steady_clock::time_point deadline) override;
  bus_result<kv_entry> kv_get(const std::string& key) override;
  bus_result<std::uint64_t> kv_create(const std::string& key, const std::string& value) override;
  bus_result<std::uint64_t> kv_update(const std::string& key, const std::string& value,
                                      std::uint64_t expected_revision) override;
  bus_result<std::uint64_t> kv_put(const std::string& key, const std::string& value) override;
  bus_status kv_delete(const std::string& key) override;

  bus_status ensure_queue_consumer(const std::string& queue, const std::vector<std::string>& filters,
                                   queue_sharing sharing) override;
  bus_status delete_queue_consumer(const std::string& queue) override;
  bus_result<std::vector<std::string>> queues_to_converge() override;
  bus_result<std::map<std::string, std::vector<std::string>>> queue_consumer_filters() override;
  bus_result<bus::queue_info> queue_info(const std::string& queue) override;
  bus_result<bus::queue_info> peek_queue(const std::string& queue) override;
  bus_result<std::map<std::string, bus::queue_info>> peek_all_queues() override;
  bool publishes_uncounted() const override { return counts_ && counts_->behind(); }
  bus_status count_publishes() override { return catch_up_with_publishes("a pull"); }
  bus_status purge_subject(const std::string& subject) override;
  bus_status purge_subject_below(const std::string& subject, std::uint64_t below) override;
  bus_result<bool> use_limits_retention() override;
  bus_result<std::size_t> retarget_schedules(
      const std::function<std::optional<std::string>(std::string_view target)>& retarget) override;
  bool retains_by_limits() const override { return *limits_retention_; }
  bus_result<std::map<std::string, std::uint64_t>> stored_per_subject(const std::string& filter) override;
  bus_status purge_queue(const std::string& queue, const std::vector<std::string>& filters,
                         queue_sharing sharing) override;
  bus_result<std::uint64_t> last_sequence() override;
  bus_result<std::optional<stored_message>> next_message(std::uint64_t from,
                                                         const std::vector<std::string>& filters) override;
  bus_result<delivery> read_message(std::uint64_t seq) override;

  void publish(std::string subject, std::string amqp_props_b64, std::string body, std::string routed_as,
               boost::asio::any_io_executor ex, std::function<void(bus_status)> done) override;
  void publish_identified(std::string subject, std::string msg_id, std::string amqp_props_b64, std::string body,
                          std::string routed_as, boost::asio::any_io_executor ex,
                          std::function<void(bus_status)> done) override;
  void publish_delayed(std::string subject, std::string schedule_prefix, std::chrono::system_clock::time_point at,
                       std::string amqp_props_b64, std::string body, boost::asio::any_io_executor ex,
                       std::function<void(bus_status)> done) override;
  std::size_t publish_backlog() const override;
  std::uint64_t requests_made() const override { return requests_; }

  std::shared_ptr<puller> make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                      puller_callbacks callbacks, queue_sharing sharing, int priority) override;

  bus_status ensure_queue_stream(const std::string& queue, const stream_limits& limits) override;
  bus_status delete_queue_stream(const std::string& queue) override;
  bus_result<stream_state> queue_stream_state(const std::string& queue) override;
  void publish_to_queue_stream(const std::string& queue, std::string msg_id, std::string amqp_props_b64,
                               std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                               std::function<void(bus_status)> done) override;
  bus_result<std::string> create_stream_reader(const std::string& queue, const stream_start& start) override;
  bus_status delete_stream_reader(const std::string& queue, const std::string& reader) override;
  std::shared_ptr<puller> make_stream_puller(const std::string& queue, const std::string& reader,
                                             boost::asio::any_io_executor ex, puller_callbacks callbacks) override;
  void ack(const std::string& reply) override;
  void nak(const std::string& reply) override;
  void term(const std::string& reply) override;
  std::vector<std::string> take_settled() override;
  void return_unseen(const std::string& reply) override;

  std::shared_ptr<direct_subscription> subscribe_direct(const std::string& subject, boost::asio::any_io_executor ex,
                                                        std::function<void(delivery)> on_message) override;
  void publish_direct(const std::string& subject, std::string amqp_props_b64, std::string body,
                      boost::asio::any_io_executor ex, std::function<void(bool)> done) override;

  boost::asio::any_io_executor worker_executor() override { return workers_->get_executor(); }
  void close() override;

  // ---- used by puller_impl
  natsConnection* pull_connection() const { return control_.get(); }
  bool closed() const { return closed_; }
  // True when `queue` has NAKs the server has not answered yet: `resume` is then posted to `ex`
  // once it has none (or requeue_wait passed).
  bool hold_pulls(const std::string& queue, const boost::asio::any_io_executor& ex, std::function<void()> resume);
  // Publishes a pull request for `queue` answered on `reply`. False when it cannot be sent.
  // `pin` set: the request is in the queue's pinned group, carrying that pin ("" none yet);
  // otherwise it waits with consumer priority `priority` (a no-wait one with the highest).
  bool publish_pull(const std::string& stream, const std::string& queue, const std::string& reply,
                    std::uint32_t batch, std::chrono::milliseconds expires, const std::optional<std::string>& pin,
                    int priority);
  // A fence for `queue`'s pull requests made before it on this connection: a no-wait pull that
  // no message fits (max_bytes 1), at consumer priority `priority`, answered on this client's
  // inbox after what the server took for earlier requests was sent: 404 when no message is
  // ready, 408 when fewer than the queue's requests ask for, 409 when one is but does not fit.
  // `answered` gets the status code (503 no responders), posted to `ex`. Nullopt when it cannot
  // be sent.
  std::optional<std::uint64_t> publish_fence(const std::string& stream, const std::string& queue, int priority,
                                             const boost::asio::any_io_executor& ex,
                                             std::function<void(int code)> answered);
  void forget_fence(std::uint64_t id);  // its answer, if it still comes, is dropped
  // Publishes pull request `request` (its group added) for `queue`, answered on `reply`.
  bool send_pull(const std::string& stream, const std::string& queue, const std::string& reply, json& request);
  // Blocking. A pull request of the queue's pinned group that no message fits: it renews `pin`
  // (false when the server says the pin is no longer that puller's), or, with "", only makes
  // the server look at the queue's requests again.
  bool ask_nothing(const std::string& queue, const std::string& pin);
  // Blocking. Ends the queue's pin when it is still `pin`: the server pins the next puller that
  // asks. False when it was not (or the server did not answer).
  bool unpin(const std::string& queue, const std::string& pin);
  // Blocking. Pauses the queue's consumer (it serves no request) for a few seconds at most; true
  // when the server did. resume ends the pause.
  bool pause(const std::string& queue);
  void resume(const std::string& queue);
  // Blocking. Makes the server drop the queue's pull requests whose inbox lost interest (it
  // checks them when asked for the consumer's info). False when the server did not answer.
  bool forget_dead_requests(const std::string& queue);
  // A puller of `queue` stops with requests open: it is kept until drained, and the queue's NAKs
  // wait for it (requeue_order.hpp). Then drain_finished, once.
  void drain_started(const std::shared_ptr<puller_impl>& p);
  void drain_finished(const puller_impl& p);
  // A delivery reached this client: it is held until settled (queue_info::held_here), and
  // reported in progress meanwhile.
  void note_held(std::string_view queue, std::string reply, std::uint64_t seq);
  // A delivery of `queue` came: its count leaves out what this client returned unseen.
  void count_unseen(std::string_view queue, delivery& d);
  void forget_puller(const puller_impl* p);
  void release_msg(msg_ptr msg) { released_.release(std::move(msg)); }

 private:
  // CONSUMER.INFO of a queue, as queue_info reports it.
  bus_result<bus::queue_info> counts_of(const std::string& queue, const std::string& step);
  bus::queue_info queue_info_of(const json& info) const;
  struct pending_direct {  // a direct publish waiting to hear whether anyone received it
    boost::asio::any_io_executor ex;
    std::function<void(bool)> done;
    std::chrono::steady_clock::time_point deadline{};
  };

  // A blocking JetStream API request: `$JS.API.<api>` with a JSON body.
  bus_result<json> api(std::string_view step, const std::string& api_subject, const json& body);
  // Blocking, on the control connection. A request nobody answers at the moment ("no
  // responders"), or one answered "temporarily unavailable" (10008): a stream, the bucket or the
  // meta layer electing a leader; it is made again, 100 ms apart, within the request timeout;
  // the last status is returned, and the last attempt's answer is in `reply`, where the attempt
  // put it. A request whose subject the bus denied this client's user (on_async_error) ends
  // NATS_NOT_PERMITTED once it times out.
  natsStatus request_through_elections(const std::string& subject, natsMsg* const& reply,
                                       const std::function<natsStatus(int timeout_ms)>& attempt);
  bus_result<connection_ptr> connect(const std::string& step, const std::string& name, bool send_at_once);
  int request_timeout_ms() const;
  int remaining_ms() const;  // until options_.deadline, at least 1
  json consumer_config(const std::string& queue, const std::vector<std::string>& filters, queue_sharing sharing,
                       const char* deliver_policy) const;
  bus_result<json> create_queue_consumer(const std::string& step, const std::string& queue,
                                         const std::vector<std::string>& filters, queue_sharing sharing,
                                         const char* deliver_policy);
  // `held_then`: the queue's held deliveries as they were when it decided what to wait for.
  bus_status sync_settlements(const std::string& queue, const std::string& step, std::uint64_t* held_then = nullptr);
  // Counts follow the publishes confirmed before them (publish_counts.hpp).
  bus_status catch_up_with_publishes(const std::string& step) { return counts_ ? counts_->catch_up(step) : bus_ok(); }
  std::uint64_t held(const std::string& queue) const;
  std::map<std::string, std::uint64_t> holdings() const override { return held_.counts(); }
  // A delivery stops counting as held: settled, or its NAK is on its way (`sent` false: it is
  // still reported in progress until send_nak).
  std::string_view unhold(const std::string& reply, bool sent = true);  // the reply's queue
  void report_progress_until(std::stop_token stop);  // progress_thread_
  void report_progress();
  bus_status reclaim_queue(const json& info, const std::string& step);
  bus_status for_each_consumer(const std::string& step, const std::function<bus_status(const json&)>& each);
  bus_result<std::optional<stored_message>> next_stored(std::uint64_t from, const std::vector<std::string>& filters,
                                                        const std::string& step);
  bus_result<std::uint64_t> kv_put_expecting(const std::string& step, const std::string& key,
                                             const std::string& value, std::optional<std::uint64_t> expected);
  bus_result<json> kv_last(const std::string& step, const std::string& key);

  static void on_inbox_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure);
  static void on_inbox_complete(void* closure);
  static void on_reconnected(natsConnection*, void* closure);
  static void on_async_error(natsConnection*, natsSubscription*, natsStatus err, void* closure);
  // A publish permissions violation: publishes in flight to `subject` fail (kind denied),
  // pullers whose pull requests it was are told, and requests to it end denied (denied_since).
  void permission_denied(const std::string& subject);
  // Blocking. The server's $SYS.REQ.USER.INFO answer about this client's user.
  bus_result<std::string> user_info();
  bool denied_since(const std::string& subject, std::chrono::steady_clock::time_point since);
  std::string denied_text(const std::string& subject) const;
  bus_error denied(std::string_view step, const std::string& subject) const;  // kind denied, denied_text
  std::string user_text() const;  // "user 'alice'", for messages
  void route_inbox(natsMsg* msg);
  void complete_direct(std::uint64_t id, bool received);
  void nak_answered(std::uint64_t id);
  void fence_answered(std::uint64_t id, int code);
  void send_nak(std::uint64_t id, const std::string& reply);
  void arm_sweep();
  void sweep();
  std::string_view settle(const std::string& reply, const char* verb);  // the reply's queue, when settled
  void settle_for_good(const std::string& reply, const char* verb);     // +ACK, +TERM

  client_options options_;
  std::string stream_created_;  // when stream AMQP was created: which account's it is (join)
  std::mutex join_mutex_;
  std::vector<std::string> servers_;
  std::string url_text_;  // for messages
  connection_ptr conn_;     // buffered: publishes, settlements, their answers (connection.cpp)
  connection_ptr control_;  // sends at once: pull requests and their inboxes, API and bucket requests
  js_ptr js_;
  kv_store_ptr kv_;
  std::unique_ptr<boost::asio::thread_pool> workers_;

  std::string inbox_;  // "_INBOX.<nuid>": 29 characters
  subscription_ptr inbox_sub_;
  // The replies to publishes sent on control_: a "no responders" answer comes back only on the
  // connection that published, so that connection subscribes an inbox of its own.
  std::string at_once_inbox_;
  subscription_ptr at_once_sub_;
  std::mutex inbox_done_mutex_;
  std::condition_variable inbox_done_cv_;
  int inbox_subs_open_ = 0;  // until each subscription's callback can no longer run

  mutable std::mutex mutex_;  // guards everything below up to held_
  std::unordered_map<const puller_impl*, std::weak_ptr<puller_impl>> pullers_;
  std::map<std::uint64_t, pending_direct> directs_;
  std::map<std::uint64_t, std::pair<boost::asio::any_io_executor, std::function<void(int)>>> fences_;
  std::vector<std::weak_ptr<topology_watch::state>> watches_;
  requeue_order requeue_;  // its own lock
  std::unordered_map<const puller_impl*, std::shared_ptr<puller_impl>> draining_;  // kept until drained
  bool sweep_armed_ = false;
  std::unique_ptr<boost::asio::steady_timer> sweep_timer_;

  held_deliveries held_;  // its own lock
  unseen_returns unseen_;  // its own lock
  // Stream AMQP's, as last read or made; shared with the clients signed in through this one.
  std::shared_ptr<std::atomic<bool>> limits_retention_ = std::make_shared<std::atomic<bool>>(false);
  std::mutex settled_mutex_;
  std::set<std::string, std::less<>> settled_;  // consumers settled since take_settled, under settled_mutex_

  permission_denials denials_;  // its own lock
  publish_permissions permissions_;  // its own lock; a signed-in client's only
  // sign_in's client: its user's publish permissions are judged here too (may_publish). The
  // adaptor's own client (a vhost's too) may publish everything.
  bool judges_publishes_ = false;
  std::atomic<bool> rereading_permissions_{false};

  std::unique_ptr<publish_counts> counts_;  // made with the inbox (start_inbox), whose name it shares
  std::shared_ptr<publisher> publisher_;    // made with the inboxes (start_inbox), which it replies to

  std::shared_ptr<completion_queue> completions_ = std::make_shared<completion_queue>();
  msg_batch_release released_;  // sent messages, pub acks and deliveries

  bool retry_publishes_ = false;  // replicas_ > 1: a stream leader may fail over (client_options)
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint64_t> requests_{0};  // JetStream API and bucket requests made
  std::atomic<bool> closed_{false};
  // Last: stopped and joined first, before anything it uses goes (close() stops it earlier).
  std::jthread progress_thread_;
};

}  // namespace amqp::bus::detail
