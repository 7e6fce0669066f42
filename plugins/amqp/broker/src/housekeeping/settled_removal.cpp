#include "housekeeping/settled_removal.hpp"

#include <boost/asio/post.hpp>
#include <chrono>

#include "amqp/bus/client.hpp"
#include "amqp/routing/subject.hpp"
#include "broker_state.hpp"
#include "housekeeping/dead_letter.hpp"

namespace amqp::broker {
namespace {
constexpr int most_removed_a_round = 256;
}  // namespace

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
    if (self->limits_ && settled.empty() && !self->retrying_ && !self->idle_look_due()) return self->arm();
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
        removed = remove_settled(*b, consumer, routing::queue_subject(*queue));
      }
      if (!removed) retry_.insert(consumer);
    }
    retrying_ = !retry_.empty();
    if (idle_look_due()) remove_idle_consumers(*b);
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

void settled_removal::remove_idle_consumers(broker& b) {
  const auto idle = b.config().idle_consumer_after;
  next_idle_look_ = std::chrono::steady_clock::now() + idle / 2;
  auto all = b.bus().peek_all_queues();
  if (!all) return;  // looked at again next time
  const auto idle_ms = static_cast<std::uint64_t>(std::chrono::milliseconds(idle).count());
  auto unused = [&](const bus::queue_info& info) {
    return info.num_ack_pending == 0 && info.num_waiting == 0 && info.last_active_ms + idle_ms <= wall_clock_ms();
  };
  int removed = 0;
  for (const auto& [consumer, listed] : *all) {
    if (stopped_) return;
    // A store upgraded from a release that gave every queue a consumer sheds them a batch a second.
    if (removed == most_removed_a_round) {
      next_idle_look_ = std::chrono::steady_clock::now();
      return;
    }
    if (!unused(listed)) continue;
    auto queue = b.queue_of_consumer(consumer);
    if (!queue || b.consumer_count(*queue) > 0) continue;
    // A stream queue's consumer is only what an earlier release left: one still holding what was
    // never copied into the queue's stream stays for the next start (broker::feed_stream_queues_left).
    if (b.type_of(*queue) == routing::queue_type::stream && listed.num_pending > 0) continue;
    // Looked at again just before it goes: a reader another replica started since the list
    // keeps it (one starting in the instant between marks what it took again: consumer.cpp).
    auto info = b.bus().peek_queue(consumer);
    if (!info || !unused(*info)) continue;
    const auto subject = routing::queue_subject(*queue);
    if (auto purged = b.bus().purge_subject_below(subject, info->delivered_stream_seq + 1); !purged) continue;
    b.forget_consumer(*queue);  // a read from now on makes it again
    if (auto gone = b.bus().delete_queue_consumer(consumer); !gone) {
      b.warn("removing the idle consumer of queue '" + *queue + "': " + gone.error().text + " (tried again later)");
      continue;
    }
    purged_below_.erase(consumer);
    ++removed;
  }
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
