#include "housekeeping/settled_removal.hpp"

#include <boost/asio/post.hpp>
#include <chrono>

#include "amqp/bus/client.hpp"
#include "broker_state.hpp"
#include "publish/route.hpp"

namespace amqp::broker {

settled_removal::settled_removal(strand on) : strand_(on), timer_(on) {}

void settled_removal::start(std::weak_ptr<broker> b) {
  broker_ = std::move(b);
  boost::asio::post(strand_, [self = shared_from_this()] { self->arm(); });
}

void settled_removal::stop() {
  stopped_ = true;
  boost::asio::post(strand_, [self = shared_from_this()] { self->timer_.cancel(); });
}

void settled_removal::arm() {
  if (stopped_) return;
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    auto b = self ? self->broker_.lock() : nullptr;
    if (ec || !b || self->stopped_) return;
    auto settled = b->take_settled_consumers();  // taken every round: nothing piles up
    if (self->limits_ && settled.empty() && !self->retrying_) return self->arm();
    boost::asio::post(b->bus_executor(), [self, b, settled = std::move(settled)]() mutable {
      self->round(b, std::move(settled));
    });
  });
}

void settled_removal::round(const std::shared_ptr<broker>& b, std::set<std::string> settled) {
  if (limits(*b)) {
    settled.insert(retry_.begin(), retry_.end());
    retry_.clear();
    for (const auto& consumer : settled) {
      if (stopped_) return;
      bool removed = true;
      if (consumer == bus::due_consumer) {
        removed = remove_settled(*b, consumer, std::string{bus::due_subject_root} + ".>");
      } else if (auto queue = b->queue_of_consumer(consumer)) {
        removed = remove_settled(*b, consumer, copy_subject(*queue));
      }
      if (!removed) retry_.insert(consumer);
    }
    retrying_ = !retry_.empty();
  }
  boost::asio::post(strand_, [self = shared_from_this()] { self->arm(); });
}

// A store of an earlier release keeps interest retention while a queue still reads that
// release's filters: messages shared by several queues cannot be removed by one queue's subject.
bool settled_removal::limits(broker& b) {
  if (limits_ || b.has_legacy_queues() || stopped_) return limits_;
  auto made = b.bus().use_limits_retention();
  if (!made) {
    b.warn("stream AMQP keeps interest retention for now: " + made.error().text + " (tried again in a second)");
    return false;
  }
  limits_ = *made;
  return limits_;
}

// What the consumer settled up to its ack floor goes; a lagging floor only leaves some for later.
// False when the bus did not answer (tried again next round).
bool settled_removal::remove_settled(broker& b, const std::string& consumer, const std::string& subject) {
  auto info = b.bus().peek_queue(consumer);
  if (!info) {
    if (info.error().kind != bus::bus_errc::not_found) return false;
    purged_below_.erase(consumer);  // the queue went, and its subject with it
    return true;
  }
  const std::uint64_t below = info->ack_floor_stream_seq + 1;
  auto& last = purged_below_[consumer];
  if (below <= last) return true;
  if (auto purged = b.bus().purge_subject_below(subject, below); !purged) {
    b.warn("removing what queue consumer '" + consumer + "' settled: " + purged.error().text +
           " (tried again in a second)");
    return false;
  }
  last = below;
  return true;
}

}  // namespace amqp::broker
