#include "deliver/stream_feeder.hpp"

#include <algorithm>

#include "amqp/bus/base64.hpp"
#include "amqp/routing/names.hpp"
#include "broker_state.hpp"

namespace amqp::broker {
namespace {

// Messages on their way from stream AMQP to the queue's stream at once: asked for once half are
// free, so that copies stream without a round trip between batches.
constexpr std::uint32_t feed_window = 256;
// A request that ends empty after this long makes the feeder look whether anything is left.
constexpr std::chrono::milliseconds feed_expires{1000};
constexpr std::chrono::milliseconds feed_retry_delay{1000};

}  // namespace

stream_feeder::stream_feeder(std::weak_ptr<broker> owner, std::shared_ptr<bus::client> bus, std::string queue,
                             boost::asio::any_io_executor ex, std::function<void()> finished)
    : owner_(std::move(owner)),
      bus_(std::move(bus)),
      queue_(std::move(queue)),
      ex_(ex),
      finished_(std::move(finished)),
      retry_(ex) {}

void stream_feeder::start() {
  std::weak_ptr<stream_feeder> weak = weak_from_this();
  bus::puller_callbacks callbacks;
  callbacks.on_delivery = [weak, bus = bus_](bus::delivery d) {
    if (auto self = weak.lock()) return self->on_delivery(std::move(d));
    bus->nak(d.reply);  // the feeder is gone: back to the queue, for the next one
  };
  callbacks.on_event = [weak](bus::pull_event e) {
    if (auto self = weak.lock()) self->on_event(e);
  };
  puller_ = bus_->make_puller(routing::consumer_name(queue_), ex_, std::move(callbacks),
                              bus::queue_sharing::single_active);
  pump();
}

void stream_feeder::stop() {
  stopped_ = true;
  retry_.cancel();
  if (puller_) puller_->stop();
}

void stream_feeder::pump() {
  if (stopped_ || !puller_ || retry_armed_) return;
  const std::uint32_t busy = puller_->asked() + copying_;
  if (busy > feed_window / 2) return;
  puller_->request(feed_window - busy, feed_expires);
}

void stream_feeder::on_delivery(bus::delivery d) {
  auto owner = owner_.lock();
  if (stopped_ || !owner) {
    bus_->nak(d.reply);
    return;
  }
  ++copying_;
  std::weak_ptr<stream_feeder> weak = weak_from_this();
  auto done = [weak, bus = bus_, reply = d.reply](bus::bus_status outcome) {
    if (auto self = weak.lock()) return self->copied(reply, outcome);
    if (outcome) bus->ack(reply);
    else bus->nak(reply);
  };
  bus_->publish_to_queue_stream(routing::consumer_name(queue_), std::to_string(d.stream_seq),
                                d.amqp_props.empty() ? std::string{} : bus::base64_encode(d.amqp_props),
                                std::move(d.body), d.shown_subject(), ex_, std::move(done));
}

void stream_feeder::copied(const std::string& reply, const bus::bus_status& outcome) {
  --copying_;
  if (outcome) {
    bus_->ack(reply);
    return pump();
  }
  // Not stored (the queue's stream is gone or the bus is away): back to the queue, tried again.
  bus_->nak(reply);
  if (auto owner = owner_.lock(); owner && !stopped_ && !retry_armed_)
    owner->warn("copying a message into stream queue '" + queue_ + "': " + outcome.error().text +
                " (tried again in a second)");
  retry_soon();
}

void stream_feeder::on_event(const bus::pull_event& e) {
  switch (e.status) {
    case bus::pull_status::request_expired:
      if (copying_ == 0 && puller_ && puller_->asked() == 0) return look_whether_done(false);
      return pump();
    case bus::pull_status::consumer_gone:  // removed once emptied (settled_removal.hpp), or electing
      return look_whether_done(true);
    case bus::pull_status::no_messages:
    case bus::pull_status::lost:
    case bus::pull_status::bytes_reached:
    case bus::pull_status::pin_lost:  // another replica's feeder holds the queue: wait in line
      return pump();
    default:
      retry_soon();
  }
}

// Nothing came for a while, or the consumer is not there: done once it holds nothing, delivered
// or not (another replica's feeder may be copying), or is gone; else asked again (`later`: in a
// second, as after a bus error).
void stream_feeder::look_whether_done(bool later) {
  auto owner = owner_.lock();
  if (!owner || stopped_) return;
  boost::asio::post(owner->bus_executor(), [weak = weak_from_this(), bus = bus_, ex = ex_, later,
                                            consumer = routing::consumer_name(queue_)] {
    auto left = bus->peek_queue(consumer);
    const bool done = left ? left->num_pending == 0 && left->num_ack_pending == 0
                           : left.error().kind == bus::bus_errc::not_found;
    boost::asio::post(ex, [weak, done, later] {
      auto self = weak.lock();
      if (!self || self->stopped_) return;
      if (!done) return later ? self->retry_soon() : self->pump();
      self->stop();
      boost::asio::post(self->ex_, std::move(self->finished_));
    });
  });
}

// After a bus error: asked again in a second, once however many errors came meanwhile.
void stream_feeder::retry_soon() {
  if (retry_armed_ || stopped_) return;
  retry_armed_ = true;
  retry_.expires_after(feed_retry_delay);
  retry_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    self->retry_armed_ = false;
    if (!ec) self->pump();
  });
}

}  // namespace amqp::broker
