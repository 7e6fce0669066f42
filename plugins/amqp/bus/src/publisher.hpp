#pragma once
// Pipelined publishes to stream AMQP and their acks.
//
// A publish goes out with a reply subject `<inbox>.a.<id>`; the stream's PubAck comes back on
// the client's reply subscription (inbox.cpp, route_inbox) and ends it through `answered`.
// Publishes stay in send order: two connections are two queues on the server, which may store
// them out of order, so all publishes in flight are on one connection. A lone publish goes on
// the one that sends at once, so it does not wait for nats.c's flusher (a millisecond); a
// backlog goes on the buffered one, and the connection changes only when nothing is in flight.
// A publish must not overtake a NAK made before it (a requeued message stays ahead of what is
// published later; the server applies NAKs and stores publishes on separate goroutines), so
// publishes wait while a NAK is unanswered.
//
// On a replicated stream (retry) a publish is sent again, with the same Nats-Msg-Id, when its
// stream has no leader for a moment ("no responders"), when an attempt goes unanswered, or when
// the leader still replicates an earlier attempt; the stream stores it once. Every publish ends
// in exactly one `done`: confirmed, refused, or failed after the publish timeout.
//
// Thread-safe; `done` runs on the executor the publish named, never under the lock.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "amqp/bus/result.hpp"
#include "completion_queue.hpp"
#include "nats_handle.hpp"

namespace amqp::bus::detail {

class requeue_order;

class publisher : public std::enable_shared_from_this<publisher> {
 public:
  using clock = std::chrono::steady_clock;
  // The longest reply inbox a route may have: "<inbox>.a.<id>" is built in a fixed buffer.
  static constexpr std::size_t max_inbox_size = 64;
  // A connection and the reply inbox subscribed on it.
  struct route {
    natsConnection* conn = nullptr;
    std::string inbox;
  };
  struct settings {
    std::size_t max_in_flight = 4096;
    std::chrono::milliseconds timeout{30000};          // no confirm by then: failed
    std::chrono::milliseconds attempt_timeout{2000};   // an unanswered attempt is sent again (retry)
    bool retry = false;                                // a replicated stream: its leader may fail over
  };
  struct parts {
    std::shared_ptr<completion_queue> completions;
    msg_batch_release* released = nullptr;  // outlives this
    const requeue_order* naks = nullptr;    // outlives this: unanswered NAKs hold publishes back
    std::function<void()> confirmed;        // a publish was stored (publish_counts)
    // What puts a message on a connection's wire, and what time it is: nats.c's and the steady
    // clock's, unless a test injects its own.
    std::function<natsStatus(natsConnection*, natsMsg*)> send = natsConnection_PublishMsg;
    std::function<clock::time_point()> now = [] { return clock::now(); };
  };

  // `timers` runs the timeout sweep; `buffered` and `at_once` live until close().
  publisher(settings s, route buffered, route at_once, parts p, boost::asio::any_io_executor timers);

  void publish(std::uint64_t id, std::string subject, std::string amqp_props_b64, std::string body,
               std::string routed_as, boost::asio::any_io_executor ex, std::function<void(bus_status)> done);
  // A publish carrying its own Nats-Msg-Id (client::publish_identified): the stream stores
  // it once within its duplicate window, however often it is sent, by this or another process.
  void publish_identified(std::uint64_t id, std::string subject, std::string msg_id, std::string amqp_props_b64,
                          std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                          std::function<void(bus_status)> done);
  // A message schedule (client::publish_delayed): stored under `prefix` + "." + the publish's own
  // id, delivered to `subject` at `at` (RFC 3339, UTC).
  struct schedule {
    std::string prefix;
    std::string at;
  };
  void publish_scheduled(std::uint64_t id, std::string subject, schedule when, std::string amqp_props_b64,
                         std::string body, boost::asio::any_io_executor ex, std::function<void(bus_status)> done);
  // nats thread: the answer to publish `id` on its reply subject.
  void answered(std::uint64_t id, natsMsg* msg);
  // A NAK was answered: publishes it held back may go.
  void naks_answered();
  // The bus refused this client's publishes to `subject`: those in flight end with `why`.
  void refuse_subject(const std::string& subject, const bus_error& why);
  std::size_t backlog() const;
  // Every publish still open ends with `why`; later ones fail at once.
  void close(const std::string& why);
  // Fails what waited longer than the timeout for its answer, sends due retries and what may go
  // now. Its timer runs it every 250 ms while anything is open.
  void sweep();

 private:
  struct pending {
    std::string subject;
    std::string props_b64;
    std::string body;
    std::string routed_as;
    schedule when;  // prefix empty: stored on `subject` now
    boost::asio::any_io_executor ex;
    std::function<void(bus_status)> done;
    clock::time_point first_sent_at{};
    clock::time_point sent_at{};   // the latest attempt
    clock::time_point retry_at{};  // set: send again then
    msg_ptr msg;                   // kept for a retry while retries are on
    bool at_once = false;          // sent on at_once_.conn, answered on its inbox
    std::string msg_id{};          // set: the Nats-Msg-Id the caller chose
  };

  void complete(std::uint64_t id, bus_status status);
  void retry_later(std::uint64_t id, const std::string& why);
  bool may_send_locked() const;
  void enqueue(std::uint64_t id, pending p);
  void choose_connection_locked();
  void send_waiting_locked();
  bus_status send_locked(std::uint64_t id, pending& p);
  bool retry_or_keep_locked(pending& p, clock::time_point now);
  void arm_sweep_locked();

  const settings settings_;
  const route buffered_;
  const route at_once_;
  parts parts_;
  mutable std::mutex mutex_;
  std::map<std::uint64_t, pending> in_flight_;  // id order = send order
  std::deque<std::pair<std::uint64_t, pending>> waiting_;
  bool publishing_at_once_ = false;
  bool switching_ = false;  // nothing is sent until what is in flight is answered
  bool closed_ = false;
  bool sweep_armed_ = false;
  boost::asio::steady_timer sweep_timer_;
};

}  // namespace amqp::bus::detail
