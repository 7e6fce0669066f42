#pragma once
// The client behind amqp/bus/client.hpp. One nats connection; one wildcard reply
// subscription (`<inbox>.>`) that carries every pull response and every publish ack, so the
// number of nats threads does not grow with queues or consumers.
#include <utility>  // before Asio: see platform-notes

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "amqp/bus/client.hpp"
#include "completion_queue.hpp"
#include "nats_handle.hpp"

namespace amqp::bus::detail {

using json = nlohmann::json;

class puller_impl;
class client_impl;

extern const char* const no_jetstream_text;

// A JetStream API reply: either the parsed JSON or the API's own error.
bus_result<json> parse_api_reply(std::string_view step, natsMsg* reply);
// The delivery fields carried by a `$JS.ACK...` reply subject (v1 and v2 forms).
bool parse_ack_subject(std::string_view reply, delivery& out);

// One queue's pull loop (see amqp/bus/client.hpp). Holds the client weakly; the client holds
// it weakly too, so neither keeps the other alive.
class puller_impl final : public puller, public std::enable_shared_from_this<puller_impl> {
 public:
  puller_impl(std::weak_ptr<client_impl> owner, std::string queue,
              boost::asio::any_io_executor ex, std::function<void(delivery)> on_delivery,
              std::function<void(pull_event)> on_event);
  // Subscribes the puller's own inbox (nats.c's shared delivery pool, not a thread).
  bus_status start(natsConnection* conn);
  ~puller_impl() override;
  void request(std::uint32_t batch, std::chrono::milliseconds expires) override;
  void stop() override;
  const std::string& queue() const override { return queue_; }
  const std::string& inbox() const { return inbox_; }
  bool stopped() const { return stopped_; }

  // Called on nats threads: post to the executor, nothing else.
  void post_delivery(delivery d);
  void post_event(pull_event e);
  void report_unsent();  // the request it asked for could not be sent

 private:
  struct holder {  // the subscription's closure; freed by its on-complete callback
    std::weak_ptr<puller_impl> puller;
    std::weak_ptr<client_impl> owner;
  };
  static void on_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
  void handle(natsMsg* msg);

  struct callbacks {
    std::function<void(delivery)> on_delivery;
    std::function<void(pull_event)> on_event;
  };
  std::shared_ptr<callbacks> current() const;

  std::weak_ptr<client_impl> owner_;
  std::string queue_;
  std::string inbox_;
  subscription_ptr sub_;
  boost::asio::any_io_executor ex_;
  mutable std::mutex mutex_;
  std::shared_ptr<callbacks> callbacks_;  // reset by stop(): releases what they captured
  std::atomic<bool> stopped_{false};
};

class client_impl final : public client {
 public:
  explicit client_impl(client_options options);
  ~client_impl() override;

  // Mount steps, run once by client::open in this order.
  bus_status dial();
  bus_status ensure_stream();
  bus_status ensure_bucket();
  bus_status detect_strategy();
  bus_status reclaim_unacked();
  bus_status ensure_queue_consumer_once(const std::string& queue, const consumer_filters& filters,
                                        const std::string& step);
  bus_status replace_queue_consumer(const std::string& queue, const json& old_info, json config,
                                    const std::string& step);
  bus_status finish_interrupted_replacement(const std::string& hold, const std::string& step);
  bus_status verify_filters(const std::string& queue, const consumer_filters& filters, const std::string& step,
                            const json* created = nullptr);
  bus_status delete_consumer(const std::string& name, const std::string& step);
  bus_status start_inbox();

  bus_result<topology_watch> watch_topology(
      boost::asio::any_io_executor ex, on_change_fn on_change,
      std::optional<std::chrono::steady_clock::time_point> deadline) override;
  bus_result<std::vector<kv_keyed_entry>> kv_snapshot(std::chrono::steady_clock::time_point deadline) override;
  bus_result<kv_entry> kv_get(const std::string& key) override;
  bus_result<std::uint64_t> kv_create(const std::string& key, const std::string& value) override;
  bus_result<std::uint64_t> kv_update(const std::string& key, const std::string& value,
                                      std::uint64_t expected_revision) override;
  bus_status kv_delete(const std::string& key) override;

  bus_status ensure_queue_consumer(const std::string& queue,
                                   const consumer_filters& filters) override;
  bus_status delete_queue_consumer(const std::string& queue) override;
  bus_result<bus::queue_info> queue_info(const std::string& queue) override;
  bus_result<std::uint64_t> purge_queue(const std::string& queue,
                                        const consumer_filters& filters) override;

  void publish(std::string subject, std::string amqp_props_b64, std::string body,
               boost::asio::any_io_executor ex, std::function<void(bus_status)> done) override;
  std::size_t publish_backlog() const override;

  std::shared_ptr<puller> make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                      std::function<void(delivery)> on_delivery,
                                      std::function<void(pull_event)> on_event) override;
  void ack(const std::string& reply) override;
  void nak(const std::string& reply) override;
  void term(const std::string& reply) override;

  boost::asio::any_io_executor worker_executor() override { return workers_->get_executor(); }
  void close() override;

  // Used by puller_impl: sends the pull now, or once the queue's NAKs are answered (inbox.cpp).
  // False when it cannot be sent at all.
  bool send_pull(const std::shared_ptr<puller_impl>& p, std::uint32_t batch, std::chrono::milliseconds expires);
  void forget_puller(const puller_impl* p);
  void release_msg(msg_ptr msg) { released_.release(std::move(msg)); }

 private:
  struct pending_publish {
    std::string subject;
    std::string props_b64;
    std::string body;
    boost::asio::any_io_executor ex;
    std::function<void(bus_status)> done;
    std::chrono::steady_clock::time_point sent_at{};
  };
  // A queue's pulls held behind its unanswered NAKs (inbox.cpp, "requeue before pull").
  struct deferred_pull {
    std::weak_ptr<puller_impl> puller;
    std::uint32_t batch = 0;
    std::chrono::milliseconds expires{};
  };
  struct requeue_barrier {
    std::size_t unanswered = 0;
    std::chrono::steady_clock::time_point since{};
    std::vector<deferred_pull> pulls;
  };

  // A blocking JetStream API request: `$JS.API.<api>` with a JSON body.
  bus_result<json> api(std::string_view step, const std::string& api_subject, const json& body);
  int request_timeout_ms() const;
  int remaining_ms() const;  // until options_.deadline, at least 1
  json consumer_config(const std::string& queue, const consumer_filters& filters) const;
  bus_status check_filters(const std::string& queue, const consumer_filters& filters,
                           const json& returned) const;
  bus_result<std::uint64_t> kv_put_expecting(const std::string& step, const std::string& key,
                                             const std::string& value, std::uint64_t expected);
  bus_result<json> kv_last(const std::string& step, const std::string& key);

  static void on_inbox_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure);
  static void on_inbox_complete(void* closure);
  static void on_reconnected(natsConnection*, void* closure);
  void route_inbox(natsMsg* msg);
  void complete_publish(std::uint64_t id, bus_status status);
  void send_waiting_locked();
  bus_status send_publish(std::uint64_t id, pending_publish& p);
  bool publish_pull(const puller_impl& p, std::uint32_t batch, std::chrono::milliseconds expires);
  void nak_answered(std::uint64_t id);
  void send_deferred(std::vector<deferred_pull> pulls);
  std::vector<deferred_pull> expire_barriers_locked(std::chrono::steady_clock::time_point now);
  void arm_sweep();
  void sweep();
  void fail_all_publishes(const std::string& why);
  void settle(const std::string& reply, const char* verb);

  client_options options_;
  std::vector<std::string> servers_;
  std::string url_text_;  // for messages
  connection_ptr conn_;
  js_ptr js_;
  kv_store_ptr kv_;
  std::unique_ptr<boost::asio::thread_pool> workers_;

  static constexpr std::size_t max_inbox_size = 64;
  std::string inbox_;  // "_INBOX.<nuid>": 29 characters
  subscription_ptr inbox_sub_;
  std::mutex inbox_done_mutex_;
  std::condition_variable inbox_done_cv_;
  bool inbox_done_ = false;

  mutable std::mutex mutex_;  // guards everything below
  std::unordered_map<const puller_impl*, std::weak_ptr<puller_impl>> pullers_;
  std::map<std::uint64_t, pending_publish> in_flight_;  // id order = send order
  std::deque<std::pair<std::uint64_t, pending_publish>> waiting_;
  std::vector<std::weak_ptr<topology_watch::state>> watches_;
  std::unordered_map<std::uint64_t, std::string> naks_;        // unanswered NAK id → queue
  std::unordered_map<std::string, requeue_barrier> barriers_;  // by queue, while it has any
  bool sweep_armed_ = false;
  std::unique_ptr<boost::asio::steady_timer> sweep_timer_;

  std::shared_ptr<completion_queue> completions_ = std::make_shared<completion_queue>();
  msg_batch_release released_;  // sent messages, pub acks and deliveries

  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<bool> closed_{false};
};

}  // namespace amqp::bus::detail
