// The pin of a single_active queue's puller, and the pinned group's requests behind it.
#include "pin_lease.hpp"

#include <ctime>

#include "client_impl.hpp"

namespace amqp::bus::detail {

namespace {

// The longest a hand-over pauses its queue, should it not resume it.
constexpr std::chrono::seconds pause_for{5};
// A pinned puller renews its pin this often when none of its requests carried it meanwhile.
constexpr std::chrono::milliseconds pin_renewal_interval = pin_timeout / 5;

}  // namespace

pin_lease::pin_lease(std::weak_ptr<client_impl> owner, std::string queue, boost::asio::any_io_executor ex)
    : owner_(std::move(owner)), queue_(std::move(queue)), ex_(ex), renewal_(std::move(ex)) {}

void pin_lease::take(const std::string& pin, bool for_one_message) {
  if (pin == pin_) return;
  pin_ = pin;
  renewed_ = std::chrono::steady_clock::now();
  if (for_one_message) return give_back();
  arm();
}

void pin_lease::carried() {
  if (held()) renewed_ = std::chrono::steady_clock::now();
}

void pin_lease::lost() { pin_.clear(); }

void pin_lease::stop() {
  stopping_ = true;
  renewal_.cancel();
}

void pin_lease::arm() {
  if (armed_ || pin_.empty() || stopping_) return;
  armed_ = true;
  renewal_.expires_after(pin_renewal_interval);
  renewal_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    self->armed_ = false;
    if (!ec) self->renew();
  });
}

void pin_lease::renew() {
  auto owner = owner_.lock();
  if (pin_.empty() || stopping_ || !owner) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - renewed_ < pin_renewal_interval) return arm();  // a request carried it lately
  renewed_ = now;
  owner->run_blocking(
      ex_, [owner, queue = queue_, pin = pin_] { return owner->ask_nothing(queue, pin); },
      [weak = weak_from_this(), pin = pin_](bool held) {
        auto self = weak.lock();
        if (!self) return;
        if (!held && self->pin_ == pin) self->pin_.clear();
        self->arm();
      });
}

void pin_lease::give_back() {
  auto owner = owner_.lock();
  if (pin_.empty() || !owner) return;
  owner->run_blocking(
      ex_, [owner, queue = queue_, pin = std::move(pin_)] { return owner->unpin(queue, pin); }, [](bool) {});
  pin_.clear();
  renewal_.cancel();
}

void pin_lease::hand_over(const std::shared_ptr<client_impl>& owner, std::function<void()> after_pause) {
  const std::string pin = std::move(pin_);
  pin_.clear();
  stop();
  owner->run_blocking(
      ex_, [owner, queue = queue_] { return owner->pause(queue); },
      [owner, queue = queue_, ex = ex_, pin, after_pause = std::move(after_pause)](bool paused) {
        after_pause();
        // Held by the client until the NAKs are answered: it holds the client weakly.
        auto finish = [weak = std::weak_ptr<client_impl>(owner), queue, pin, paused, ex] {
          auto client = weak.lock();
          if (!client) return;
          client->run_blocking(
              ex,
              [client, queue, pin, paused] {
                client->unpin(queue, pin);
                if (paused) client->resume(queue);
                return true;
              },
              [](bool) {});
        };
        if (!owner->hold_pulls(queue, ex, finish)) finish();
      });
}

// ---- client_impl: the pinned group's requests ----------------------------------------------

bool client_impl::ask_nothing(const std::string& queue, const std::string& pin) {
  if (closed_) return false;
  // max_bytes 1: no message fits, so the server ends the request once it meets one, serving none.
  // A renewal is answered at once (no_wait); a nudge must be listed to wake the server, which
  // no_wait is not while other requests wait.
  json request{{"batch", 1}, {"max_bytes", 1}, {"group", priority_group}};
  if (pin.empty()) {
    request["expires"] = std::chrono::nanoseconds(pinned_no_wait_expires).count();
  } else {
    request["no_wait"] = true;
    request["id"] = pin;
  }
  const std::string body = request.dump();
  const std::string subject = std::string{"$JS.API.CONSUMER.MSG.NEXT."} + stream_name + "." + queue;
  natsMsg* raw = nullptr;
  const natsStatus s = natsConnection_Request(&raw, control_.get(), subject.c_str(), body.data(),
                                              static_cast<int>(body.size()), request_timeout_ms());
  msg_ptr reply{raw};
  if (s != NATS_OK) return true;  // no answer says nothing of the pin: the next renewal asks again
  return header(reply.get(), "Status") != "423";
}

bool client_impl::unpin(const std::string& queue, const std::string& pin) {
  const std::string step = "give back the pin of queue " + queue;
  // UNPIN ends whichever pin is current: only this puller's may go.
  auto info = api(step, std::string{"CONSUMER.INFO."} + stream_name + "." + queue, nullptr);
  if (!info) return false;
  const auto groups = info->value("priority_groups", json::array());
  const bool ours = std::any_of(groups.begin(), groups.end(), [&](const json& g) {
    return g.is_object() && g.value("pinned_client_id", std::string{}) == pin;
  });
  if (!ours) return false;
  return api(step, std::string{"CONSUMER.UNPIN."} + stream_name + "." + queue, json{{"group", priority_group}}).ok();
}

bool client_impl::pause(const std::string& queue) {
  const auto until = std::chrono::system_clock::now() + pause_for;
  const std::time_t seconds = std::chrono::system_clock::to_time_t(until);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return api("pause queue " + queue, std::string{"CONSUMER.PAUSE."} + stream_name + "." + queue,
             json{{"pause_until", text}})
      .ok();
}

void client_impl::resume(const std::string& queue) {
  (void)api("resume queue " + queue, std::string{"CONSUMER.PAUSE."} + stream_name + "." + queue, json::object());
  // A resume does not wake the consumer; a request does (the next puller's is served then).
  (void)ask_nothing(queue, "");
}

}  // namespace amqp::bus::detail
