#include "publish/due_router.hpp"

#include <chrono>

#include "amqp/bus/base64.hpp"
#include "broker_state.hpp"
#include "publish/delayed_delivery.hpp"
#include "publish/route.hpp"

namespace amqp::broker {
namespace {

// Due messages being routed at once: asked for again once half are free.
constexpr std::uint32_t route_window = 128;
constexpr std::chrono::milliseconds route_expires{30000};
constexpr std::chrono::milliseconds retry_delay{1000};

}  // namespace

due_router::due_router(std::weak_ptr<broker> owner, std::shared_ptr<bus::client> bus, boost::asio::any_io_executor ex)
    : owner_(std::move(owner)), bus_(std::move(bus)), ex_(ex), retry_(ex) {}

due_router::~due_router() { hand_back_refused(); }

void due_router::start() {
  std::weak_ptr<due_router> weak = weak_from_this();
  bus::puller_callbacks callbacks;
  callbacks.on_delivery = [weak, bus = bus_](bus::delivery d) {
    if (auto self = weak.lock()) return self->on_delivery(std::move(d));
    bus->nak(d.reply);  // the router is gone: back to the consumer, for another replica's
  };
  callbacks.on_event = [weak](bus::pull_event e) {
    if (auto self = weak.lock()) self->on_event(e);
  };
  puller_ = bus_->make_puller(bus::due_consumer, ex_, std::move(callbacks));
  pump();
}

void due_router::stop() {
  if (stopped_) return;
  stopped_ = true;
  retry_.cancel();
  hand_back_refused();
  if (puller_) puller_->stop();
}

void due_router::pump() {
  if (stopped_ || !puller_ || retry_armed_) return;
  const std::uint32_t busy = puller_->asked() + routing_;
  if (busy > route_window / 2) return;
  puller_->request(route_window - busy, route_expires);
}

void due_router::on_delivery(bus::delivery d) {
  auto owner = owner_.lock();
  if (stopped_ || !owner) return bus_->nak(d.reply);
  const auto address = due_address(d.subject);
  if (!address) {
    // Only the schedules' targets are stored under the due root: this one no publish spelled.
    owner->warn("a due delayed message on '" + d.subject + "' names no exchange and routing key: dropped");
    bus_->ack(d.reply);
    return pump();
  }
  auto plan = plan_publish(*owner, address->exchange, address->routing_key, {}, d.amqp_props);
  ++routing_;
  auto done = [weak = weak_from_this(), bus = bus_, reply = d.reply,
               expiries = std::move(plan.expiries)](bus::bus_status outcome) {
    if (auto self = weak.lock()) return self->routed(reply, expiries, outcome);
    if (outcome) bus->ack(reply);
    else bus->nak(reply);
  };
  publish_copies(*bus_, *bus_, ex_, {plan.queues, plan.streams, plan.routed_as},
                 d.amqp_props.empty() ? std::string{} : bus::base64_encode(d.amqp_props), std::move(d.body),
                 std::move(done), "due." + std::to_string(d.stream_seq) + ".");
}

void due_router::routed(const std::string& reply, const std::vector<expiry_look>& expiries,
                        const bus::bus_status& outcome) {
  --routing_;
  auto owner = owner_.lock();
  if (outcome) {
    if (owner) owner->expect_expiries(expiries);
    bus_->ack(reply);
    return pump();
  }
  // Handed back a second later, not at once: a NAK'ed message comes straight back to an open request.
  if (stopped_) return bus_->nak(reply);
  refused_.push_back(reply);
  if (owner && !retry_armed_)
    owner->warn("routing a delayed message that is due: " + outcome.error().text + " (routed again in a second)");
  retry_soon();
}

void due_router::on_event(const bus::pull_event& e) {
  switch (e.status) {
    case bus::pull_status::no_messages:
    case bus::pull_status::request_expired:
    case bus::pull_status::lost:
    case bus::pull_status::bytes_reached:
      return pump();
    default:
      retry_soon();
  }
}

// After a refusal or a bus error: asked again in a second, once however many came meanwhile.
void due_router::retry_soon() {
  if (retry_armed_ || stopped_) return;
  retry_armed_ = true;
  retry_.expires_after(retry_delay);
  retry_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    self->retry_armed_ = false;
    self->hand_back_refused();
    if (!ec) self->pump();
  });
}

void due_router::hand_back_refused() {
  for (const auto& reply : refused_) bus_->nak(reply);
  refused_.clear();
}

}  // namespace amqp::broker
