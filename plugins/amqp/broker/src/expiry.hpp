#pragma once
// Expiry at the head of a queue nobody consumes, and of a queue nobody uses (x-expires). A consumer finds expired messages as it reads
// (dead_letter.hpp, passed_over), but RabbitMQ also expires the head of an idle queue, which is
// what makes TTL plus a dead-letter exchange a delayed retry, and keeps message_count from
// counting the expired. So each replica looks, about once a second, at the head of every queue
// with an x-message-ttl or a dead-letter exchange whose consumer has no pull waiting (no consumer
// anywhere is reading it): an expired head is taken with a pull of one and given up.
//
// Only a head that was never delivered is looked at: a requeued message cannot be read without
// being delivered again, which would count against its delivery limit. It expires at the next read.
//
// A queue with x-expires is unused while its consumer has no pull waiting and nothing delivered
// unsettled, on any replica, and none here: since the latest of the consumer's last activity
// (the server's account: creation, delivery, ack) and the queue's `u.` key (a declare, a
// basic.get, the end of a last consumer: broker::note_use). Past its x-expires, the queue is
// deleted, as queue.delete deletes it; another replica deleting it at the same time is harmless.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/bus/client.hpp"

namespace amqp::broker {

class broker;

class expiry_sweeper final : public std::enable_shared_from_this<expiry_sweeper> {
 public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  expiry_sweeper(std::weak_ptr<broker> b, strand on);
  void start();
  void stop();  // idempotent; a round in progress ends at its next step

 private:
  // What a look at a queue's head found (on the bus pool).
  struct head {
    bool expired = false;                         // the head expired (or is not the queue's): take it
    bool unused = false;                          // the queue itself expired (x-expires): delete it
    std::optional<std::uint64_t> expires_at_ms;  // the head expires then: look again at that time
  };
  void tick_soon();
  void next_queue();
  head look(broker& b, const std::string& queue);
  head look_at_use(broker& b, const std::string& queue, const bus::queue_info& info, std::uint64_t expires);
  head look_at_head(broker& b, const std::string& queue, const bus::queue_info& info);
  void take(const std::string& queue);
  void looked(const std::string& queue, const head& h);
  void taken(const std::string& queue, bool gave_up);

  std::weak_ptr<broker> broker_;
  strand strand_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  // One round at a time: the queues still to look at, and the pull of one in progress.
  std::vector<std::string> round_;
  std::shared_ptr<bus::puller> puller_;
  std::uint64_t pull_ = 0;  // which pull an answer belongs to; each is answered once
  struct pace {
    std::chrono::steady_clock::time_point due{};
    int idle_seconds = 1;  // doubles, up to 8 s, while the queue has nothing to expire
    int taken = 0;         // heads taken in this round
  };
  std::map<std::string, pace> paces_;
};

}  // namespace amqp::broker
