#pragma once
// An AMQP consumer (basic.consume): one bus puller on its queue's durable, kept asked for as
// much as the consumer's credit allows, so that deliveries flow without a round trip between
// batches, and never for more (prefetch is an exact in-flight bound).
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "amqp/bus/client.hpp"
#include "deliver/delivery.hpp"

namespace amqp::broker {

struct basic_state;

// An in-flight bound: `used` counts deliveries not yet settled plus messages asked for and
// not yet arrived. limit 0 = unbounded.
struct credit_pool {
  std::uint32_t limit = 0;
  std::uint32_t used = 0;
  std::uint32_t available(std::uint32_t cap) const {
    if (limit == 0) return cap;
    return used >= limit ? 0 : std::min(cap, limit - used);
  }
  void take(std::uint32_t n) { used += n; }
  void give(std::uint32_t n) { used = n > used ? 0 : used - n; }
};

// How a consumer's pulls are sized and how long one waits on the server.
inline constexpr std::uint32_t max_pull_window = 256;  // most messages asked for at once
inline constexpr std::chrono::milliseconds pull_expires{30000};
inline constexpr std::chrono::milliseconds pull_retry_delay{1000};  // after a bus error
// How long free credit below half the window waits for more before it is asked for anyway.
inline constexpr std::chrono::milliseconds top_up_delay{2};

class consumer final : public std::enable_shared_from_this<consumer> {
 public:
  struct options {
    std::string tag;
    std::string queue;
    bool no_ack = false;
    std::uint16_t prefetch = 0;  // the channel's per-consumer prefetch when it was created
    int priority = 0;            // x-priority (bus::lowest_consumer_priority..highest_consumer_priority)
    // A stream queue's consumer: its reader on the queue's stream (bus::client::create_stream_reader),
    // deleted when the consumer goes. Empty for every other queue's.
    std::string reader{};
    bus::stream_start start{};  // where the reader started (x-stream-offset)
  };
  consumer(basic_state& channel, options o);
  ~consumer();

  const std::string& tag() const { return options_.tag; }
  const std::string& queue() const { return options_.queue; }
  bool no_ack() const { return options_.no_ack; }
  bool cancelling() const { return static_cast<bool>(cancelled_); }
  bool reads_stream() const { return !options_.reader.empty(); }

  void start();
  // Asks the bus for more once half the consumer's window is free, or, with less free and nothing
  // asked for, a moment later (a client may wait for its whole prefetch before it acks).
  void pump();
  // One of its deliveries was settled (or requeued): its credit is free again.
  void release();
  // basic.cancel: asks for nothing more and ends the bus's open requests; what they still bring
  // is delivered as before, then `done` runs (the cancel-ok), after which nothing is delivered.
  void cancel(std::function<void()> done);
  // The channel (or the queue) is gone: nothing more is delivered, and what still arrives goes
  // back to the queue at once. Drops a cancel in progress.
  void stop();

 private:
  void on_delivery(bus::delivery d);
  void on_event(const bus::pull_event& e);
  void on_stopped();
  bool may_ask() const;
  std::uint32_t wanted(bool top_up) const;
  void ask(std::uint32_t n);
  void top_up_later();
  void give(std::uint32_t n);
  template <class Then>
  void later(boost::asio::steady_timer& timer, bool consumer::*armed, std::chrono::milliseconds delay, Then then);
  void retry_later();
  void remake_consumer();
  bool wait_for_socket();
  void drop_reader();  // once, when it asks for nothing more
  void delete_reader(const std::string& reader);
  // The bus lost the reader (deleted after its inactive threshold, or a bus failure): a new one
  // starts after the last message delivered (where the first started, when none was).
  void reopen_reader();
  void start_puller();

  basic_state* channel_;  // null once stopped
  options options_;
  bool single_active_ = false;  // x-single-active-consumer: asks only when first in line
  // Read once at start: a queue's type never changes while it exists (a redeclaration with
  // another is refused), and a deleted queue cancels its consumers.
  delivery_count shown_count_ = delivery_count::never;
  std::shared_ptr<bus::client> bus_;
  credit_pool own_;
  std::shared_ptr<credit_pool> global_;
  std::shared_ptr<bus::puller> puller_;
  boost::asio::steady_timer retry_;
  bool retry_armed_ = false;
  boost::asio::steady_timer top_up_;
  bool top_up_armed_ = false;
  bool drain_armed_ = false;  // waits for the connection's output to drain
  std::function<void()> cancelled_;  // cancel()'s continuation, until the puller stopped
  bool reader_dropped_ = false;
  bool reopening_ = false;
  bool cancel_done_ = false;       // its cancel was answered: no reader is opened again
  std::uint64_t last_seq_ = 0;     // the highest stream sequence it delivered
  // Its queue's bus consumer went and was made again (remake_consumer): what it had delivered up
  // to then comes again from the new one as if new, and is shown redelivered.
  std::uint64_t delivered_before_remake_ = 0;
  std::uint64_t generation_ = 0;   // its current puller's: an older one's deliveries are dropped
};

}  // namespace amqp::broker
