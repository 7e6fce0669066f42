// Direct messages: plain bus subjects outside the stream (RabbitMQ's direct reply-to). A
// publish is a request whose answer says whether anyone received it: the subscriber's side
// confirms receipt with an empty reply, and the server answers "no responders" when nobody
// subscribes the subject (`<inbox>.r.<id>` on the client's reply subscription).
#include <boost/asio/post.hpp>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

struct direct_closure {
  boost::asio::any_io_executor ex;
  std::function<void(delivery)> on_message;
  natsConnection* confirm_on = nullptr;  // the connection receipts go back over
};

class direct_subscription_impl final : public direct_subscription {
 public:
  explicit direct_subscription_impl(subscription_ptr sub) : sub_(std::move(sub)) {}
  // Nothing is stored: what is on its way when the subscriber goes is gone with it.
  ~direct_subscription_impl() override { natsSubscription_Unsubscribe(sub_.get()); }

 private:
  subscription_ptr sub_;
};

void on_direct_msg(natsConnection*, natsSubscription*, natsMsg* raw, void* closure) {
  msg_ptr msg{raw};
  auto* c = static_cast<direct_closure*>(closure);
  arrival a = read_arrival(msg.get());
  if (!a.message) return;  // a status: nothing was sent to us
  if (const char* reply = natsMsg_GetReply(msg.get()); reply != nullptr && *reply != '\0')
    natsConnection_PublishString(c->confirm_on, reply, "");
  delivery d = std::move(*a.message);
  d.reply.clear();  // nothing to settle
  d.delivered = 1;
  boost::asio::post(c->ex, [on_message = c->on_message, d = std::move(d)]() mutable { on_message(std::move(d)); });
}

void on_direct_complete(void* closure) { delete static_cast<direct_closure*>(closure); }

}  // namespace

std::shared_ptr<direct_subscription> client_impl::subscribe_direct(const std::string& subject,
                                                                   boost::asio::any_io_executor ex,
                                                                   std::function<void(delivery)> on_message) {
  if (closed_) return nullptr;
  auto* closure = new direct_closure{std::move(ex), std::move(on_message), control_.get()};
  natsSubscription* sub = nullptr;
  if (natsConnection_Subscribe(&sub, control_.get(), subject.c_str(), &on_direct_msg, closure) != NATS_OK) {
    delete closure;
    return nullptr;
  }
  subscription_ptr owned{sub};
  if (natsSubscription_SetOnCompleteCB(sub, &on_direct_complete, closure) != NATS_OK ||
      natsSubscription_SetPendingLimits(sub, -1, -1) != NATS_OK) {
    natsSubscription_Unsubscribe(sub);
    return nullptr;
  }
  return std::make_shared<direct_subscription_impl>(std::move(owned));
}

void client_impl::publish_direct(const std::string& subject, std::string amqp_props_b64, std::string body,
                                 boost::asio::any_io_executor ex, std::function<void(bool)> done) {
  const std::uint64_t id = next_id_++;
  {
    std::lock_guard lock{mutex_};
    if (closed_) {
      boost::asio::post(ex, [done = std::move(done)] { done(false); });
      return;
    }
    directs_.emplace(id, pending_direct{ex, std::move(done), std::chrono::steady_clock::now() + options_.request_timeout});
    arm_sweep();
  }
  const std::string reply = inbox_ + ".r." + std::to_string(id);
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject.c_str(), reply.c_str(), body.data(), static_cast<int>(body.size()));
  msg_ptr msg{raw};
  if (s == NATS_OK && !amqp_props_b64.empty()) s = natsMsgHeader_Set(msg.get(), props_header, amqp_props_b64.c_str());
  // Over the connection that subscribes the reply inbox: the server says "no responders" only
  // to the connection that published.
  if (s == NATS_OK) s = natsConnection_PublishMsg(conn_.get(), msg.get());
  if (s != NATS_OK) complete_direct(id, false);
}

// Any thread: the publish's answer, or its absence (received = false only when known).
void client_impl::complete_direct(std::uint64_t id, bool received) {
  pending_direct p;
  {
    std::lock_guard lock{mutex_};
    auto it = directs_.find(id);
    if (it == directs_.end()) return;
    p = std::move(it->second);
    directs_.erase(it);
  }
  boost::asio::post(p.ex, [done = std::move(p.done), received] { done(received); });
}

}  // namespace amqp::bus::detail
