#pragma once
// The upgrade from a store of the release before #55's step 3 (docs/STORAGE.md, "Upgrade").
// That release stored one message per publish on `amqp.<exchange>.<key>` and gave each queue's
// consumer its bindings' filters besides its own subject `amqp._.<queue>`. This release routes at
// publish and stores a copy per queue on the queue's own subject, so a queue's consumer needs
// only that subject; but narrowing an old consumer at once would drop what it still has pending
// on exchange subjects.
//
// So at boot every queue consumer whose filters reach beyond its own subject is a legacy queue:
// its filters are kept (broker::filters_of answers them, so a re-declare, a converge or a purge
// makes the consumer with them), with the stream's last sequence at boot as its mark. Nothing
// publishes to exchange subjects any more, so what the old filters hold ends at the mark. One
// timer, only while legacy queues are left, narrows each to its own subject once nothing of its
// old filters is left: its ack floor reached the mark, or no message on an old filter lies
// between the floor and the mark (a delivered, unsettled one is still stored, so it is found).
// A queue whose consumer does not move is looked at less and less often, every second up to
// every 32 s.
//
// Replicas of the previous release must all be stopped first: one would go on publishing to
// exchange subjects, past the mark. Two replicas of this release booting on the same old store
// both keep the filters; the first to narrow wins and the other drops the queue once it sees the
// consumer narrowed.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "amqp/bus/client.hpp"

namespace amqp::broker {

class broker;

class legacy_filters final : public std::enable_shared_from_this<legacy_filters> {
 public:
  using strand = boost::asio::strand<boost::asio::io_context::executor_type>;
  explicit legacy_filters(strand on);

  // Blocking, at boot before any queue consumer is converged: lists the queue consumers and keeps
  // the legacy ones. The bus error when they cannot be listed (the boot fails closed: narrowing
  // blindly would lose messages).
  std::optional<bus::bus_error> load(broker& b);
  void start(std::weak_ptr<broker> b);  // the timer, while legacy queues are left
  void stop();                          // idempotent; a round in progress ends at its next queue

  // Any thread: the filters the queue's consumer keeps, or nullopt when it reads only its own
  // subject.
  std::optional<std::vector<std::string>> filters_of(const std::string& queue) const;
  // Any thread: the queue was deleted; one declared again under its name starts narrow.
  void forget(const std::string& queue);
  // Any thread: no queue reads a previous release's filters any more.
  bool empty() const;

 private:
  struct legacy_queue {
    std::vector<std::string> filters;  // as the previous release left them, sorted
    std::vector<std::string> old;      // of those, the ones that are not the queue's own subject
    std::uint64_t mark = 0;            // the stream's last sequence at boot
    bool settled = false;              // nothing of `old` left: being narrowed
    std::chrono::steady_clock::time_point due{};
    int seconds = 1;                   // until the next look, when the consumer does not move
    std::uint64_t ack_floor = 0;       // at the last look
  };
  struct look_result {
    // done: the consumer reads only its own subject (or is gone); left: something of the old
    // filters is; narrowing: asked to read only its own subject; failed: the bus did not answer.
    enum { done, left, narrowing, failed } what = failed;
    std::uint64_t ack_floor = 0;
  };

  void arm();
  void round(const std::shared_ptr<broker>& b);  // on the bus pool
  std::vector<std::pair<std::string, legacy_queue>> due(std::chrono::steady_clock::time_point now) const;
  look_result look(broker& b, const std::string& queue, const legacy_queue& q);
  std::optional<bool> nothing_left(broker& b, const std::string& queue, const legacy_queue& q,
                                   const bus::queue_info& info);
  void narrow(broker& b, const std::string& queue);
  void paced(broker& b, const std::string& queue, const look_result& r, std::chrono::steady_clock::time_point now);
  bool stopped() const;

  std::weak_ptr<broker> broker_;     // set by start
  strand strand_;
  boost::asio::steady_timer timer_;  // on strand_
  mutable std::mutex mutex_;
  std::map<std::string, legacy_queue> queues_;  // under mutex_
  bool stopped_ = false;                         // under mutex_
};

}  // namespace amqp::broker
