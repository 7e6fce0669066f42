#pragma once
// What an earlier release left for a stream queue on stream AMQP, copied into the queue's own
// stream. That release stored a stream queue's messages on its subject there, for the queue's
// consumer, and a feeder copied them over; now a publish goes to the queue's stream directly
// (route.hpp), so a feeder runs only at open, for a consumer that still holds messages, and
// stops once none is left. The consumer is a pinned (single-active) group, so one replica's feeder
// works at a time and the others wait. A message is acked on stream AMQP only once its copy is
// stored, and each copy carries the message's AMQP stream sequence as Nats-Msg-Id, so a copy made
// again after a crash is kept once.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "amqp/bus/client.hpp"

namespace amqp::broker {

class broker;

class stream_feeder final : public std::enable_shared_from_this<stream_feeder> {
 public:
  // `ex` must be serial (the broker's mirror strand); `finished` is posted to it once the consumer
  // holds nothing more.
  stream_feeder(std::weak_ptr<broker> owner, std::shared_ptr<bus::client> bus, std::string queue,
                boost::asio::any_io_executor ex, std::function<void()> finished);
  void start();
  void stop();

 private:
  void pump();
  void on_delivery(bus::delivery d);
  void on_event(const bus::pull_event& e);
  void copied(const std::string& reply, const bus::bus_status& outcome);
  void retry_soon();
  void look_whether_done(bool later);

  std::weak_ptr<broker> owner_;
  std::shared_ptr<bus::client> bus_;
  std::string queue_;
  boost::asio::any_io_executor ex_;
  std::function<void()> finished_;
  std::shared_ptr<bus::puller> puller_;
  boost::asio::steady_timer retry_;  // after a bus error only
  bool retry_armed_ = false;
  std::uint32_t copying_ = 0;  // delivered, copy not yet stored
  bool stopped_ = false;
};

}  // namespace amqp::broker
