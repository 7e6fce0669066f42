#pragma once
// Under limits retention the stream keeps every message until the adaptor removes it
// (docs/DESIGN.md, "Retention"). Each queue's messages are copies on its own subject, so what its
// consumer has settled up to its ack floor is a purge of that subject below the floor. A removal
// request per message would cost the server 3–4× the message itself (bench/BENCHMARKS.md), so the
// removal is batched: once a second, one purge for each queue some client of this broker settled
// deliveries of since the last round, however many it settled. An idle queue costs nothing here.
//
// A queue's consumer goes too once nobody used it for settings::idle_consumer_after (nothing held,
// no pull waiting, no reader here): it had settled everything it delivered, so its subject is
// purged below its last delivery first, and the next reader's consumer starts at what is left.
// One CONSUMER.LIST page per 256 consumers, every half of that time, over the queues read lately.
//
// A store made under interest retention by an earlier release becomes limits once no queue reads
// a previous release's filters any more (legacy_filters.hpp); until then the server removes what
// is settled, and this does nothing.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace amqp::broker {

class broker;

class settled_removal final : public std::enable_shared_from_this<settled_removal> {
 public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  explicit settled_removal(strand on);

  void start(std::weak_ptr<broker> b);
  void stop();  // idempotent

 private:
  void arm();  // on strand_
  // On the bus pool, one at a time; posted only when there is work, so an idle broker (or one
  // whose bus is gone) makes no request.
  void round(const std::shared_ptr<broker>& b, std::set<std::string> settled);
  bool limits(broker& b);
  bool remove_settled(broker& b, const std::string& consumer, const std::string& subject);
  bool idle_look_due() const { return std::chrono::steady_clock::now() >= next_idle_look_.load(); }
  void remove_idle_consumers(broker& b);

  std::weak_ptr<broker> broker_;
  strand strand_;
  boost::asio::steady_timer timer_;  // on strand_
  std::atomic<bool> stopped_{false};
  std::atomic<bool> limits_{false};
  std::atomic<bool> retrying_{false};                  // retry_ holds consumers
  std::atomic<std::chrono::steady_clock::time_point> next_idle_look_{};
  std::map<std::string, std::uint64_t> purged_below_;  // consumer → its last purge's bound; rounds only
  std::set<std::string> retry_;                        // consumers whose purge failed; rounds only
};

}  // namespace amqp::broker
