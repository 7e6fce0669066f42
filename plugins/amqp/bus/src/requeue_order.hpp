#pragma once
// Requeued messages come back first, in the order they were requeued.
//
// Requeue before pull: nats-server applies acknowledgements and pull requests from two separate
// queues, so a NAK written before a pull may be applied after it, and the pull then hands out
// later messages first (bus test "a pull right after a nak…": a later message in every run
// without this). So a NAK asks for the server's answer, and its queue's pulls wait until all its
// NAKs are answered; requeue_wait at the most, so a server that does not answer cannot stop a
// queue.
//
// Requeue after the drain: nats-server keeps a pull request whose inbox lost interest until it
// next looks at its waiting requests. A NAK applied while a stopping consumer's request is still
// alive hands the message straight back to that request (it goes back again, behind the others);
// one applied while only dead requests are listed makes the server take the first requeued
// message off its redelivery queue, find no one to give it to, and append it again. Either way
// the requeued messages come back permuted. So while a puller of a queue drains, that queue's
// NAKs are held, in call order, and sent once the drain is over and the server dropped the dead
// requests (puller_impl::drained); drain_wait at the most. A count taken meanwhile already has
// them: a NAK'ed delivery is no longer held (queue_info::ready).
//
// The order itself is the server's: it redelivers NAK'ed messages ahead of the rest, in the order
// it took the NAKs (`addToRedeliverQueue` appends). So a NAK goes at once, whatever else the
// client still holds of the queue, and the next read gets it; a method that requeues several
// (nack multiple, basic.recover, a channel's close) has its caller NAK them in stream order (the
// broker's settle_all).
//
// This part only keeps the books: the client sends the NAKs and posts the resumes it returns.
// Thread-safe; no callback runs under its lock.
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace amqp::bus::detail {

class requeue_order {
 public:
  using clock = std::chrono::steady_clock;
  using resume_fn = std::pair<boost::asio::any_io_executor, std::function<void()>>;
  using held_nak = std::pair<std::uint64_t, std::string>;  // NAK id, ack subject

  // Longer than the server takes to answer a NAK even on a loaded machine; short enough that a
  // server that never answers delays a queue's next pull only briefly.
  static constexpr std::chrono::milliseconds requeue_wait{2000};
  // Longer than a drain (its UNSUB confirmed, 5 s at the most) and the request that drops the
  // dead pull requests take: NAKs held longer than this go out anyway.
  static constexpr std::chrono::milliseconds drain_wait{12000};

  // A NAK of `queue` is made: the queue's pulls wait for its answer. False when a drain of the
  // queue holds it back (drain_finished or expire gives it back, to be sent then).
  bool nak_made(std::uint64_t id, const std::string& queue, std::string reply, clock::time_point now);
  // True when `queue` has NAKs not answered yet: `resume` is returned once it has none.
  bool hold_pulls(const std::string& queue, resume_fn resume);
  // The server answered NAK `id` (or it could not be sent): what waited for it to resume.
  std::vector<resume_fn> answered(std::uint64_t id);
  // A puller of `queue` drains / drained: the queue's NAKs are held meanwhile; the held ones
  // are returned, in call order, when its last drain ends.
  void drain_started(const std::string& queue, clock::time_point now);
  std::vector<held_nak> drain_finished(const std::string& queue);
  // Lifts the barriers older than requeue_wait (what waited, returned) and the drain gates older
  // than drain_wait (their NAKs into `unheld`, in call order, to be sent).
  std::vector<resume_fn> expire(clock::time_point now, std::vector<held_nak>& unheld);

  bool any_unanswered() const;  // a NAK the server has not answered
  bool any_open() const;        // a barrier or a gate: something expire() may lift

 private:
  struct barrier {
    std::size_t unanswered = 0;
    clock::time_point since{};
    std::vector<resume_fn> waiting;
  };
  struct gate {
    std::size_t draining = 0;
    clock::time_point since{};
    std::vector<held_nak> held;  // in call order
  };
  void release_gate_locked(const std::string& queue, std::vector<held_nak>& out);

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::string> naks_;  // unanswered NAK id → queue
  std::unordered_map<std::string, barrier> barriers_;    // by queue, while it has any
  std::unordered_map<std::string, gate> gates_;          // by queue, while a puller drains
};

}  // namespace amqp::bus::detail
