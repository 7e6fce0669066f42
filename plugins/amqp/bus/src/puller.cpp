// A queue's pull loop: pull requests (`$JS.API.CONSUMER.MSG.NEXT.AMQP.<queue>`) name the
// puller's own inbox; replies are posted to the owner's executor, never handled on nats threads.
#include <boost/asio/post.hpp>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

std::string header(natsMsg* msg, const char* key) {
  const char* value = nullptr;
  if (natsMsgHeader_Get(msg, key, &value) != NATS_OK || value == nullptr) return {};
  return value;
}

pull_event status_event(int code, std::string description) {
  pull_status st = pull_status::other;
  if (code == 404) st = pull_status::no_messages;
  if (code == 408) st = pull_status::request_expired;
  if (code == 409) {
    const bool limits = description.find("xceeded") != std::string::npos;
    st = limits ? pull_status::exceeded_limits : pull_status::consumer_gone;
  }
  if (code == 503) st = pull_status::consumer_gone;  // no responders: the consumer does not exist
  return pull_event{st, code, std::move(description)};
}

}  // namespace

puller_impl::puller_impl(std::weak_ptr<client_impl> owner, std::string queue, boost::asio::any_io_executor ex,
                         std::function<void(delivery)> on_delivery, std::function<void(pull_event)> on_event)
    : owner_(std::move(owner)),
      queue_(std::move(queue)),
      ex_(std::move(ex)),
      callbacks_(std::make_shared<callbacks>(callbacks{std::move(on_delivery), std::move(on_event)})) {}

puller_impl::~puller_impl() { stop(); }

bus_status puller_impl::start(natsConnection* conn) {
  const std::string step = "pull subscription for queue " + queue_;
  natsInbox* raw_inbox = nullptr;
  if (natsStatus s = natsInbox_Create(&raw_inbox); s != NATS_OK) return nats_failure(step, s);
  inbox_ptr inbox{raw_inbox};
  inbox_ = inbox.get();
  auto* closure = new holder{weak_from_this(), owner_};
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_Subscribe(&sub, conn, inbox_.c_str(), &puller_impl::on_msg, closure);
  if (s != NATS_OK) {
    delete closure;
    return nats_failure(step, s);
  }
  sub_.reset(sub);
  // From here on the closure is freed by on_complete, after the last callback.
  s = natsSubscription_SetOnCompleteCB(sub, &puller_impl::on_complete, closure);
  // Deliveries are bounded by the batches this puller asks for; do not drop them as "slow".
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub, -1, -1);
  if (s != NATS_OK) return nats_failure(step, s);
  return bus_ok();
}

std::shared_ptr<puller_impl::callbacks> puller_impl::current() const {
  std::lock_guard lock{mutex_};
  return callbacks_;
}

void puller_impl::request(std::uint32_t batch, std::chrono::milliseconds expires) {
  if (stopped_) return;
  auto owner = owner_.lock();
  if (!sub_ || !owner || !owner->send_pull(shared_from_this(), batch, expires)) report_unsent();
}

void puller_impl::report_unsent() {
  post_event(pull_event{pull_status::other, 0, "the pull request could not be sent: bus client closed or disconnected"});
}

void puller_impl::stop() {
  if (stopped_.exchange(true)) return;
  {
    std::lock_guard lock{mutex_};
    callbacks_.reset();
  }
  // Drain rather than unsubscribe: messages already on their way still reach handle(),
  // which hands them straight back (nak) instead of leaving them for the ack wait.
  if (sub_) natsSubscription_Drain(sub_.get());
  if (auto owner = owner_.lock()) owner->forget_puller(this);
}

void puller_impl::on_msg(natsConnection*, natsSubscription*, natsMsg* raw, void* closure) {
  msg_ptr msg{raw};
  auto* h = static_cast<holder*>(closure);
  auto owner = h->owner.lock();
  if (auto p = h->puller.lock()) {
    p->handle(msg.get());
  } else if (const char* reply = natsMsg_GetReply(msg.get()); owner && reply != nullptr) {
    owner->nak(reply);
  }
  if (owner) owner->release_msg(std::move(msg));
}

void puller_impl::on_complete(void* closure) { delete static_cast<holder*>(closure); }

void puller_impl::handle(natsMsg* msg) {
  const std::string status = header(msg, "Status");
  if (!status.empty() && natsMsg_GetDataLength(msg) == 0) {
    const int code = std::atoi(status.c_str());
    if (code != 100) post_event(status_event(code, header(msg, "Description")));  // 100: heartbeat
    return;
  }
  delivery d;
  const char* reply = natsMsg_GetReply(msg);
  d.reply = reply == nullptr ? "" : reply;
  if (stopped_) {
    // Stopped while a request was outstanding: give the message back at once rather than
    // leave it invisible until the five-minute ack wait runs out.
    if (auto owner = owner_.lock()) owner->nak(d.reply);
    return;
  }
  parse_ack_subject(d.reply, d);
  d.subject = natsMsg_GetSubject(msg);
  if (auto props = base64_decode(header(msg, props_header))) d.amqp_props = std::move(*props);
  d.body.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  post_delivery(std::move(d));
}

void puller_impl::post_delivery(delivery d) {
  std::weak_ptr<callbacks> weak = current();
  boost::asio::post(ex_, [weak, owner = owner_, d = std::move(d)]() mutable {
    if (auto cb = weak.lock(); cb && cb->on_delivery) {
      cb->on_delivery(std::move(d));
      return;
    }
    // Stopped between arrival and now: hand it back.
    if (auto o = owner.lock()) o->nak(d.reply);
  });
}

void puller_impl::post_event(pull_event e) {
  std::weak_ptr<callbacks> weak = current();
  boost::asio::post(ex_, [weak, e = std::move(e)]() mutable {
    if (auto cb = weak.lock(); cb && cb->on_event) cb->on_event(std::move(e));
  });
}

std::shared_ptr<puller> client_impl::make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                                 std::function<void(delivery)> on_delivery,
                                                 std::function<void(pull_event)> on_event) {
  auto self = std::static_pointer_cast<client_impl>(shared_from_this());
  auto p = std::make_shared<puller_impl>(self, queue, std::move(ex), std::move(on_delivery), std::move(on_event));
  if (closed_) return p;  // request() then reports the closed client through on_event
  if (auto started = p->start(conn_.get()); !started) {
    p->post_event(pull_event{pull_status::other, 0, started.error().text});
    return p;
  }
  std::lock_guard lock{mutex_};
  pullers_.emplace(p.get(), p);
  return p;
}

void client_impl::forget_puller(const puller_impl* p) {
  std::lock_guard lock{mutex_};
  pullers_.erase(p);
}

bool client_impl::send_pull(const std::shared_ptr<puller_impl>& p, std::uint32_t batch,
                            std::chrono::milliseconds expires) {
  if (closed_) return false;
  {
    std::lock_guard lock{mutex_};
    if (auto b = barriers_.find(p->queue()); b != barriers_.end()) {
      b->second.pulls.push_back(deferred_pull{p, batch, expires});
      return true;
    }
  }
  return publish_pull(*p, batch, expires);
}

bool client_impl::publish_pull(const puller_impl& p, std::uint32_t batch, std::chrono::milliseconds expires) {
  json request = {{"batch", std::max<std::uint32_t>(1, batch)}};
  if (expires.count() <= 0)
    request["no_wait"] = true;  // basic.get: answer at once, 404 when empty
  else
    request["expires"] = std::chrono::duration_cast<std::chrono::nanoseconds>(expires).count();
  const std::string body = request.dump();
  const std::string subject = std::string{"$JS.API.CONSUMER.MSG.NEXT."} + stream_name + "." + p.queue();
  return natsConnection_PublishRequest(conn_.get(), subject.c_str(), p.inbox().c_str(), body.data(),
                                       static_cast<int>(body.size())) == NATS_OK;
}

}  // namespace amqp::bus::detail
