// client::open (the mount steps in order), the core's sweep, and close.
#include <boost/asio/post.hpp>
#include <algorithm>
#include <cstdio>
#include <ctime>
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
  c->limits_retention_ = limits_retention_;
  auto done = c->dial();
  if (done) done = c->start_inbox();
  if (done) done = c->check_inbox_permitted();
  if (!done) {
    c->close();
    return done.error();
  }
  // What its user may not publish is refused at each publish (may_publish), before its workers
  // and callbacks can read this.
  c->judges_publishes_ = true;
  c->read_permissions();
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

constexpr std::chrono::milliseconds sweep_period{250};

}  // namespace

void client_impl::publish(std::string subject, std::string amqp_props_b64, std::string body, std::string routed_as,
                          boost::asio::any_io_executor ex, std::function<void(bus_status)> done) {
  if (closed_ || !publisher_) {
    boost::asio::post(ex, [done = std::move(done)] { done(failure("publish", "bus client is closed")); });
    return;
  }
  publisher_->publish(next_id_++, std::move(subject), std::move(amqp_props_b64), std::move(body), std::move(routed_as),
                      std::move(ex), std::move(done));
}

void client_impl::publish_identified(std::string subject, std::string msg_id, std::string amqp_props_b64,
                                     std::string body, std::string routed_as, boost::asio::any_io_executor ex,
                                     std::function<void(bus_status)> done) {
  if (closed_ || !publisher_) {
    boost::asio::post(ex, [done = std::move(done)] { done(failure("publish", "bus client is closed")); });
    return;
  }
  publisher_->publish_identified(next_id_++, std::move(subject), std::move(msg_id), std::move(amqp_props_b64),
                                 std::move(body), std::move(routed_as), std::move(ex), std::move(done));
}

std::string rfc3339(std::chrono::system_clock::time_point at) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
  const auto seconds = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(ns % 1'000'000'000));
  return text;
}

void client_impl::publish_delayed(std::string subject, std::string schedule_prefix,
                                  std::chrono::system_clock::time_point at, std::string amqp_props_b64,
                                  std::string body, boost::asio::any_io_executor ex,
                                  std::function<void(bus_status)> done) {
  if (closed_ || !publisher_) {
    boost::asio::post(ex, [done = std::move(done)] { done(failure("publish", "bus client is closed")); });
    return;
  }
  publisher_->publish_scheduled(next_id_++, std::move(subject), {std::move(schedule_prefix), rfc3339(at)},
                                std::move(amqp_props_b64), std::move(body), std::move(ex), std::move(done));
}

std::size_t client_impl::publish_backlog() const { return publisher_ ? publisher_->backlog() : 0; }

// With mutex_ held. A NAK barrier whose NAKs went unanswered too long, a drain gate held too
// long (requeue_order.hpp) and a direct publish nobody answered are lifted by a periodic sweep.
void client_impl::arm_sweep() {
  if (sweep_armed_ || (!requeue_.any_open() && directs_.empty()) || !sweep_timer_) return;
  sweep_armed_ = true;
  sweep_timer_->expires_after(sweep_period);
  std::weak_ptr<client> weak = weak_from_this();
  sweep_timer_->async_wait([weak](const boost::system::error_code& ec) {
    if (ec) return;
    if (auto self = weak.lock()) static_cast<client_impl*>(self.get())->sweep();
  });
}

void client_impl::sweep() {
  std::vector<requeue_order::resume_fn> released;
  std::vector<requeue_order::held_nak> unheld;
  std::vector<pending_direct> unanswered;
  {
    std::lock_guard lock{mutex_};
    sweep_armed_ = false;
    const auto now = std::chrono::steady_clock::now();
    released = requeue_.expire(now, unheld);
    // Nobody said "no responders": a subscriber was there, and did not answer in time.
    for (auto it = directs_.begin(); it != directs_.end();) {
      if (it->second.deadline > now) {
        ++it;
        continue;
      }
      unanswered.push_back(std::move(it->second));
      it = directs_.erase(it);
    }
    arm_sweep();
  }
  for (const auto& [id, reply] : unheld) send_nak(id, reply);
  for (auto& d : unanswered) boost::asio::post(d.ex, [done = std::move(d.done)] { done(true); });
  for (auto& [ex, resume] : released) boost::asio::post(ex, std::move(resume));
  if (publisher_) publisher_->naks_answered();  // a lifted barrier may hold publishes back no longer
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
  if (publisher_) publisher_->close("the bus client was closed before the bus confirmed");
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
