#include "housekeeping/length_limit.hpp"

#include <boost/asio/post.hpp>
#include <chrono>
#include <memory>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "channel/channel_context.hpp"
#include "housekeeping/dead_letter.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {
namespace {

// One no-wait pull after another on the queue's own consumer: each brings the head.
class head_dropper : public std::enable_shared_from_this<head_dropper> {
 public:
  head_dropper(broker& b, boost::asio::any_io_executor ex, std::string queue, std::uint64_t n,
               std::function<void()> done)
      : broker_(b.weak_from_this()),
        bus_(b.bus_ptr()),
        ex_(std::move(ex)),
        queue_(std::move(queue)),
        left_(n),
        done_(std::move(done)) {}

  void start(broker& b) {
    b.after_consumer_made(queue_, ex_, [self = shared_from_this()](const bus::bus_status& made) {
      auto owner = self->broker_.lock();
      if (owner && !made)  // the queue stays over its limit until its next publish
        owner->warn("dropping the head of queue '" + self->queue_ + "': " + made.error().text);
      if (!owner || !made) return self->finish();
      self->pull(*owner);
    });
  }

 private:
  void pull(broker& b) {
    // The callbacks keep it alive until its puller has stopped (which lets them go).
    bus::puller_callbacks callbacks;
    callbacks.on_delivery = [self = shared_from_this()](bus::delivery d) { self->taken(std::move(d)); };
    callbacks.on_event = [self = shared_from_this()](bus::pull_event) { self->finish(); };  // nothing more
    puller_ = b.bus().make_puller(routing::consumer_name(queue_), ex_, std::move(callbacks), b.sharing_of(queue_));
    next();
  }

  void next() {
    if (left_ == 0) return finish();
    puller_->request(1, std::chrono::milliseconds(0));
  }

  void taken(bus::delivery d) {
    auto b = broker_.lock();
    if (!b || !done_) {
      bus_->nak(d.reply);
      return finish();
    }
    // Expired or not routed here: passed over, and it does not count as one dropped.
    if (!passed_over(*b, ex_, queue_, d)) {
      give_up(*b, ex_, queue_, death_reason::maxlen, std::move(d));
      --left_;
    }
    next();
  }

  void finish() {
    if (!done_) return;
    if (puller_) puller_->stop();
    auto done = std::move(done_);
    done_ = nullptr;
    done();
  }

  std::weak_ptr<broker> broker_;
  std::shared_ptr<bus::client> bus_;
  boost::asio::any_io_executor ex_;
  std::string queue_;
  std::uint64_t left_;
  std::function<void()> done_;
  std::shared_ptr<bus::puller> puller_;
};

}  // namespace

counts_or_failure ready_counts(bus::client& bus, const std::vector<std::string>& queues, bool for_dropping) {
  std::vector<std::uint64_t> counts;
  for (const auto& q : queues) {
    auto info = bus::queue_counts(bus, routing::consumer_name(q), routing::queue_subject(q), false);
    if (!info && info.error().kind == bus::bus_errc::not_found) {
      counts.push_back(0);
      continue;
    }
    if (!info) return info.error();
    if (for_dropping) info->num_ack_pending = info->held_here;  // nothing counted requeued
    counts.push_back(info->ready());
  }
  return counts;
}

void drop_heads(broker& b, boost::asio::any_io_executor ex, const std::string& queue, std::uint64_t n,
                std::function<void()> done) {
  if (n == 0) return boost::asio::post(ex, std::move(done));
  auto dropper = std::make_shared<head_dropper>(b, std::move(ex), queue, n, std::move(done));
  dropper->start(b);
}

}  // namespace amqp::broker
