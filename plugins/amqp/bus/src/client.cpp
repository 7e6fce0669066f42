// client::open (the mount steps in order), pipelined publishing and close.
#include <boost/asio/post.hpp>
#include <algorithm>
#include <charconv>
#include <cstring>
#include <thread>

#include "client_impl.hpp"
#include "error.hpp"
#include "watch_state.hpp"

namespace amqp::bus {

bus_result<std::shared_ptr<client>> client::open(const client_options& options) {
  auto c = std::make_shared<detail::client_impl>(options);
  using step_fn = bus_status (detail::client_impl::*)();
  for (step_fn step : {&detail::client_impl::dial, &detail::client_impl::ensure_stream,
                       &detail::client_impl::ensure_bucket, &detail::client_impl::start_inbox,
                       &detail::client_impl::reclaim_unacked}) {
    if (auto done = (c.get()->*step)(); !done) {
      c->close();
      return done.error();
    }
  }
  return std::shared_ptr<client>{std::move(c)};
}

}  // namespace amqp::bus

namespace amqp::bus::detail {

bus_result<std::shared_ptr<client>> client_impl::sign_in(const credentials& who,
                                                         std::chrono::steady_clock::time_point deadline) {
  client_options options = options_;
  options.who = who;
  options.deadline = deadline;
  options.replicas = replicas_;
  options.reclaim_unacked = false;
  options.connection_name = options_.connection_name + (who.user.empty() ? ":token" : ":" + who.user);
  auto c = std::make_shared<client_impl>(std::move(options));
  auto done = c->dial();
  if (done) done = c->start_inbox();
  if (done) done = c->check_inbox_permitted();
  if (!done) {
    c->close();
    return done.error();
  }
  return std::shared_ptr<client>{std::move(c)};
}

}  // namespace amqp::bus::detail

namespace amqp::bus {

void client::close_and_release(std::shared_ptr<client>& bus, std::chrono::steady_clock::time_point deadline) {
  if (!bus) return;
  bus->close();
  std::weak_ptr<client> gone = bus;
  bus.reset();
  while (!gone.expired() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

std::int64_t client::max_payload() const { return max_payload_; }
std::int64_t client::request_max_bytes() const {
  constexpr std::int64_t at_least = 16 << 20;
  constexpr std::int64_t delivery_overhead = 64 << 10;  // the subject and ack subject beside a message
  return std::max(at_least, max_payload_ + delivery_overhead);
}
int client::replicas() const { return replicas_; }

}  // namespace amqp::bus

namespace amqp::bus::detail {

namespace {

// Publishes sent at once, in flight at most; and the trickle a buffered burst has dwindled to
// when the next publish waits for it to drain and goes at once.
constexpr std::size_t at_once_in_flight = 16;
constexpr std::size_t trickle = 2;

constexpr std::chrono::milliseconds sweep_period{250};
constexpr std::chrono::milliseconds retry_pause{250};  // after "no responders", before the next attempt

// Moves the entries of `pending` that `due` says are over into `out`.
template <class Map, class Due, class Out>
void take_due(Map& pending, Due due, Out& out) {
  for (auto it = pending.begin(); it != pending.end();) {
    if (!due(it->second)) {
      ++it;
      continue;
    }
    out.push_back(std::move(it->second));
    it = pending.erase(it);
  }
}

}  // namespace

void client_impl::publish(std::string subject, std::string amqp_props_b64, std::string body,
                          boost::asio::any_io_executor ex, std::function<void(bus_status)> done) {
  const std::uint64_t id = next_id_++;
  pending_publish p{std::move(subject), std::move(amqp_props_b64), std::move(body), std::move(ex), std::move(done), {}, {}, {}, {}};
  std::unique_lock lock{mutex_};
  if (closed_) {
    lock.unlock();
    boost::asio::post(p.ex, [done = std::move(p.done)] { done(failure("publish", "bus client is closed")); });
    return;
  }
  // A buffered burst that has dwindled to a trickle drains, and what follows goes at once.
  if (!publishing_at_once_ && !in_flight_.empty() && in_flight_.size() <= trickle) switching_ = true;
  // FIFO: while anything waits, newcomers wait behind it, so publish order is send order.
  if (!waiting_.empty() || !may_send_publish_locked()) {
    waiting_.emplace_back(id, std::move(p));
    return;
  }
  // Sent under the lock so that two publishers cannot overtake each other between the
  // decision and the socket; natsConnection_PublishMsg appends to nats.c's buffer, or writes
  // one message at once.
  if (in_flight_.empty()) publishing_at_once_ = !requeue_.any_unanswered();
  auto [it, inserted] = in_flight_.emplace(id, std::move(p));
  if (auto sent = send_publish(id, it->second); !sent) {
    auto failed = std::move(it->second);
    in_flight_.erase(it);
    lock.unlock();
    boost::asio::post(failed.ex, [done = std::move(failed.done), err = sent.error()] { done(err); });
    return;
  }
  arm_sweep();
}

// With mutex_ held. Publishes sent at once are few at a time: a publisher that keeps more in
// flight has its next ones wait until those are answered, and then go buffered; nothing is sent
// while the connection changes. A NAK the server has not applied yet went on the buffered
// connection, and a publish after it must not overtake it (a requeued message stays ahead of
// later ones): such a publish goes buffered, behind it.
bool client_impl::may_send_publish_locked() const {
  if (switching_ || in_flight_.size() >= options_.max_publish_in_flight) return false;
  return !publishing_at_once_ || (in_flight_.size() < at_once_in_flight && !requeue_.any_unanswered());
}

std::size_t client_impl::publish_backlog() const {
  std::lock_guard lock{mutex_};
  return in_flight_.size() + waiting_.size();
}

bus_status client_impl::send_publish(std::uint64_t id, pending_publish& p) {
  // "<inbox>.a.<id>", built without an allocation (start_inbox bounds the inbox).
  p.at_once = publishing_at_once_;
  const std::string& inbox = p.at_once ? at_once_inbox_ : inbox_;
  char reply[max_inbox_size + 3 + 20 + 1];  // ".a.", the digits of a 64-bit id, NUL
  std::memcpy(reply, inbox.data(), inbox.size());
  std::memcpy(reply + inbox.size(), ".a.", 3);
  *std::to_chars(reply + inbox.size() + 3, reply + sizeof reply - 1, id).ptr = '\0';
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, p.subject.c_str(), reply, p.body.data(), static_cast<int>(p.body.size()));
  msg_ptr msg{raw};
  if (s == NATS_OK && !p.props_b64.empty()) s = natsMsgHeader_Set(msg.get(), props_header, p.props_b64.c_str());
  // The reply subject names this client and publish uniquely: the stream's id for a retry.
  if (s == NATS_OK && retry_publishes_) s = natsMsgHeader_Set(msg.get(), "Nats-Msg-Id", reply + inbox.rfind('.') + 1);
  if (s == NATS_OK) s = natsConnection_PublishMsg(p.at_once ? control_.get() : conn_.get(), msg.get());
  p.sent_at = std::chrono::steady_clock::now();
  if (p.first_sent_at == std::chrono::steady_clock::time_point{}) p.first_sent_at = p.sent_at;
  if (retry_publishes_ && s == NATS_OK)
    p.msg = std::move(msg);
  else
    released_.release(std::move(msg));
  // On the wire now (or failed): the content is not needed again (a retry sends the message
  // kept above). Freed here, on the thread that allocated it, rather than with the pub ack on a
  // nats thread.
  std::string().swap(p.body);
  std::string().swap(p.props_b64);
  if (s != NATS_OK) return nats_failure("publish to " + p.subject, s);
  return bus_ok();
}

void client_impl::complete_publish(std::uint64_t id, bus_status status) {
  pending_publish p;
  {
    std::lock_guard lock{mutex_};
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;  // already timed out or failed by close()
    p = std::move(it->second);
    in_flight_.erase(it);
    send_waiting_locked();
  }
  if (p.msg) released_.release(std::move(p.msg));
  if (status && counts_) counts_->note_confirmed();
  completions_->post(p.ex, std::move(p.done), std::move(status));
}

// With mutex_ held: move waiting publishes onto the wire while there is room.
void client_impl::send_waiting_locked() {
  // The connection changes once what is in flight is answered: a backlog goes buffered, a few
  // at once.
  if (!in_flight_.empty() && (publishing_at_once_ || switching_)) return;
  if (in_flight_.empty()) {
    switching_ = false;
    publishing_at_once_ = waiting_.size() < at_once_in_flight && !requeue_.any_unanswered();
  }
  while (!waiting_.empty() && may_send_publish_locked() && !closed_) {
    auto [id, p] = std::move(waiting_.front());
    waiting_.pop_front();
    auto [it, inserted] = in_flight_.emplace(id, std::move(p));
    if (auto sent = send_publish(id, it->second); !sent) {
      boost::asio::post(it->second.ex, [done = std::move(it->second.done), err = sent.error()] { done(err); });
      in_flight_.erase(it);
    }
  }
  arm_sweep();
}

// With mutex_ held. A pub ack that never comes (bus gone, reconnecting) must still end in
// exactly one `done`: a periodic sweep fails publishes older than publish_timeout. It also
// lifts a requeue barrier whose NAKs went unanswered too long (requeue_order.hpp).
void client_impl::arm_sweep() {
  if (sweep_armed_ || (in_flight_.empty() && !requeue_.any_open() && directs_.empty()) || !sweep_timer_)
    return;
  sweep_armed_ = true;
  sweep_timer_->expires_after(sweep_period);
  std::weak_ptr<client> weak = weak_from_this();
  sweep_timer_->async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) static_cast<client_impl*>(self.get())->sweep();
  });
}

void client_impl::sweep() {
  std::vector<pending_publish> expired;
  std::vector<requeue_order::resume_fn> released;
  std::vector<requeue_order::held_nak> unheld;
  std::vector<pending_direct> unanswered;
  {
    std::lock_guard lock{mutex_};
    sweep_armed_ = false;
    const auto now = std::chrono::steady_clock::now();
    released = requeue_.expire(now, unheld);
    // Nobody said "no responders": a subscriber was there, and did not answer in time.
    take_due(directs_, [&](const pending_direct& d) { return d.deadline <= now; }, unanswered);
    take_due(in_flight_, [&](pending_publish& p) { return !retry_or_keep_locked(p, now); }, expired);
    send_waiting_locked();
    arm_sweep();
  }
  for (const auto& [id, reply] : unheld) send_nak(id, reply);
  for (auto& d : unanswered) boost::asio::post(d.ex, [done = std::move(d.done)] { done(true); });
  for (auto& [ex, resume] : released) boost::asio::post(ex, std::move(resume));
  for (auto& p : expired) {
    auto err = failure("publish to " + p.subject, "the bus did not confirm within " +
                                                      std::to_string(options_.publish_timeout.count()) + " ms");
    err.kind = bus_errc::timeout;
    boost::asio::post(p.ex, [done = std::move(p.done), err = std::move(err)] { done(err); });
  }
}

// With mutex_ held: false when `p` is over (never answered within publish_timeout); else it
// stays in flight, sent again first when its retry is due or its latest attempt went unanswered.
bool client_impl::retry_or_keep_locked(pending_publish& p, std::chrono::steady_clock::time_point now) {
  const bool retry_due = p.retry_at != std::chrono::steady_clock::time_point{} && p.retry_at <= now;
  const auto attempt = retry_publishes_ ? options_.publish_attempt_timeout : options_.publish_timeout;
  if (!retry_due && now - p.sent_at < attempt) return true;
  if (now - p.first_sent_at >= options_.publish_timeout) return false;
  p.retry_at = {};
  p.sent_at = now;
  // On its first attempt's connection: the one its reply inbox is subscribed on.
  if (p.msg) natsConnection_PublishMsg(p.at_once ? control_.get() : conn_.get(), p.msg.get());  // a failed send is the next attempt's
  return true;
}

// nats thread: nobody serves the publish's subject at the moment (a stream without a leader).
void client_impl::retry_publish(std::uint64_t id, const std::string& why) {
  {
    std::lock_guard lock{mutex_};
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now + retry_pause - it->second.first_sent_at < options_.publish_timeout) {
      it->second.retry_at = now + retry_pause;
      arm_sweep();
      return;
    }
  }
  complete_publish(id, failure("publish", why));
}

void client_impl::fail_all_publishes(const std::string& why) {
  std::vector<pending_publish> all;
  {
    std::lock_guard lock{mutex_};
    for (auto& [id, p] : in_flight_) all.push_back(std::move(p));
    for (auto& [id, p] : waiting_) all.push_back(std::move(p));
    in_flight_.clear();
    waiting_.clear();
  }
  for (auto& p : all)
    boost::asio::post(p.ex, [done = std::move(p.done), err = failure("publish to " + p.subject, why)] { done(err); });
}

void client_impl::close() {
  if (closed_.exchange(true)) return;
  std::vector<std::shared_ptr<topology_watch::state>> watches;
  std::unordered_map<const puller_impl*, std::shared_ptr<puller_impl>> draining;  // released at the end
  {
    std::lock_guard lock{mutex_};
    draining.swap(draining_);
    for (auto& [id, d] : directs_) boost::asio::post(d.ex, [done = std::move(d.done)] { done(false); });
    directs_.clear();
    for (auto& weak : watches_)
      if (auto w = weak.lock()) watches.push_back(std::move(w));
    watches_.clear();
    // Pullers belong to their executors: closing the connection below closes their
    // subscriptions, and each learns it through its on-complete callback.
    pullers_.clear();
  }
  for (auto& w : watches) w->stop();
  if (conn_) natsConnection_FlushTimeout(conn_.get(), 1000);  // pending acks reach the server
  // Wait (bounded) until the subscriptions' callbacks can no longer run: they use `this`.
  for (auto* sub : {&inbox_sub_, &at_once_sub_}) {
    if (*sub && natsSubscription_Unsubscribe(sub->get()) != NATS_OK) {
      std::lock_guard lock{inbox_done_mutex_};
      --inbox_subs_open_;  // no callback will say it
    }
  }
  {
    std::unique_lock lock{inbox_done_mutex_};
    inbox_done_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return inbox_subs_open_ <= 0; });
  }
  fail_all_publishes("the bus client was closed before the bus confirmed");
  if (counts_) counts_->close();
  {
    std::lock_guard lock{mutex_};
    if (sweep_timer_) sweep_timer_->cancel();
    sweep_timer_.reset();
  }
  if (progress_thread_.joinable()) {
    progress_thread_.request_stop();
    progress_thread_.join();
  }
  if (control_) natsConnection_Close(control_.get());
  if (conn_) natsConnection_Close(conn_.get());
  inbox_sub_.reset();
  at_once_sub_.reset();
  kv_.reset();
  js_.reset();
  control_.reset();
  conn_.reset();
}

}  // namespace amqp::bus::detail
