// Pipelined publishes and their acks (publisher.hpp).
#include "publisher.hpp"

#include <boost/asio/post.hpp>
#include <charconv>
#include <cstring>
#include <vector>

#include "amqp/bus/client.hpp"
#include "api_reply.hpp"
#include "error.hpp"
#include "requeue_order.hpp"

namespace amqp::bus::detail {

namespace {

// Publishes sent at once, in flight at most; and the trickle a buffered burst has dwindled to
// when the next publish waits for it to drain and goes at once.
constexpr std::size_t at_once_in_flight = 16;
constexpr std::size_t trickle = 2;

constexpr std::chrono::milliseconds sweep_period{250};
constexpr std::chrono::milliseconds retry_pause{250};  // after "no responders", before the next attempt

// Two answers of a replicated stream whose leadership changes, neither named by nats.c. This
// attempt was not stored; asked again with the same Nats-Msg-Id, the stream stores it once.
// "duplicate message id is in process": the leader still replicates an earlier attempt.
constexpr int js_duplicate_in_process = 10158;
// "expected stream sequence does not match": a new leader applied the message at a sequence its
// store was not at, and dropped it (stream.go, processJetStreamMsgWithBatch).
constexpr int js_sequence_not_match = 10063;

// A stored publish is acknowledged as `{"stream":"AMQP", "seq": N}`: recognised without a
// JSON parse, which cost a tenth of the adaptor's CPU per published message. Anything else
// (an error, a duplicate, an unexpected shape) takes the full parse.
bool plain_pub_ack(natsMsg* msg) {
  const char* data = natsMsg_GetData(msg);
  if (data == nullptr) return false;
  const std::string_view body(data, static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  return body.starts_with("{\"stream\":") && body.find("\"error\"") == std::string_view::npos &&
         body.find("\"duplicate\"") == std::string_view::npos;
}

}  // namespace

publisher::publisher(settings s, route buffered, route at_once, parts p, boost::asio::any_io_executor timers)
    : settings_(s),
      buffered_(std::move(buffered)),
      at_once_(std::move(at_once)),
      parts_(std::move(p)),
      sweep_timer_(std::move(timers)) {}

void publisher::publish(std::uint64_t id, std::string subject, std::string amqp_props_b64, std::string body,
                        std::string routed_as, boost::asio::any_io_executor ex, std::function<void(bus_status)> done) {
  enqueue(id, pending{std::move(subject), std::move(amqp_props_b64), std::move(body), std::move(routed_as), {},
                      std::move(ex), std::move(done), {}, {}, {}, {}});
}

void publisher::publish_identified(std::uint64_t id, std::string subject, std::string msg_id,
                                   std::string amqp_props_b64, std::string body, std::string routed_as,
                                   boost::asio::any_io_executor ex, std::function<void(bus_status)> done) {
  pending p{std::move(subject), std::move(amqp_props_b64), std::move(body), std::move(routed_as), {},
            std::move(ex), std::move(done), {}, {}, {}, {}};
  p.msg_id = std::move(msg_id);
  enqueue(id, std::move(p));
}

void publisher::publish_scheduled(std::uint64_t id, std::string subject, schedule when, std::string amqp_props_b64,
                                  std::string body, boost::asio::any_io_executor ex,
                                  std::function<void(bus_status)> done) {
  enqueue(id, pending{std::move(subject), std::move(amqp_props_b64), std::move(body), {}, std::move(when),
                      std::move(ex), std::move(done), {}, {}, {}, {}});
}

void publisher::enqueue(std::uint64_t id, pending p) {
  std::unique_lock lock{mutex_};
  if (closed_) {
    lock.unlock();
    boost::asio::post(p.ex, [done = std::move(p.done)] { done(failure("publish", "bus client is closed")); });
    return;
  }
  // A buffered burst that has dwindled to a trickle drains, and what follows goes at once.
  if (!publishing_at_once_ && !in_flight_.empty() && in_flight_.size() <= trickle) switching_ = true;
  choose_connection_locked();
  // FIFO: while anything waits, newcomers wait behind it, so publish order is send order.
  if (!waiting_.empty() || !may_send_locked()) {
    waiting_.emplace_back(id, std::move(p));
    arm_sweep_locked();
    return;
  }
  // Sent under the lock so that two publishers cannot overtake each other between the
  // decision and the socket; natsConnection_PublishMsg appends to nats.c's buffer, or writes
  // one message at once.
  auto [it, inserted] = in_flight_.emplace(id, std::move(p));
  if (auto sent = send_locked(id, it->second); !sent) {
    auto failed = std::move(it->second);
    in_flight_.erase(it);
    lock.unlock();
    boost::asio::post(failed.ex, [done = std::move(failed.done), err = sent.error()] { done(err); });
    return;
  }
  arm_sweep_locked();
}

// With the lock held. The connection is chosen when nothing is in flight: at once unless a
// backlog waits.
void publisher::choose_connection_locked() {
  if (!in_flight_.empty()) return;
  switching_ = false;
  publishing_at_once_ = waiting_.size() < at_once_in_flight;
}

// With the lock held. Publishes sent at once are few at a time: a publisher that keeps more in
// flight has its next ones wait until those are answered, and then go buffered; nothing is sent
// while the connection changes, nor while a NAK made before is unanswered (or held back by a
// drain: requeue_order.hpp), so that a requeued message stays ahead of what is published after.
bool publisher::may_send_locked() const {
  if (switching_ || in_flight_.size() >= settings_.max_in_flight || parts_.naks->any_unanswered()) return false;
  return !publishing_at_once_ || in_flight_.size() < at_once_in_flight;
}

std::size_t publisher::backlog() const {
  std::lock_guard lock{mutex_};
  return in_flight_.size() + waiting_.size();
}

bus_status publisher::send_locked(std::uint64_t id, pending& p) {
  p.at_once = publishing_at_once_;
  const route& via = p.at_once ? at_once_ : buffered_;
  // "<inbox>.a.<id>", built without an allocation.
  char reply[max_inbox_size + 3 + 20 + 1];  // ".a.", the digits of a 64-bit id, NUL
  std::memcpy(reply, via.inbox.data(), via.inbox.size());
  std::memcpy(reply + via.inbox.size(), ".a.", 3);
  *std::to_chars(reply + via.inbox.size() + 3, reply + sizeof reply - 1, id).ptr = '\0';
  // The reply subject names this client and publish uniquely: the stream's id for a retry, and
  // a schedule's own subject (a second schedule on one subject would replace the first).
  const char* unique = reply + via.inbox.rfind('.') + 1;
  const bool scheduled = !p.when.prefix.empty();
  const std::string schedule_subject = scheduled ? p.when.prefix + "." + unique : std::string{};
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, scheduled ? schedule_subject.c_str() : p.subject.c_str(), reply, p.body.data(),
                                static_cast<int>(p.body.size()));
  msg_ptr msg{raw};
  if (s == NATS_OK && !p.props_b64.empty()) s = natsMsgHeader_Set(msg.get(), props_header, p.props_b64.c_str());
  if (s == NATS_OK && !p.routed_as.empty()) s = natsMsgHeader_Set(msg.get(), routed_as_header, p.routed_as.c_str());
  if (s == NATS_OK && scheduled) s = natsMsgHeader_Set(msg.get(), "Nats-Schedule", ("@at " + p.when.at).c_str());
  if (s == NATS_OK && scheduled) s = natsMsgHeader_Set(msg.get(), "Nats-Schedule-Target", p.subject.c_str());
  if (s == NATS_OK && !p.msg_id.empty()) {
    s = natsMsgHeader_Set(msg.get(), "Nats-Msg-Id", p.msg_id.c_str());
  } else if (s == NATS_OK && settings_.retry) {
    s = natsMsgHeader_Set(msg.get(), "Nats-Msg-Id", unique);
  }
  if (s == NATS_OK) s = parts_.send(via.conn, msg.get());
  p.sent_at = parts_.now();
  if (p.first_sent_at == clock::time_point{}) p.first_sent_at = p.sent_at;
  if (settings_.retry && s == NATS_OK)
    p.msg = std::move(msg);
  else
    parts_.released->release(std::move(msg));
  // On the wire now (or failed): the content is not needed again (a retry sends the message
  // kept above). Freed here, on the thread that allocated it, rather than with the pub ack on a
  // nats thread.
  std::string().swap(p.body);
  std::string().swap(p.props_b64);
  if (s != NATS_OK) return nats_failure("publish to " + p.subject, s);
  return bus_ok();
}

void publisher::answered(std::uint64_t id, natsMsg* msg) {
  if (natsMsg_IsNoResponders(msg)) {
    const std::string why =
        std::string{"no JetStream stream stores this subject: is stream "} + stream_name + " still there?";
    if (settings_.retry) return retry_later(id, why);
    return complete(id, failure("publish", why));
  }
  if (plain_pub_ack(msg)) return complete(id, bus_ok());
  auto ack = parse_api_reply("publish", msg);
  if (ack && ack->value("seq", std::uint64_t{0}) != 0) return complete(id, bus_ok());
  // Asked again shortly, the leader names the stored message or stores it.
  if (!ack && settings_.retry &&
      (ack.error().js_code == js_duplicate_in_process || ack.error().js_code == js_sequence_not_match))
    return retry_later(id, "the stream never stored this publish: " + ack.error().text);
  if (ack) return complete(id, failure("publish", "the stream answered without a sequence"));
  complete(id, ack.error());
}

void publisher::complete(std::uint64_t id, bus_status status) {
  pending p;
  {
    std::lock_guard lock{mutex_};
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;  // already timed out, or failed by close()
    p = std::move(it->second);
    in_flight_.erase(it);
    send_waiting_locked();
  }
  if (p.msg) parts_.released->release(std::move(p.msg));
  if (status && parts_.confirmed) parts_.confirmed();
  parts_.completions->post(p.ex, std::move(p.done), std::move(status));
}

void publisher::naks_answered() {
  std::lock_guard lock{mutex_};
  send_waiting_locked();
}

// With the lock held: waiting publishes onto the wire while there is room.
void publisher::send_waiting_locked() {
  if (closed_) return;  // what this uses may be gone
  // The connection changes once what is in flight is answered: a backlog goes buffered, a few
  // at once.
  if (!in_flight_.empty() && (publishing_at_once_ || switching_)) return;
  choose_connection_locked();
  while (!waiting_.empty() && may_send_locked()) {
    auto [id, p] = std::move(waiting_.front());
    waiting_.pop_front();
    auto [it, inserted] = in_flight_.emplace(id, std::move(p));
    if (auto sent = send_locked(id, it->second); !sent) {
      boost::asio::post(it->second.ex, [done = std::move(it->second.done), err = sent.error()] { done(err); });
      in_flight_.erase(it);
    }
  }
  arm_sweep_locked();
}

// nats thread: nobody serves the publish's subject at the moment (a stream without a leader),
// or its leader still replicates an earlier attempt.
void publisher::retry_later(std::uint64_t id, const std::string& why) {
  {
    std::lock_guard lock{mutex_};
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    const auto now = parts_.now();
    if (now + retry_pause - it->second.first_sent_at < settings_.timeout) {
      it->second.retry_at = now + retry_pause;
      arm_sweep_locked();
      return;
    }
  }
  complete(id, failure("publish", why));
}

void publisher::refuse_subject(const std::string& subject, const bus_error& why) {
  std::vector<std::uint64_t> refused;
  {
    std::lock_guard lock{mutex_};
    for (const auto& [id, p] : in_flight_)
      if (p.subject == subject) refused.push_back(id);
  }
  for (auto id : refused) complete(id, why);
}

// With the lock held. A pub ack that never comes (bus gone, reconnecting) must still end in
// exactly one `done`: a periodic sweep fails publishes older than the timeout, sends due retries
// again, and sends what waits once nothing holds it back.
void publisher::arm_sweep_locked() {
  if (sweep_armed_ || closed_ || (in_flight_.empty() && waiting_.empty())) return;
  sweep_armed_ = true;
  sweep_timer_.expires_after(sweep_period);
  sweep_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->sweep();
  });
}

void publisher::sweep() {
  std::vector<pending> expired;
  {
    std::lock_guard lock{mutex_};
    sweep_armed_ = false;
    const auto now = parts_.now();
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (retry_or_keep_locked(it->second, now)) {
        ++it;
        continue;
      }
      expired.push_back(std::move(it->second));
      it = in_flight_.erase(it);
    }
    send_waiting_locked();
    // Again while anything is open, whatever send_waiting_locked did: it arms the timer only
    // when it may send, and a publish in flight may have no answer coming (its retry is due
    // later, or it was lost), so only this sweep would ever end it.
    arm_sweep_locked();
  }
  for (auto& p : expired) {
    auto err = failure("publish to " + p.subject, "the bus did not confirm within " +
                                                      std::to_string(settings_.timeout.count()) + " ms");
    err.kind = bus_errc::timeout;
    boost::asio::post(p.ex, [done = std::move(p.done), err = std::move(err)] { done(err); });
  }
}

// With the lock held: false when `p` is over (never answered within the timeout); else it stays
// in flight, sent again first when its retry is due or its latest attempt went unanswered.
bool publisher::retry_or_keep_locked(pending& p, clock::time_point now) {
  const bool retry_due = p.retry_at != clock::time_point{} && p.retry_at <= now;
  const auto attempt = settings_.retry ? settings_.attempt_timeout : settings_.timeout;
  if (!retry_due && now - p.sent_at < attempt) return true;
  if (now - p.first_sent_at >= settings_.timeout) return false;
  p.retry_at = {};
  p.sent_at = now;
  // On its first attempt's connection: the one its reply inbox is subscribed on. A failed send
  // is the next attempt's to make.
  if (p.msg) parts_.send(p.at_once ? at_once_.conn : buffered_.conn, p.msg.get());
  return true;
}

void publisher::close(const std::string& why) {
  std::vector<pending> all;
  {
    std::lock_guard lock{mutex_};
    closed_ = true;
    for (auto& [id, p] : in_flight_) all.push_back(std::move(p));
    for (auto& [id, p] : waiting_) all.push_back(std::move(p));
    in_flight_.clear();
    waiting_.clear();
    sweep_timer_.cancel();
  }
  for (auto& p : all) {
    if (p.msg) parts_.released->release(std::move(p.msg));
    boost::asio::post(p.ex, [done = std::move(p.done), err = failure("publish to " + p.subject, why)] { done(err); });
  }
}

}  // namespace amqp::bus::detail
