#pragma once
// The latest subjects the server refused this client's publishes to. The server says so once,
// asynchronously (`-ERR 'Permissions Violation for Publish to "<subject>"'`), and never answers
// a request to such a subject: a request that timed out asks here whether it was refused
// meanwhile, and then ends denied instead. Thread-safe.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>

namespace amqp::bus::detail {

class permission_denials {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  static constexpr std::size_t remembered = 256;  // the oldest go first

  void note(std::string subject, time_point at = std::chrono::steady_clock::now()) {
    std::lock_guard lock{mutex_};
    denials_.push_back({std::move(subject), at});
    if (denials_.size() > remembered) denials_.pop_front();
  }
  // True when a publish to `subject` was refused at or after `since`.
  bool since(const std::string& subject, time_point since) const {
    std::lock_guard lock{mutex_};
    return std::any_of(denials_.begin(), denials_.end(),
                       [&](const denial& d) { return d.subject == subject && d.at >= since; });
  }

 private:
  struct denial {
    std::string subject;
    time_point at{};
  };
  mutable std::mutex mutex_;
  std::deque<denial> denials_;  // oldest first
};

}  // namespace amqp::bus::detail
