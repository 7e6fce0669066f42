#pragma once
// Consumers: what pulls a queue's messages from the bus for one channel, bounded by credit.
//
// pull_source wraps one bus puller with the bookkeeping the bus leaves to us: how many messages
// the one outstanding request may still bring, and a drain when its user goes away while the
// request is still open on the server (what arrives then is nak'ed, never dropped).
// consumer is an AMQP consumer (basic.consume) built on a pull_source and credit pools.
#include <utility>  // before Asio: see platform-notes

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amqp/bus/client.hpp"

namespace amqp::broker {

class broker;
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

class pull_source : public std::enable_shared_from_this<pull_source> {
 public:
  class sink {
   public:
    virtual ~sink() = default;
    virtual void on_message(bus::delivery d) = 0;
    // The outstanding request ended; `unfilled` of the messages it asked for will not come.
    // `why` is null when the request delivered its whole batch.
    virtual void on_request_end(const bus::pull_event* why, std::uint32_t unfilled) = 0;
  };

  static std::shared_ptr<pull_source> open(std::shared_ptr<broker> b, const std::string& queue,
                                           const boost::asio::any_io_executor& ex, sink* s);
  ~pull_source();
  pull_source(const pull_source&) = delete;
  pull_source& operator=(const pull_source&) = delete;
  bool idle() const { return asked_ == 0; }
  // One request at a time (the bus does not say which request a status belongs to).
  void request(std::uint32_t batch, std::chrono::milliseconds expires);
  // The sink is going away: from now on arrivals are held (never shown), and the puller stops
  // once the outstanding request ended. Not sooner: when a redelivery is due and nats-server
  // 2.9 finds only requests that expired or whose inbox lost interest in its waiting queue, it
  // takes the redelivery off its queue, finds no one to send it to, and "redoes" it as a new
  // message by stepping its sequence back: the redelivery waits out the five-minute ack wait,
  // and the message before it is delivered a second time (measured: recover after cancel gave
  // m2 twice and no m1). Dropping our interest early would open that window wide; the expiry
  // one (a nak landing just as the queue's only request expires) stays, and is the server's.
  // So a requeue right after a cancel may bounce through the still-open request, and requeued
  // messages can come back permuted among themselves.
  void detach();
  // What was held may go back to the queue, once the outstanding request ended. A consumer
  // calls this when its last delivery is settled, so that what its client requeues reaches the
  // queue before what it never saw (RabbitMQ's order; JetStream 2.9 redelivers in NAK order).
  void release();

 private:
  pull_source(std::shared_ptr<broker> b, std::string queue, const boost::asio::any_io_executor& ex, sink* s)
      : broker_(std::move(b)), queue_(std::move(queue)), sink_(s), give_back_timer_(ex) {}
  void on_delivery(bus::delivery d);
  void on_event(const bus::pull_event& e);
  void hold(const bus::delivery& d);
  void request_ended();
  void give_back_at(std::chrono::steady_clock::time_point when);
  void give_back_held();
  void end_draining();
  void stop_puller();

  std::shared_ptr<broker> broker_;
  std::string queue_;
  std::shared_ptr<bus::puller> puller_;
  sink* sink_;
  std::uint32_t asked_ = 0;  // messages the outstanding request may still bring
  std::chrono::steady_clock::time_point request_ends_;  // when the server expires that request
  // Arrivals after detach, never shown to a client. A nak now would hand each straight back
  // to the same still-open request, so they go back together once that request has ended.
  std::vector<std::string> held_;
  bool released_ = false;                      // release() was called
  bool draining_ = false;  // detached with its request open: counted by the broker
  boost::asio::steady_timer give_back_timer_;  // in case release() or the request's end never come
};

// How a consumer's pulls are sized and how long one waits on the server.
inline constexpr std::uint32_t max_pull_batch = 256;
inline constexpr std::uint32_t no_ack_pull_batch = 64;
inline constexpr std::chrono::milliseconds pull_expires{2000};
inline constexpr std::chrono::milliseconds pull_retry_delay{1000};  // after a bus error
inline constexpr std::chrono::milliseconds pull_expiry_margin{500};  // the server's 408 is late

class consumer final : public pull_source::sink, public std::enable_shared_from_this<consumer> {
 public:
  struct options {
    std::string tag;
    std::string queue;
    bool no_ack = false;
    std::uint16_t prefetch = 0;  // the channel's per-consumer prefetch when it was created
  };
  consumer(basic_state& channel, options o);
  ~consumer() override;

  const std::string& tag() const { return options_.tag; }
  const std::string& queue() const { return options_.queue; }
  bool no_ack() const { return options_.no_ack; }

  void start();
  // Asks the bus for as many messages as credit allows, unless a request is outstanding.
  void pump();
  // One of its deliveries was settled (or requeued): its credit is free again.
  void release();
  // Detached from the channel: no more deliveries; the source drains.
  void stop();

  void on_message(bus::delivery d) override;
  void on_request_end(const bus::pull_event* why, std::uint32_t unfilled) override;

 private:
  std::uint32_t credit() const;
  void give(std::uint32_t n);
  void retry_later();
  bool wait_for_socket();
  bool wait_for_queue();

  basic_state* channel_;  // null once stopped
  options options_;
  std::shared_ptr<broker> broker_;
  credit_pool own_;
  std::shared_ptr<credit_pool> global_;
  std::shared_ptr<pull_source> source_;
  boost::asio::steady_timer retry_;
  bool retry_armed_ = false;
  bool drain_armed_ = false;  // a no-ack consumer waits for the connection's output to drain
  bool queue_wait_armed_ = false;  // waits for a cancelled consumer's request on its queue
};

}  // namespace amqp::broker
