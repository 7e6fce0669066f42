#pragma once
// Expiry at the head of a queue nobody consumes, and of a queue nobody uses (x-expires). A consumer finds expired messages as it reads
// (dead_letter.hpp, passed_over), but RabbitMQ also expires the head of an idle queue, at its
// TTL, which is what makes TTL plus a dead-letter exchange a delayed retry, and keeps
// message_count from counting the expired. So a queue with an x-message-ttl or a dead-letter
// exchange whose consumer has no pull waiting (no consumer anywhere is reading it) is looked at
// when its head may expire: an expired head is taken with a pull of one and given up.
//
// Looks are driven by events, not by a timer per queue: a publish of this process tells the
// sweeper when its message expires in each queue it reaches (broker::expect_expiries), and so do
// a queue's last consumer here going and a declaration or use with x-expires; a look that finds a
// head expiring later looks again then. A queue with nothing to expire costs nothing until the
// next event. Each replica sweeps for its own publishes; a look finding the queue being read, or
// a head it cannot judge, looks again a second later, backing off to a minute. At start every such
// queue is looked at once.
//
// A requeued message cannot be read without being delivered again, which counts against its
// delivery limit, and the bus does not tell a requeued message from one a reader on another
// replica holds: so with one of those after the consumer's ack floor, the queue is taken only
// once that message and the never-delivered head have both expired (whichever a pull brings
// leaves the queue then).
//
// A queue with x-expires is unused while it has no consumer here and no pull waiting on any
// replica: since the latest of the consumer's last activity (the server's account: creation,
// delivery, ack) and the queue's `u.` key (a declare, a basic.get, a consumer's start and end:
// broker::note_use; and every look while a consumer here lives, so that one holding all its
// prefetch, which other replicas cannot see, keeps it). Deliveries held unsettled do not count,
// as in RabbitMQ: the bus counts a requeued message so until it is delivered again, which in an
// unused queue is never. Past its x-expires, the queue is deleted, as queue.delete deletes it;
// another replica deleting it at the same time is harmless.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/bus/client.hpp"

namespace amqp::routing {
class topology;
}

namespace amqp::broker {

class broker;

// A message published now may expire at the head of `queue` in `in_ms`.
struct expiry_look {
  std::string queue;
  std::uint64_t in_ms;
};

// The looks a message with these properties needs in the queues it reaches: those with an
// x-message-ttl, or its own `expiration` where a dead-letter exchange waits for it. Read with the
// route, from the same mirror read; nothing while no queue has either.
std::vector<expiry_look> expiries_of(const routing::topology& t, const std::vector<std::string>& queues,
                                     std::string_view property_octets);

class expiry_sweeper final : public std::enable_shared_from_this<expiry_sweeper> {
 public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  using clock = std::chrono::steady_clock;
  expiry_sweeper(std::weak_ptr<broker> b, strand on);
  void start();  // every queue that may expire something is looked at once
  void stop();   // idempotent; a round in progress ends at its next step
  // Any thread: `queue` is looked at by `at` at the latest.
  void look_by(std::string queue, clock::time_point at);

 private:
  // What a look at a queue found (on the bus pool).
  struct head {
    bool expired = false;                         // the head expired (or is not the queue's): take it
    bool unused = false;                          // the queue itself expired (x-expires): delete it
    std::optional<std::uint64_t> expires_at_ms;  // the head expires then: look again at that time
    bool again = false;  // read elsewhere, a head that may never expire, or a failed look: look again later
    std::uint64_t ack_floor = 0;  // the consumer's: heads given up at or below it are settled on the bus
  };
  // The first message at or after a stream sequence: when it expires.
  struct message_expiry {
    bool failed = false;                    // the bus did not answer
    bool found = false;                     // there is one
    std::optional<std::uint64_t> at_ms;     // when it expires (0: at once); none: never
  };
  void schedule(const std::string& queue, clock::time_point at, bool only_earlier);
  int back_off(const std::string& queue);  // seconds until the next look of a queue that must wait
  void unschedule(const std::string& queue);
  void arm();
  void on_timer();
  void next_queue();
  // `given_up`: the stream sequences of the heads of `queue` this sweeper gave up.
  head look(broker& b, const std::string& queue, const std::set<std::uint64_t>& given_up);
  head look_at_use(broker& b, const std::string& queue, const bus::queue_info& info, std::uint64_t expires);
  head look_at_head(broker& b, const std::string& queue, const bus::queue_info& info,
                    const std::set<std::uint64_t>& given_up);
  static head due_at(std::uint64_t wall_ms);  // a head expiring then: taken now, or looked at then
  message_expiry expiry_from(broker& b, const std::string& queue, const std::vector<std::string>& filters,
                             std::uint64_t from, const std::set<std::uint64_t>& skip);
  void take(const std::string& queue);
  void looked(const std::string& queue, const head& h);
  void taken(const std::string& queue, bool gave_up);

  std::weak_ptr<broker> broker_;
  strand strand_;
  boost::asio::steady_timer timer_;
  bool stopped_ = false;
  // The looks to make, by time; a queue has one at most. Everything runs on the strand.
  std::set<std::pair<clock::time_point, std::string>> dues_;
  std::map<std::string, clock::time_point, std::less<>> due_of_;
  // One round at a time: the queues due, and the pull of one in progress.
  std::deque<std::string> round_;
  bool in_round_ = false;
  std::shared_ptr<bus::puller> puller_;
  std::uint64_t pull_ = 0;  // which pull an answer belongs to; each is answered once
  std::map<std::string, int> taken_;  // heads taken in a row, per queue
  std::map<std::string, int> again_seconds_;  // the next "look again" delay of a queue being read
  // Heads given up (settled: termed, or nakked when a copy was not stored) that the bus may still
  // count unacknowledged, per queue, until its ack floor passes them. They are not requeued heads
  // of someone else's: a look must not back off for them (a nakked one is taken again).
  std::map<std::string, std::set<std::uint64_t>, std::less<>> given_up_;
};

}  // namespace amqp::broker
