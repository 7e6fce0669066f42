// Pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`: a queue's on AMQP, a stream
// queue reader's on the queue's own stream) answered on the puller's own inbox.
// Replies are posted to the owner's executor, never handled on nats threads.
//
// JetStream has no call that cancels a pull request: a request ends when it is filled, when it
// expires (408), or when the server finds no interest in its reply subject. So ending a
// consumer's requests early (stop, or a bus connection that came back) drains its inbox's
// subscription: the server processes the UNSUB, what it sent before that still arrives, and what
// it would send after it goes straight back to the queue (nats-server's didNotDeliver), counted
// as delivered and ahead of later requeues. So a stop drains only once a fence (stop()) says
// that what the server took for the requests has been sent.
#include <boost/asio/post.hpp>
#include <algorithm>
#include <charconv>
#include <limits>
#include <utility>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// Longer than the server's 408 takes to arrive on a loaded machine: a request still open this
// long after its expiry is taken for lost (the inbox is replaced, which ends it for certain).
constexpr std::chrono::milliseconds answer_margin{3000};
// A drain waits at most this long for the server to confirm the UNSUB.
constexpr int drain_timeout_ms = 5000;
// A stop waits at most this long for its requests to take what is ready before it drains anyway.
constexpr std::chrono::milliseconds fence_wait{2000};
// How soon a stop asks again whether messages are ready for its requests.
constexpr std::chrono::milliseconds fence_again{10};

pull_event status_event(int code, std::string description) {
  pull_status st = pull_status::other;
  if (code == 404) st = pull_status::no_messages;
  if (code == 408) st = pull_status::request_expired;
  if (code == 409) {
    const bool limits = description.find("xceeded") != std::string::npos;
    st = limits ? pull_status::exceeded_limits : pull_status::consumer_gone;
    if (description == "Message Size Exceeds MaxBytes") st = pull_status::bytes_reached;
  }
  if (code == 503) st = pull_status::consumer_gone;  // no responders: the consumer does not exist
  if (code == 423) st = pull_status::pin_lost;
  return pull_event{st, code, std::move(description), 0};
}

}  // namespace

std::string header(natsMsg* msg, const char* key) {
  const char* value = nullptr;
  if (natsMsgHeader_Get(msg, key, &value) != NATS_OK || value == nullptr) return {};
  return value;
}

void read_content(natsMsg* msg, delivery& d) {
  d.subject = natsMsg_GetSubject(msg);
  d.routed_as = header(msg, routed_as_header);
  if (auto props = base64_decode(header(msg, props_header))) d.amqp_props = std::move(*props);
  d.body.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
}

arrival read_arrival(natsMsg* msg) {
  arrival a;
  if (natsMsg_IsNoResponders(msg)) {
    a.status = status_event(503, "no responders: the queue's consumer does not exist");
    return a;
  }
  const std::string status = header(msg, "Status");
  if (!status.empty() && natsMsg_GetDataLength(msg) == 0) {
    a.status = status_event(std::atoi(status.c_str()), header(msg, "Description"));
    a.filled = a.status.code == 409 && a.status.description == "Batch Completed";
    std::uint32_t pending = 0;
    const std::string left = header(msg, "Nats-Pending-Messages");
    if (auto [end, ec] = std::from_chars(left.data(), left.data() + left.size(), pending);
        !left.empty() && ec == std::errc{} && end == left.data() + left.size())
      a.unfilled = pending;
    return a;
  }
  a.pin = header(msg, "Nats-Pin-Id");
  delivery d;
  const char* reply = natsMsg_GetReply(msg);
  d.reply = reply == nullptr ? "" : reply;
  parse_ack_subject(d.reply, d);
  read_content(msg, d);
  // The server counts subject, ack subject, headers and data; the headers are mostly Amqp-Props.
  constexpr std::size_t other_headers = 256;
  a.bytes = d.subject.size() + d.reply.size() + d.amqp_props.size() * 4 / 3 + d.body.size() + other_headers;
  a.message = std::move(d);
  return a;
}

// ---- puller_impl ----------------------------------------------------------------------------

puller_impl::puller_impl(std::weak_ptr<client_impl> owner, std::string queue, boost::asio::any_io_executor ex,
                         puller_callbacks callbacks, queue_sharing sharing, int priority)
    : owner_(std::move(owner)),
      queue_(std::move(queue)),
      ex_(ex),
      callbacks_(std::move(callbacks)),
      watchdog_(ex),
      fence_timer_(ex),
      sharing_(sharing),
      priority_(priority),
      pin_(sharing == queue_sharing::single_active ? std::make_shared<pin_lease>(owner_, queue_, ex) : nullptr) {}

puller_impl::puller_impl(std::weak_ptr<client_impl> owner, std::string stream, std::string reader,
                         boost::asio::any_io_executor ex, puller_callbacks callbacks)
    : owner_(std::move(owner)),
      queue_(std::move(reader)),
      ex_(ex),
      callbacks_(std::move(callbacks)),
      watchdog_(ex),
      fence_timer_(ex),
      sharing_(queue_sharing::all_consumers),
      priority_(lowest_consumer_priority),
      stream_(std::move(stream)),
      settles_(false) {}

// Its subscription is drained, not dropped: what the server already sent still reaches the
// closure, which hands it back to the queue.
puller_impl::~puller_impl() { drain_current(); }

bus_status puller_impl::start() { return subscribe(); }

bus_status puller_impl::subscribe() {
  const std::string step = "pull subscription for queue " + queue_;
  auto owner = owner_.lock();
  if (!owner || owner->closed()) return failure(step, "the bus client is closed");
  natsInbox* raw_inbox = nullptr;
  if (natsStatus s = natsInbox_Create(&raw_inbox); s != NATS_OK) return nats_failure(step, s);
  inbox_ptr inbox{raw_inbox};
  const std::uint32_t generation = generation_ + 1;
  auto box = std::make_shared<inbox_box>(inbox_box{weak_from_this(), owner_, queue_, generation, nullptr, settles_});
  auto* closure = new std::shared_ptr<inbox_box>(box);
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_Subscribe(&sub, owner->pull_connection(), inbox.get(), &puller_impl::on_msg, closure);
  if (s != NATS_OK) {
    delete closure;
    return nats_failure(step, s);
  }
  box->sub.reset(sub);
  // From here on the closure is freed by on_complete.
  s = natsSubscription_SetOnCompleteCB(sub, &puller_impl::on_complete, closure);
  // Deliveries are bounded by the requests this puller makes; do not drop them as "slow".
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub, -1, -1);
  if (s != NATS_OK) {
    natsSubscription_Unsubscribe(sub);
    return nats_failure(step, s);
  }
  inbox_ = inbox.get();
  current_ = std::move(box);
  generation_ = generation;
  counts_[generation];
  return bus_ok();
}

void puller_impl::request(std::uint32_t batch, std::chrono::milliseconds expires) {
  if (stopping_ || batch == 0) return;
  if (expires.count() <= 0) batch = 1;  // a no-wait request is for one message (basic.get)
  asked_ += batch;
  wanted_.push_back(wanted{batch, expires});
  send_wanted();
}

void puller_impl::send_wanted() {
  if (waiting_for_naks_ || stopping_) return;
  auto owner = owner_.lock();
  auto resume = [weak = weak_from_this()] {
    if (auto self = weak.lock()) {
      self->waiting_for_naks_ = false;
      self->send_wanted();
    }
  };
  if (owner && owner->hold_pulls(queue_, ex_, std::move(resume))) {
    waiting_for_naks_ = true;
    return;
  }
  while (!wanted_.empty()) {
    const wanted w = wanted_.front();
    wanted_.pop_front();
    send(w);
  }
}

void puller_impl::send(const wanted& w) {
  auto owner = owner_.lock();
  if (!current_ && owner) (void)subscribe();  // a rotation that could not subscribe: try again
  std::optional<std::string> pin;
  if (pin_) pin = pin_->pin();
  const bool sent =
      owner && current_ && owner->publish_pull(stream_, queue_, inbox_, w.batch, w.expires, pin, priority_);
  if (!sent) {
    // Reported from the executor, not from inside request(): the caller is mid-decision.
    asked_ -= w.batch;
    boost::asio::post(ex_, [self = shared_from_this(), n = w.batch] {
      if (self->callbacks_.on_event)
        self->callbacks_.on_event(
            pull_event{pull_status::other, 0, "the pull request could not be sent: bus client closed or disconnected", n});
    });
    return;
  }
  if (pin_) pin_->carried();
  auto& count = counts_[generation_];
  count.asked += w.batch;
  count.answer_by = std::max(count.answer_by, std::chrono::steady_clock::now() + w.expires + answer_margin);
  if (w.expires.count() <= 0) no_wait_open_ = true;
  arm_watchdog();
}

void puller_impl::on_msg(natsConnection*, natsSubscription*, natsMsg* raw, void* closure) {
  msg_ptr msg{raw};
  const auto* box = static_cast<std::shared_ptr<inbox_box>*>(closure)->get();
  auto owner = box->owner.lock();
  arrival a = read_arrival(msg.get());
  a.first = a.message && a.message->delivered == 1;
  if (a.message && owner && box->settles) {
    owner->note_held(box->queue, a.message->reply, a.message->stream_seq);
    owner->count_unseen(box->queue, *a.message);
  }
  if (auto p = box->puller.lock()) {
    const auto ex = p->ex_;
    boost::asio::post(ex, [p = std::move(p), generation = box->generation, a = std::move(a)]() mutable {
      p->handle(generation, std::move(a));
    });
  } else if (a.message && owner && box->settles) {
    owner->return_unseen(a.message->reply);  // nobody to give it to: back to the queue at once
  }
  if (owner) owner->release_msg(std::move(msg));
}

void puller_impl::on_complete(void* closure) {
  std::unique_ptr<std::shared_ptr<inbox_box>> box{static_cast<std::shared_ptr<inbox_box>*>(closure)};
  if (auto p = (*box)->puller.lock()) {
    const auto ex = p->ex_;
    boost::asio::post(ex, [p = std::move(p), generation = (*box)->generation] { p->drained(generation); });
  }
}

void puller_impl::handle(std::uint32_t generation, arrival a) {
  auto count = counts_.find(generation);
  if (a.message) {
    if (count == counts_.end() || count->second.asked == 0 || stopped_) {
      // More than was asked for (never expected): it must not exceed the caller's credit.
      if (auto owner = owner_.lock(); owner && settles_) owner->return_unseen(a.message->reply);
      return;
    }
    --count->second.asked;
    --asked_;
    // A stop's requests are filled: nothing more can come, the fence is not needed any more.
    const bool filled = fencing_ && generation == generation_ && count->second.asked == 0;
    note_size(a.bytes);
    if (!a.pin.empty() && pin_) pin_->take(a.pin, no_wait_open_);
    no_wait_open_ = false;
    if (a.first) mark_if_sent_again(*a.message);
    if (callbacks_.on_delivery) {
      callbacks_.on_delivery(std::move(*a.message));
    } else if (auto owner = owner_.lock(); owner && settles_) {
      owner->return_unseen(a.message->reply);
    }
    if (filled && fencing_) end_requests();
    return;
  }
  // A heartbeat, a byte-bounded request that was filled (as a silent fill), or a drained inbox's.
  if (a.status.code == 100 || a.filled || count == counts_.end()) return;
  if (a.status.status == pull_status::pin_lost && pin_) pin_->lost();
  std::uint32_t unfilled = 0;
  if (a.unfilled) {
    unfilled = std::min(*a.unfilled, count->second.asked);
  } else if (no_wait_open_ && (a.status.code == 404 || a.status.code == 408 || a.status.code == 503)) {
    // The no-wait request, empty-handed (503: it reached no consumer at all).
    unfilled = std::min<std::uint32_t>(1, count->second.asked);
    no_wait_open_ = false;
  } else if (generation == generation_) {
    // Ended without saying how much of it went unfilled: the inbox is replaced, and what its
    // requests did not bring is reported once it is drained.
    rotate();
  }
  unfill(count->second, unfilled);
  a.status.unfilled = unfilled;
  if (callbacks_.on_event) callbacks_.on_event(std::move(a.status));
}

// A puller's first deliveries come in stream order. One at or below an earlier one is sent again:
// by a consumer's new leader that never heard of the first sending (replicated after it), or by
// an old leader that was paused and fills its requests before it learns it was replaced. The
// client may have it already, so it goes out redelivered, as RabbitMQ marks what it may have
// delivered before.
void puller_impl::mark_if_sent_again(delivery& d) {
  if (d.stream_seq > highest_first_) {
    highest_first_ = d.stream_seq;
    return;
  }
  d.delivered = std::max<std::uint64_t>(d.delivered, 2);
}

std::uint32_t puller_impl::window_in_bytes() const {
  const std::size_t largest = std::max(largest_now_, largest_before_);
  auto owner = owner_.lock();
  if (largest == 0 || !owner) return std::numeric_limits<std::uint32_t>::max();
  const auto budget = static_cast<std::size_t>(owner->request_max_bytes() / 2);
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(budget / largest, 1, std::numeric_limits<std::uint32_t>::max()));
}

// Lately, not ever: one large message must not narrow the window for good.
void puller_impl::note_size(std::size_t bytes) {
  constexpr std::uint32_t recent_run = 256;
  largest_now_ = std::max(largest_now_, bytes);
  if (++run_ < recent_run) return;
  largest_before_ = std::exchange(largest_now_, 0);
  run_ = 0;
}

void puller_impl::unfill(inbox_count& count, std::uint32_t n) {
  count.asked -= n;
  asked_ -= n;
}

void puller_impl::drained(std::uint32_t generation) {
  if (generation == generation_) current_.reset();  // closed under us (the connection closed)
  auto count = counts_.find(generation);
  if (count == counts_.end()) return;
  const std::uint32_t unfilled = count->second.asked;
  unfill(count->second, unfilled);
  counts_.erase(count);
  // The server can no longer answer that inbox's requests: what they did not bring, they never will.
  if (unfilled > 0 && callbacks_.on_event)
    callbacks_.on_event(pull_event{pull_status::lost, 0, "the requests' inbox was closed (bus reconnected, "
                                                          "the server ended them, or no answer in time)", unfilled});
  if (unfilled > 0) dead_requests_ = true;
  if (!stopping_ || current_ || !counts_.empty()) return;
  auto owner = owner_.lock();
  if (!dead_requests_ || !owner) return finish_stop();
  // The server keeps a request whose inbox lost interest until it next looks at its waiting
  // requests; a NAK that wakes it before then finds only dead ones, and the first requeued
  // message goes behind the others. Asking for the consumer's info makes it look now.
  owner->run_blocking(
      ex_, [owner, queue = queue_] { return owner->forget_dead_requests(queue); },
      [self = shared_from_this()](bool) { self->finish_stop(); });
}

// Ends the current inbox's requests. With nothing asked through it, nothing more can come:
// unsubscribed at once. Otherwise drained: unsubscribed on the server, kept open here until the
// server confirmed, so what it sent before arrives; drained() follows either way.
void puller_impl::drain_current() {
  if (!current_) return;
  auto box = std::move(current_);
  auto count = counts_.find(box->generation);
  const bool asked = count != counts_.end() && count->second.asked > 0;
  if (!asked || natsSubscription_DrainTimeout(box->sub.get(), drain_timeout_ms) != NATS_OK) {
    // Not drainable (the connection is closing): its on-complete callback follows the close.
    natsSubscription_Unsubscribe(box->sub.get());
  }
}

void puller_impl::rotate() {
  if (stopping_ || !current_) return;
  drain_current();
  (void)subscribe();  // failing, the next request tries again (send)
  send_wanted();
}

void puller_impl::post_denied(std::string text) {
  boost::asio::post(ex_, [weak = weak_from_this(), text = std::move(text)]() mutable {
    auto self = weak.lock();
    if (!self || self->stopped_ || !self->callbacks_.on_event) return;
    self->callbacks_.on_event(pull_event{pull_status::denied, 403, std::move(text), 0});
  });
}

void puller_impl::post_rotate() {
  boost::asio::post(ex_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->rotate();
  });
}

void puller_impl::arm_watchdog() {
  auto count = counts_.find(generation_);
  if (watchdog_armed_ || count == counts_.end() || count->second.asked == 0) return;
  watchdog_armed_ = true;
  watchdog_.expires_at(count->second.answer_by);
  watchdog_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    self->watchdog_armed_ = false;
    if (!ec) self->on_watchdog();
  });
}

// Every request of the current inbox has expired on the server by now, so each has ended,
// filled or with a 408; messages still counted as asked mean an answer was lost (the server
// restarted, or a cluster node went): the inbox is replaced, which settles the count.
void puller_impl::on_watchdog() {
  auto count = counts_.find(generation_);
  if (count == counts_.end() || count->second.asked == 0) return;
  if (std::chrono::steady_clock::now() >= count->second.answer_by) {
    rotate();
  } else {
    arm_watchdog();  // a newer request moved the deadline
  }
}

void puller_impl::stop() {
  if (stopping_) return;
  stopping_ = true;
  for (const auto& w : wanted_) asked_ -= w.batch;
  wanted_.clear();
  watchdog_.cancel();
  if (pin_) pin_->stop();
  const auto open = counts_.find(generation_);
  const bool open_requests = current_ && open != counts_.end() && open->second.asked > 0;
  if ((settles_ && open_requests) || (pin_ && pin_->held())) {
    // What its requests still bring, or NAKs the queue gets meanwhile, must not meet the
    // requests the server still lists: the queue's NAKs wait for the drain (client_impl). A
    // pinned puller's wait for the hand-over as well (pin_lease::hand_over).
    if (auto owner = owner_.lock()) {
      gated_ = true;
      owner->drain_started(shared_from_this());
    }
  }
  // The server takes a message for a request before it sends it; one it sends once the inbox
  // lost interest goes back to the queue by itself, ahead of what this client requeues next and
  // counted as delivered. So while messages are ready that the requests may take, the inbox is
  // not drained (fence()). A pinned puller has no fence: one without its pin would take it.
  fence_until_ = std::chrono::steady_clock::now() + fence_wait;
  if (settles_ && open_requests && !pin_ && fence()) return;
  end_requests();
}

void puller_impl::end_requests() {
  fencing_ = false;
  fence_timer_.cancel();
  if (fence_) {
    if (auto owner = owner_.lock()) owner->forget_fence(*fence_);
    fence_.reset();
  }
  drain_current();
  if (!current_ && counts_.empty()) {
    boost::asio::post(ex_, [self = shared_from_this()] { self->finish_stop(); });
  }
}

// Asks the server whether messages are ready that the open requests may still take: a fence
// (client_impl::publish_fence), answered after what the server took before it was sent.
bool puller_impl::fence() {
  auto owner = owner_.lock();
  if (!owner) return false;
  fence_ = owner->publish_fence(stream_, queue_, priority_, ex_, [weak = weak_from_this()](int code) {
    if (auto self = weak.lock()) self->fenced(code);
  });
  if (!fence_) return false;
  fencing_ = true;
  fence_timer_.expires_at(fence_until_);
  fence_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (auto self = weak.lock(); self && !ec && self->fencing_) self->end_requests();  // no answer in time
  });
  return true;
}

// 404: nothing is ready, so nothing more is on its way to the requests. 408 (fewer ready than
// the queue's requests ask for) or 409 (one ready that the fence does not fit): they may take
// more, so the fence is asked again shortly, unless they are filled first (handle).
void puller_impl::fenced(int code) {
  if (!fencing_ || stopped_) return;
  fence_.reset();
  fence_timer_.cancel();
  if ((code != 408 && code != 409) || std::chrono::steady_clock::now() >= fence_until_) return end_requests();
  fence_timer_.expires_after(fence_again);
  fence_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    if (auto self = weak.lock(); self && !ec && self->fencing_ && !self->fence()) self->end_requests();
  });
}

void puller_impl::finish_stop() {
  if (stopped_) return;
  stopped_ = true;
  auto keep = shared_from_this();  // the client may hold the last reference (drain_started)
  auto on_stopped = std::move(callbacks_.on_stopped);
  callbacks_ = {};  // releases what the callbacks captured
  if (auto owner = owner_.lock()) {
    owner->forget_puller(this);
    if (pin_ && pin_->held()) {
      pin_->hand_over(owner, [self = shared_from_this(), owner] {
        if (self->gated_) owner->drain_finished(*self);  // its NAKs go now
      });
    } else if (gated_) {
      owner->drain_finished(*this);
    }
  }
  if (on_stopped) on_stopped();
}

// ---- client_impl: pulls ---------------------------------------------------------------------

std::shared_ptr<puller> client_impl::make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                                 puller_callbacks callbacks, queue_sharing sharing, int priority) {
  auto self = std::static_pointer_cast<client_impl>(shared_from_this());
  priority = std::clamp(priority, lowest_consumer_priority, highest_consumer_priority);  // the broker refuses others
  auto p = std::make_shared<puller_impl>(self, queue, std::move(ex), std::move(callbacks), sharing, priority);
  // Without a subscription every request ends `lost` (send), which the owner retries later.
  if (closed_ || !p->start().ok()) return p;
  std::lock_guard lock{mutex_};
  pullers_.emplace(p.get(), p);
  return p;
}

void client_impl::forget_puller(const puller_impl* p) {
  std::lock_guard lock{mutex_};
  pullers_.erase(p);
}

bool client_impl::publish_pull(const std::string& stream, const std::string& queue, const std::string& reply,
                               std::uint32_t batch, std::chrono::milliseconds expires,
                               const std::optional<std::string>& pin, int priority) {
  if (closed_) return false;
  json request = {{"batch", std::max<std::uint32_t>(1, batch)}};
  if (pin) {
    if (!pin->empty()) request["id"] = *pin;
  } else {
    // A one-message pull wants the queue's head, which a consumer with room would have been
    // given already; it waits at the first level, with the highest priority's requests.
    request["priority"] = bus_level(expires.count() <= 0 ? highest_consumer_priority : priority);
  }
  if (expires.count() <= 0) {
    request["no_wait"] = true;  // basic.get: answer at once, 404 when empty
    if (pin) request["expires"] = std::chrono::nanoseconds(pinned_no_wait_expires).count();
  } else {
    request["expires"] = std::chrono::duration_cast<std::chrono::nanoseconds>(expires).count();
    // A request that meets its bound exactly ends without a word from the server; the watchdog
    // settles it after its expiry. Consumers keep to half the bound (window_in_bytes), so only a
    // message far larger than the ones before it can get a request there.
    request["max_bytes"] = request_max_bytes();
  }
  return send_pull(stream, queue, reply, request);
}

// The group on every request: a consumer with a priority group refuses a request without it
// (400 "Priority Group missing"); one without a group, made before consumer priorities and not
// converged yet, ignores group and level.
bool client_impl::send_pull(const std::string& stream, const std::string& queue, const std::string& reply,
                            json& request) {
  request["group"] = priority_group;
  const std::string body = request.dump();
  const std::string subject = "$JS.API.CONSUMER.MSG.NEXT." + stream + "." + queue;
  return natsConnection_PublishRequest(control_.get(), subject.c_str(), reply.c_str(), body.data(),
                                       static_cast<int>(body.size())) == NATS_OK;
}

std::optional<std::uint64_t> client_impl::publish_fence(const std::string& stream, const std::string& queue,
                                                        int priority, const boost::asio::any_io_executor& ex,
                                                        std::function<void(int code)> answered) {
  if (closed_ || at_once_inbox_.empty()) return std::nullopt;
  const std::uint64_t id = next_id_++;
  {
    std::lock_guard lock{mutex_};
    fences_.emplace(id, std::pair{ex, std::move(answered)});
  }
  json request = {{"batch", 1}, {"no_wait", true}, {"max_bytes", 1}, {"priority", bus_level(priority)}};
  if (send_pull(stream, queue, at_once_inbox_ + ".f." + std::to_string(id), request)) return id;
  forget_fence(id);
  return std::nullopt;
}

void client_impl::forget_fence(std::uint64_t id) {
  std::lock_guard lock{mutex_};
  fences_.erase(id);
}

// Any thread.
void client_impl::fence_answered(std::uint64_t id, int code) {
  std::pair<boost::asio::any_io_executor, std::function<void(int)>> fence;
  {
    std::lock_guard lock{mutex_};
    auto it = fences_.find(id);
    if (it == fences_.end()) return;
    fence = std::move(it->second);
    fences_.erase(it);
  }
  boost::asio::post(fence.first, [answered = std::move(fence.second), code] { answered(code); });
}

void client_impl::note_held(std::string_view queue, std::string reply, std::uint64_t seq) {
  held_.add(queue, std::move(reply), seq);
}

std::uint64_t client_impl::held(const std::string& queue) const {
  return held_.count(queue);
}

// A delivery held longer than its consumer's ack wait would be sent to another consumer while
// its holder still has it; a progress report (+WPI, replicated to the consumer's followers)
// restarts the wait. Reported every sixth of the shortest ack wait any replica may give a queue
// (CLOUD_AMQP_ACK_WAIT, 6 s at least), whatever this one's: an election's worth of margin. On a
// thread of its own, so that blocking requests on the worker pool cannot hold a report back.
void client_impl::report_progress_until(std::stop_token stop) {
  constexpr std::chrono::seconds progress_period{1};
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock{mutex};
  while (!wake.wait_for(lock, stop, progress_period, [] { return false; }) && !stop.stop_requested())
    report_progress();
}

void client_impl::report_progress() {
  const std::vector<std::string> due = held_.due();
  // Sent after a settlement of the same delivery (another thread's), a report changes nothing.
  for (const auto& reply : due) {
    if (closed_) return;
    natsConnection_PublishString(conn_.get(), reply.c_str(), "+WPI");
  }
}

}  // namespace amqp::bus::detail
