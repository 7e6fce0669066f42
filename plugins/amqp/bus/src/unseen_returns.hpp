#pragma once
// Deliveries this client handed back unseen: they reached it for a consumer or a get that was
// gone, so no AMQP client was shown them, yet JetStream counts them delivered. RabbitMQ would
// have kept them in the queue: every later delivery through this client leaves those returns
// out of its count (redelivered, x-delivery-count). An entry lives from the first return until
// the message is acked or dropped here, keep_for after its last return at the most (another
// process may take it, or it may go).
// Thread-safe: executors return, nats threads take.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace amqp::bus::detail {

class unseen_returns {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::minutes keep_for{10};

  void returned(std::string_view queue, std::uint64_t seq, clock::time_point now) {
    std::lock_guard lock{mutex_};
    forget_older_locked(now - keep_for);
    auto& returns = entries_[{std::string{queue}, seq}];
    ++returns.count;
    returns.last = now;
    by_time_.emplace_back(now, key{std::string{queue}, seq});
    size_ = entries_.size();
  }
  // The unseen returns of the message at `seq` of `queue`.
  std::uint64_t count(std::string_view queue, std::uint64_t seq) const {
    if (size_ == 0) return 0;  // the common case, without the lock
    std::lock_guard lock{mutex_};
    auto it = entries_.find(key{std::string{queue}, seq});
    return it == entries_.end() ? 0 : it->second.count;
  }
  // The message left the queue: its returns are forgotten.
  void forget(std::string_view queue, std::uint64_t seq) {
    if (size_ == 0) return;
    std::lock_guard lock{mutex_};
    entries_.erase(key{std::string{queue}, seq});
    size_ = entries_.size();
  }

 private:
  using key = std::pair<std::string, std::uint64_t>;
  struct entry {
    std::uint64_t count = 0;
    clock::time_point last{};
  };
  void forget_older_locked(clock::time_point before) {
    while (!by_time_.empty() && by_time_.front().first < before) {
      auto it = entries_.find(by_time_.front().second);
      if (it != entries_.end() && it->second.last < before) entries_.erase(it);
      by_time_.pop_front();
    }
  }

  mutable std::mutex mutex_;
  std::map<key, entry> entries_;
  std::deque<std::pair<clock::time_point, key>> by_time_;  // every return, oldest first
  std::atomic<std::size_t> size_{0};                         // entries_.size(), read without the lock
};

}  // namespace amqp::bus::detail
